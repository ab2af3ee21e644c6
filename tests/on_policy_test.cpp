// On-policy reference queries (compaction/on_policy.h) on the real stories260K model, against the
// paper's own procedure written out here: for each layer l, one full forward of the repeat
// sequence over a cache whose layers < l are the compacted ones, its layer-l queries, and layer l
// compacted with them (adamzweiger/compaction PerLayerHeadOnPolicyCompaction).
#include "compaction/on_policy.h"

#include <gtest/gtest.h>

#include <cmath>

#include "compaction/method_spec.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

class OnPolicyTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
    auto docs = read_documents(std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt", 3);
    ids_ = new std::vector<int>(model_->tokenizer->encode(docs[1], true));
    ids_->resize(64);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete ids_;
  }
  static Model* model_;
  static std::vector<int>* ids_;
};
Model* OnPolicyTest::model_ = nullptr;
std::vector<int>* OnPolicyTest::ids_ = nullptr;

/// Rows >= skip of one layer's queries, per KV head (as collect_reference_queries orders them).
class OneLayer : public ForwardObserver {
 public:
  OneLayer(const ModelConfig& c, int layer, int skip, ReferenceQueries& out) : c_(c), l_(layer), skip_(skip), out_(out) {}
  void on_queries(const QueryView& v) override {
    if (v.layer != l_) return;
    const int g = c_.group_size();
    for (int kv = 0; kv < c_.n_kv_heads; ++kv)
      for (int i = skip_; i < v.q.n_tokens; ++i)
        for (int h = kv * g; h < (kv + 1) * g; ++h) {
          const std::span<const float> src = v.q.head(i, h);
          out_.at(l_, kv).insert(out_.at(l_, kv).end(), src.begin(), src.end());
        }
  }

 private:
  const ModelConfig& c_;
  int l_, skip_;
  ReferenceQueries& out_;
};

CompactionOptions options_for(const std::string& spec, double ratio) {
  CompactionOptions co;
  co.method = parse_method_spec(spec);
  co.ratio = ratio;
  return co;
}

QueryPlan plan_for(const CompactionOptions& co) {
  QueryPlan plan;
  plan.spec = co.method.queries;
  plan.seed = co.seed;
  return plan;
}

TEST_F(OnPolicyTest, EqualsOneFullForwardPerLayerOverTheCompactedLowerLayers) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions co = options_for("am:queries=repeat+onpolicy", 0.25);
  const ContextPrefill pre = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan_for(co));
  ASSERT_EQ(pre.sequences.size(), 1u);
  const KVCache ours = compact_cache_on_policy(tr, pre, co);
  const int L = model_->config.n_layers, H = model_->config.n_kv_heads;
  EXPECT_EQ(ours.next_position, static_cast<int>(ids_->size()));
  for (int l = 0; l < L; ++l) {
    KVCache mixed = pre.cache;  // layers < l compacted (the result), layers >= l full
    for (int m = 0; m < l; ++m)
      for (int kv = 0; kv < H; ++kv) mixed.head(m, kv) = ours.head(m, kv);
    ReferenceQueries q(L, H, model_->config.head_dim);
    OneLayer collect(model_->config, l, pre.sequences[0].skip, q);
    ForwardOptions opt;
    opt.logits = LogitsMode::None;
    opt.observer = &collect;
    tr.forward(pre.sequences[0].tokens, mixed, opt);
    ASSERT_EQ(q.count(l, 0), (static_cast<int>(ids_->size()) - 1) * model_->config.group_size());
    const std::vector<HeadCache> want = compact_cache_layer(pre.cache, l, q, co, &pre.context_queries);
    for (int kv = 0; kv < H; ++kv) {
      const HeadCache& got = ours.head(l, kv);
      ASSERT_EQ(got.positions, want[kv].positions) << "L" << l << "H" << kv;
      EXPECT_EQ(got.keys, want[kv].keys);
      ASSERT_EQ(got.beta.size(), want[kv].beta.size());
      for (std::size_t i = 0; i < got.beta.size(); ++i) EXPECT_NEAR(got.beta[i], want[kv].beta[i], 1e-5);
      for (std::size_t i = 0; i < got.values.size(); ++i)
        EXPECT_NEAR(got.values[i], want[kv].values[i], 1e-5 * (1 + std::fabs(want[kv].values[i])));
    }
  }
}

TEST_F(OnPolicyTest, LayerZeroEqualsOffPolicyAndLaterLayersMove) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions on = options_for("am:queries=repeat+onpolicy", 0.25);
  const CompactionOptions off = options_for("am", 0.25);
  const ContextPrefill pre = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan_for(on));
  const KVCache a = compact_prefill(tr, *model_->tokenizer, pre, on);
  const KVCache b = compact_prefill(tr, *model_->tokenizer, pre, off);  // the same prefill: queries off-policy
  bool later_differs = false;
  for (int kv = 0; kv < model_->config.n_kv_heads; ++kv) {
    EXPECT_EQ(a.head(0, kv).positions, b.head(0, kv).positions);
    EXPECT_EQ(a.head(0, kv).beta, b.head(0, kv).beta);
    EXPECT_EQ(a.head(0, kv).values, b.head(0, kv).values);
    for (int l = 1; l < model_->config.n_layers; ++l) later_differs |= a.head(l, kv).values != b.head(l, kv).values;
  }
  EXPECT_TRUE(later_differs);  // the on-policy queries of layers >= 1 are not the off-policy ones
}

TEST_F(OnPolicyTest, SelfStudySequencesAreRerunAndCapsApply) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions co = options_for("am:queries=repeat:40+self-study+total:90+onpolicy", 0.25);
  QueryPlan plan = plan_for(co);
  plan.self_study.count = 2;
  plan.self_study.length = 8;
  const ContextPrefill pre = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  ASSERT_EQ(pre.sequences.size(), 3u);  // the repeat, then the two generations
  EXPECT_EQ(pre.sequences[1].source, 1);
  EXPECT_EQ(pre.sequences[1].skip, 0);
  // the off-policy counts: repeat capped at 40, plus <= 2 x 8 x group rows, capped at 90 in all
  const int off_count = pre.queries.count(2, 1);
  EXPECT_LE(off_count, 90);
  const KVCache c = compact_cache_on_policy(tr, pre, co);
  for (int l = 0; l < model_->config.n_layers; ++l)
    for (int kv = 0; kv < model_->config.n_kv_heads; ++kv)
      EXPECT_EQ(c.head(l, kv).length(), static_cast<std::size_t>(kept_entries(0.25, static_cast<int>(ids_->size()))));
}

TEST_F(OnPolicyTest, SpecRoundTripsAndBadUsesAreErrors) {
  EXPECT_EQ(to_string(parse_method_spec("am:queries=repeat+onpolicy")), "am:queries=repeat+onpolicy");
  EXPECT_EQ(parse_method_spec("am:queries=onpolicy+repeat"), parse_method_spec("am:queries=repeat+onpolicy"));
  EXPECT_THROW(parse_method_spec("am:queries=context+onpolicy"), Error);
  EXPECT_THROW(parse_method_spec("am:queries=repeat+onpolicy+onpolicy"), Error);
  EXPECT_THROW(parse_method_spec("am:queries=repeat+onpolicy:3"), Error);
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions co = options_for("am:queries=repeat+onpolicy", 0.25);
  ContextPrefill pre = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan_for(co));
  pre.sequences.clear();
  EXPECT_THROW(compact_cache_on_policy(tr, pre, co), Error);
}

}}  // namespace
}  // namespace kvcompact
