// Compaction during generation (compaction/online_compaction.h) on the real stories260K model: the
// schedule worked by hand, a keep-everything method changes nothing, and entries compacted before
// carry their beta into the next fit (HeadCompactionInput::key_bias).
#include "compaction/online_compaction.h"

#include <gtest/gtest.h>

#include "compaction/head_attention.h"
#include "compaction/head_diagnostics.h"
#include "compaction/reference_queries.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

class OnlineCompactionTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
  }
  static void TearDownTestSuite() { delete model_; }
  static Model* model_;
};
Model* OnlineCompactionTest::model_ = nullptr;

OnlineCompactionOptions options(const std::string& method, int limit, int keep, double ratio, int max = 0) {
  OnlineCompactionOptions o;
  o.method = parse_method_spec(method);
  o.limit = limit;
  o.keep_recent = keep;
  o.ratio = ratio;
  o.max_compactions = max;
  return o;
}

// limit 40, keep 8, ratio 0.25: at 40 entries a head keeps 8 recent + floor(0.25 * 32) = 8, i.e.
// 16; 24 tokens later it holds 40 again. So compactions after 40, 64 and 88 tokens fed, each
// 20 heads x 40 -> 20 x 16 entries.
TEST_F(OnlineCompactionTest, ScheduleWorkedByHand) {
  const Transformer tr(model_->config, model_->weights);
  Sampler sampler(model_->tokenizer->vocab_size(), 0.0f, 0.9f, 1);
  std::vector<OnlineCompactionEvent> ev;
  const GenerationResult r = generate_with_online_compaction(tr, *model_->tokenizer, "Once upon a time", 100, sampler,
                                                             options("random", 40, 8, 0.25), &ev);
  const int heads = model_->config.n_layers * model_->config.n_kv_heads;
  std::vector<int> want;
  for (int at = 40; at <= r.positions; at += 24) want.push_back(at);
  ASSERT_GE(want.size(), 2u) << "generation stopped after " << r.positions << " positions";
  ASSERT_EQ(ev.size(), want.size());
  for (std::size_t i = 0; i < ev.size(); ++i) {
    EXPECT_EQ(ev[i].tokens_fed, want[i]);
    EXPECT_EQ(ev[i].entries_before, static_cast<std::size_t>(40 * heads));
    EXPECT_EQ(ev[i].entries_after, static_cast<std::size_t>(16 * heads));
  }
}

TEST_F(OnlineCompactionTest, KeepingEveryEntryChangesNothing) {
  const Transformer tr(model_->config, model_->weights);
  Sampler a(model_->tokenizer->vocab_size(), 0.0f, 0.9f, 1), b(model_->tokenizer->vocab_size(), 0.0f, 0.9f, 1);
  const GenerationResult plain = generate(tr, *model_->tokenizer, "Lily saw a big dog", 90, a);
  std::vector<OnlineCompactionEvent> ev;
  const GenerationResult online = generate_with_online_compaction(tr, *model_->tokenizer, "Lily saw a big dog", 90, b,
                                                                  options("recent", 30, 4, 1.0, 3), &ev);
  EXPECT_EQ(online.generated, plain.generated);
  EXPECT_EQ(online.text, plain.text);
  ASSERT_EQ(ev.size(), 3u);  // max_compactions
  for (const auto& e : ev) EXPECT_EQ(e.entries_after, e.entries_before);
}

// After one AM compaction the older entries carry beta. Compacting again with AM at ratio 1 (every
// entry kept, beta and values refitted) must reproduce the biased attention; the same fit without
// the old beta (key_bias left out) matches another attention and misses the mass.
TEST_F(OnlineCompactionTest, EarlierBetaEntersTheNextFit) {
  const Transformer tr(model_->config, model_->weights);
  std::vector<int> ids = model_->tokenizer->encode("Once upon a time, there was a little girl named Lily. She loved to "
                                                   "play outside in the park with her friends every day.", true);
  KVCache cache = tr.make_cache();
  ForwardOptions fo;
  fo.logits = LogitsMode::None;
  tr.forward(ids, cache, fo);
  compact_all_but_recent(tr, *model_->tokenizer, cache, ids, options("am", 10, 4, 0.25));
  const HeadCache before = cache.head(2, 1);
  ASSERT_TRUE(before.has_bias());
  const ReferenceQueries q = repeat_queries_over(tr, *model_->tokenizer, cache, ids);
  HeadCompactionInput in;
  in.keys = before.keys.data();
  in.values = before.values.data();
  in.key_bias = before.beta.data();
  in.T = static_cast<int>(before.length());
  in.head_dim = cache.head_dim();
  in.queries = q.at(2, 1).data();
  in.n_queries = q.count(2, 1);

  KVCache again = cache;
  compact_all_but_recent(tr, *model_->tokenizer, again, ids, options("am", 2, 0, 1.0));
  const HeadDiagnostics with_bias = diagnose_head(in, again.head(2, 1));
  EXPECT_LT(with_bias.rel_l2_max, 2e-3);
  EXPECT_LT(with_bias.mass_err_max, 2e-3);
  EXPECT_EQ(again.head(2, 1).positions, before.positions);  // every entry kept, in order

  HeadCompactionInput unbiased = in;
  unbiased.key_bias = nullptr;
  const CompactedHead c = compact_head(parse_method_spec("am"), unbiased, in.T, 2, model_->config.n_layers, 0);
  HeadCache h;
  h.keys = c.keys, h.values = c.values, h.beta = c.beta, h.positions.assign(c.beta.size(), 0);
  EXPECT_GT(diagnose_head(in, h).mass_err_max, 0.05);  // the old beta matters
}

TEST_F(OnlineCompactionTest, BadOptionsAreErrors) {
  const Transformer tr(model_->config, model_->weights);
  Sampler s(model_->tokenizer->vocab_size(), 0.0f, 0.9f, 1);
  EXPECT_THROW(generate_with_online_compaction(tr, *model_->tokenizer, "Once", 10, s, options("am", 8, 8, 0.5)), Error);
  EXPECT_THROW(generate_with_online_compaction(tr, *model_->tokenizer, "Once", 10, s, options("am", 20, 8, 0.0)), Error);
  EXPECT_THROW(generate_with_online_compaction(tr, *model_->tokenizer, "Once", 10, s, options("snapkv", 20, 8, 0.5)),
               Error);
  EXPECT_THROW(generate_with_online_compaction(tr, *model_->tokenizer, "Once", 10, s,
                                               options("am:queries=context", 20, 8, 0.5)),
               Error);
}

}}  // namespace
}  // namespace kvcompact
