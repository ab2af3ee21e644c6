// Chunked compaction in KV space (compaction/chunked.h) on the real stories260K model: one chunk
// covering the context is plain compaction; chunks compact each span with queries made against
// that span alone (recomputed here by hand); keeping everything changes nothing.
#include "compaction/chunked.h"

#include <gtest/gtest.h>

#include "compaction/method_spec.h"
#include "compaction/on_policy.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

class ChunkedTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
    auto docs = read_documents(std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt", 3);
    ids_ = new std::vector<int>(model_->tokenizer->encode(docs[1], true));
    ids_->resize(70);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete ids_;
  }
  static Model* model_;
  static std::vector<int>* ids_;
};
Model* ChunkedTest::model_ = nullptr;
std::vector<int>* ChunkedTest::ids_ = nullptr;

CompactionOptions opts(const std::string& spec, double ratio, int chunk) {
  CompactionOptions co;
  co.method = parse_method_spec(spec);
  co.ratio = ratio;
  co.chunk_size = chunk;
  return co;
}

ContextPrefill prefill(const Transformer& tr, const Tokenizer& tok, const std::vector<int>& ids, const CompactionOptions& co) {
  QueryPlan plan;
  plan.spec = co.method.queries;
  plan.seed = co.seed;
  return collect_reference_queries(tr, tok, ids, plan);
}

TEST_F(ChunkedTest, OneChunkIsPlainCompaction) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions co = opts("am", 0.25, 1000);
  const ContextPrefill pre = prefill(tr, *model_->tokenizer, *ids_, co);
  const KVCache chunked = compact_prefill(tr, *model_->tokenizer, pre, co);
  const KVCache plain = compact_cache(pre.cache, pre.queries, opts("am", 0.25, 0), &pre.context_queries);
  for (int l = 0; l < model_->config.n_layers; ++l)
    for (int h = 0; h < model_->config.n_kv_heads; ++h) {
      EXPECT_EQ(chunked.head(l, h).positions, plain.head(l, h).positions);
      EXPECT_EQ(chunked.head(l, h).beta, plain.head(l, h).beta);
      EXPECT_EQ(chunked.head(l, h).values, plain.head(l, h).values);
    }
}

// Chunks of 32 over 70 tokens: [0, 32), [32, 64), [64, 70). Each chunk's heads equal an AM
// compaction of that chunk alone with queries from a forward of the repeat prompt and the chunk's
// tokens over a cache holding only the chunk, written out here.
TEST_F(ChunkedTest, EachChunkIsCompactedAgainstItselfAlone) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions co = opts("am", 0.25, 32);
  const ContextPrefill pre = prefill(tr, *model_->tokenizer, *ids_, co);
  const KVCache got = compact_prefill(tr, *model_->tokenizer, pre, co);
  const int L = model_->config.n_layers, H = model_->config.n_kv_heads, d = model_->config.head_dim;
  const int starts[] = {0, 32, 64}, ends[] = {32, 64, 70};
  for (int c = 0; c < 3; ++c) {
    const int a = starts[c], b = ends[c];
    KVCache part(L, H, d);
    part.next_position = 70;
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h)
        for (int i = a; i < b; ++i) {
          const HeadCache& src = pre.cache.head(l, h);
          part.head(l, h).append(&src.keys[i * d], &src.values[i * d], d, 0.0f, i);
        }
    std::vector<int> tail = model_->tokenizer->encode(kRepeatPrompt, false);
    const int skip = static_cast<int>(tail.size());
    tail.insert(tail.end(), ids_->begin() + (a == 0 ? 1 : a), ids_->begin() + b);
    ReferenceQueries q(L, H, d);
    struct Collect : ForwardObserver {
      ReferenceQueries* q;
      int skip, H, d, g, nh;
      void on_queries(const QueryView& v) override {
        for (int kv = 0; kv < H; ++kv)
          for (int i = skip; i < v.q.n_tokens; ++i)
            for (int j = kv * g; j < (kv + 1) * g; ++j)
              q->at(v.layer, kv).insert(q->at(v.layer, kv).end(), v.q.head(i, j).begin(), v.q.head(i, j).end());
      }
    } collect;
    collect.q = &q, collect.skip = skip, collect.H = H, collect.d = d, collect.g = model_->config.group_size(),
    collect.nh = model_->config.n_heads;
    KVCache scratch = part;
    ForwardOptions fo;
    fo.logits = LogitsMode::None;
    fo.observer = &collect;
    tr.forward(tail, scratch, fo);
    CompactionOptions one = opts("am", 0.25, 0);
    one.seed = static_cast<uint64_t>(c);
    const KVCache want = compact_cache(part, q, one);
    const std::size_t t = static_cast<std::size_t>(kept_entries(0.25, b - a));
    const std::size_t before = c == 0 ? 0 : (c == 1 ? 8 : 16);  // kept by the chunks before: 8, 8, 1
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const HeadCache& g = got.head(l, h);
        ASSERT_EQ(g.length(), 8u + 8u + 1u);
        for (std::size_t i = 0; i < t; ++i) {
          EXPECT_EQ(g.positions[before + i], want.head(l, h).positions[i]) << "chunk " << c << " L" << l << "H" << h;
          EXPECT_EQ(g.beta[before + i], want.head(l, h).beta[i]);
        }
      }
  }
}

TEST_F(ChunkedTest, KeepingEverythingIsTheFullCacheAndBadUsesAreErrors) {
  const Transformer tr(model_->config, model_->weights);
  const CompactionOptions keep = opts("recent", 1.0, 16);
  const ContextPrefill pre = prefill(tr, *model_->tokenizer, *ids_, keep);
  const KVCache c = compact_prefill(tr, *model_->tokenizer, pre, keep);
  for (int l = 0; l < model_->config.n_layers; ++l)
    for (int h = 0; h < model_->config.n_kv_heads; ++h) {
      EXPECT_EQ(c.head(l, h).keys, pre.cache.head(l, h).keys);
      EXPECT_EQ(c.head(l, h).positions, pre.cache.head(l, h).positions);
    }
  EXPECT_EQ(c.next_position, 70);
  CompactionOptions bad = opts("am", 0.25, 1);
  EXPECT_THROW(compact_prefill(tr, *model_->tokenizer, pre, bad), Error);
  bad = opts("am", 0.25, 16);
  bad.head_budgets.assign(20, 3);
  EXPECT_THROW(compact_prefill(tr, *model_->tokenizer, pre, bad), Error);
  EXPECT_THROW(compact_prefill(tr, *model_->tokenizer, pre, opts("am:queries=repeat+onpolicy", 0.25, 16)), Error);
  EXPECT_THROW(compact_prefill(tr, *model_->tokenizer, pre, opts("am:queries=context", 0.25, 16)), Error);
}

}}  // namespace
}  // namespace kvcompact
