// Whole-cache compaction on the real stories260K model: invariants of the compacted caches.
#include "compaction/compact_cache.h"
#include "compaction/methods/am.h"
#include "compaction/methods/h2o.h"
#include "compaction/methods/snapkv.h"
#include "compaction/methods/streaming.h"

#include <gtest/gtest.h>

#include <cmath>

#include "studies/compact_eval.h"
#include "compaction/head_compaction.h"
#include "compaction/reference_queries.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;

class CompactCacheTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(kShared + "/models/stories260K/stories260K.bin"));
    docs_ = new std::vector<std::string>(
        read_documents(kShared + "/data/tinystories/tinystories_val_head.txt", 4));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete docs_;
  }
  static Model* model_;
  static std::vector<std::string>* docs_;
};
Model* CompactCacheTest::model_ = nullptr;
std::vector<std::string>* CompactCacheTest::docs_ = nullptr;

TEST_F(CompactCacheTest, RepeatPrefillCollectsGroupTimesTMinusOneQueries) {
  Transformer tr(model_->config, model_->weights);
  const std::vector<int> ids = model_->tokenizer->encode((*docs_)[2], true);
  const int T = 40;
  ContextPrefill p = repeat_prefill(tr, *model_->tokenizer, std::span<const int>(ids.data(), T));
  EXPECT_EQ(p.cache.next_position, T);
  for (int l = 0; l < 5; ++l)
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(p.cache.head(l, h).length(), static_cast<std::size_t>(T));
      EXPECT_EQ(p.queries.count(l, h), 2 * (T - 1));  // group size 2
    }
  // The repeated copy's queries are not the context's own: they come from positions after T.
  EXPECT_EQ(p.last_logits.size(), 512u);
  EXPECT_THROW(repeat_prefill(tr, *model_->tokenizer, std::span<const int>(ids.data(), 1)), Error);
}

TEST_F(CompactCacheTest, EveryHeadKeepsExactlyTEntriesWithBoundedBeta) {
  Transformer tr(model_->config, model_->weights);
  const std::vector<int> ids = model_->tokenizer->encode((*docs_)[2], true);
  const int T = static_cast<int>(ids.size() * 6 / 10);
  ContextPrefill p = repeat_prefill(tr, *model_->tokenizer, std::span<const int>(ids.data(), T));
  // Every method with a uniform budget (pyramidkv moves budget between layers: tested below).
  for (const MethodSpec& m : parse_method_list(
           "am,am:select=omp,beta=nnls-exact,c2=ridge:1e-4,recent=4,random,recent,attn-nofit,snapkv:window=4,"
           "streaming:sink=2,h2o")) {
    for (double r : {0.0, 0.01, 0.05, 0.3, 1.0}) {
      CompactionOptions o;
      o.method = m;
      o.ratio = r;
      KVCache c = compact_cache(p.cache, p.queries, o, &p.context_queries);
      EXPECT_EQ(c.next_position, T);
      const int t = kept_entries(r, T);
      for (int l = 0; l < 5; ++l)
        for (int h = 0; h < 4; ++h) {
          const HeadCache& hc = c.head(l, h);
          ASSERT_EQ(hc.length(), static_cast<std::size_t>(t)) << to_string(m) << " r=" << r;
          ASSERT_EQ(hc.keys.size(), static_cast<std::size_t>(t) * 8);
          ASSERT_EQ(hc.values.size(), static_cast<std::size_t>(t) * 8);
          for (std::size_t i = 0; i < hc.length(); ++i) {
            EXPECT_GE(hc.beta[i], -3.0f - 1e-5f);
            EXPECT_LE(hc.beta[i], 3.0f + 1e-5f);
            if (m.name() != "am") {
              EXPECT_EQ(hc.beta[i], 0.0f);
            }
            EXPECT_GE(hc.positions[i], 0);
            EXPECT_LT(hc.positions[i], T);
            if (i > 0) {
              EXPECT_LT(hc.positions[i - 1], hc.positions[i]);
            }
          }
          if (m.name() == "recent" && t > 0) {
            EXPECT_EQ(hc.positions.back(), T - 1);
          }
        }
    }
  }
}

// At r = 1 the baselines keep every key with beta 0 and its own value: the continuation NLL must
// equal the full cache's exactly. AM refits beta and C2 on 2(T-1) queries for T keys; the exact
// solution (w = 1, C2 = V) is recoverable, so the NLL must agree to within the float32
// least-squares precision: observed |delta| ~ 1e-8 nats/token; we allow 1e-4.
TEST_F(CompactCacheTest, RatioOneReproducesTheFullCache) {
  CompactEvalOptions o;
  o.ratios = {1.0};
  o.methods = parse_method_list("am,random,recent,attn-nofit");
  o.progress = false;
  std::vector<std::string> docs(docs_->begin(), docs_->begin() + 3);
  CompactEvalResult r = run_compact_eval(*model_, docs, o);
  ASSERT_EQ(r.rows.size(), 4u);
  EXPECT_NEAR(r.rows[0].delta_nll_mean, 0.0, 1e-4);
  for (int i = 1; i < 4; ++i) {
    EXPECT_EQ(r.rows[i].delta_nll_mean, 0.0) << r.rows[i].method;
    EXPECT_EQ(r.rows[i].cache_bytes, r.rows[i].full_cache_bytes);
  }
  EXPECT_GT(r.full_nll_mean, 0.5);
}

// A small ratio must cost something, and AM must beat keeping random keys on average: a weak,
// model-level sanity check (the full table is reported, not asserted).
TEST_F(CompactCacheTest, SmallRatioCostsQuality) {
  CompactEvalOptions o;
  o.ratios = {0.1};
  o.methods = parse_method_list("am,random");
  o.progress = false;
  CompactEvalResult r = run_compact_eval(*model_, *docs_, o);
  EXPECT_GT(r.rows[1].delta_nll_mean, 0.0);
  EXPECT_LT(r.rows[0].delta_nll_mean, r.rows[1].delta_nll_mean);
  EXPECT_LT(r.rows[1].cache_bytes, r.rows[1].full_cache_bytes * 0.2);
}

// Non-uniform budgets: each head keeps exactly its budget; pyramidkv keeps the uniform total.
TEST_F(CompactCacheTest, PerHeadBudgetsAndPyramid) {
  Transformer tr(model_->config, model_->weights);
  const std::vector<int> ids = model_->tokenizer->encode((*docs_)[2], true);
  const int T = 50;
  QueryPlan plan;
  plan.spec = parse_method_spec("am,queries=repeat+context").queries;
  ContextPrefill p = collect_reference_queries(tr, *model_->tokenizer, std::span<const int>(ids.data(), T), plan);
  CompactionOptions o;
  for (int i = 0; i < 20; ++i) o.head_budgets.push_back(i % 5 == 0 ? 0 : (i * 7) % T + 1);
  KVCache c = compact_cache(p.cache, p.queries, o, &p.context_queries);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(c.head(i / 4, i % 4).length(), static_cast<std::size_t>(o.head_budgets[i]));
  o.head_budgets[3] = T + 1;
  EXPECT_THROW(compact_cache(p.cache, p.queries, o, &p.context_queries), Error);
  CompactionOptions pyr;
  pyr.method = parse_method_spec("pyramidkv");
  pyr.ratio = 0.2;
  KVCache py = compact_cache(p.cache, p.queries, pyr, &p.context_queries);
  std::size_t bottom = py.head(0, 0).length(), top = py.head(4, 0).length();
  EXPECT_GT(bottom, top);
  EXPECT_NEAR(static_cast<double>(py.total_entries()), 20.0 * kept_entries(0.2, T), 20.0);
  CompactionOptions snap;
  snap.method = parse_method_spec("snapkv");
  EXPECT_THROW(compact_cache(p.cache, p.queries, snap), Error);  // needs the context queries
}

TEST_F(CompactCacheTest, BadOptionsThrow) {
  CompactEvalOptions o;
  o.progress = false;
  o.ratios = {1.5};
  EXPECT_THROW(run_compact_eval(*model_, *docs_, o), Error);
  o.ratios = {0.1};
  o.context_frac = 1.0;
  EXPECT_THROW(run_compact_eval(*model_, *docs_, o), Error);
  o.context_frac = 0.6;
  EXPECT_THROW(run_compact_eval(*model_, {"A"}, o), Error);  // too short for a context
  EXPECT_THROW(parse_method_list("am,snapkv:windo=3"), Error);
  EXPECT_THROW(parse_method_list(""), Error);
  const auto list = parse_method_list("am:select=omp,beta=zero,recent,h2o:recent=0.25");
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[0].as<AmMethod>().options().selector, KeySelector::Omp);
  EXPECT_EQ(list[0].as<AmMethod>().options().beta, BetaFit::Zero);
  EXPECT_EQ(list[1].name(), "recent");
  EXPECT_EQ(list[2].as<H2oMethod>().recent(), 0.25);
}

}}  // namespace
}  // namespace kvcompact
