// Head scores: retrieval (checked against a plain recomputation from captured queries and the
// cache), entropy (a zero-query head attends uniformly: mean of log(p + 1)), influence areas by
// hand, and the JSON file's validation.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "heads/head_scores.h"
#include "core/error.h"
#include "core/model_fingerprint.h"
#include "model/transformer.h"
#include "random_model.h"
#include "loaders/model_loader.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kBin = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin";

// Plain retrieval detection for one probe: queries captured, keys from the cache afterwards.
TEST(HeadScores, RetrievalMatchesPlainRecomputation) {
  Model model = load_model(kBin);
  const ModelConfig& c = model.config;
  RetrievalProbe probe{"Tom had a red ball and a blue hat. Tom liked the blue hat. Tom said: red ball",
                       "and a blue hat."};
  const RetrievalProbeResult r = retrieval_probe(model, probe);
  ASSERT_GT(r.needle_tokens, 2);
  ASSERT_GT(r.needle_span_tokens, 2);

  const std::vector<int> p = model.tokenizer->encode(probe.prompt, true);
  const std::vector<int> ids = model.tokenizer->encode(probe.prompt + " " + probe.needle, true);
  std::size_t k0 = 0;
  while (k0 < p.size() && p[k0] == ids[k0]) ++k0;
  ASSERT_EQ(static_cast<int>(ids.size() - k0), r.needle_tokens);
  // span: context tokens whose decoded text overlaps the first occurrence of the needle
  std::string text;
  std::vector<std::size_t> st, en;
  int prev = -1;
  for (std::size_t i = 0; i < k0; ++i) {
    st.push_back(text.size());
    if (ids[i] != model.tokenizer->bos_id()) text += model.tokenizer->decode_token(prev, ids[i]);
    en.push_back(text.size());
    prev = ids[i];
  }
  const std::size_t c0 = text.find(probe.needle), c1 = c0 + probe.needle.size();
  ASSERT_NE(c0, std::string::npos);
  struct Q : ForwardObserver {
    std::vector<std::vector<float>> q;
    void on_queries(const QueryView& v) override {
      q.resize(std::max<std::size_t>(q.size(), v.layer + 1));
      q[v.layer].assign(v.q.all().begin(), v.q.all().end());  // n_heads 8 x head_dim 8
    }
  } cap;
  ASSERT_EQ(c.n_heads * c.head_dim, 64);
  Transformer tr(c, model.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::None;
  o.observer = &cap;
  tr.forward(ids, cache, o);
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  double total_hits = 0;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      const HeadCache& kv = cache.head(l, h / group);
      int hits = 0;
      for (std::size_t row = k0 - 1; row + 1 < ids.size(); ++row) {
        int best = 0;
        double best_s = -1e300;
        for (std::size_t j = 0; j <= row; ++j) {
          double s = 0;
          for (int d = 0; d < hd; ++d) s += double(cap.q[l][row * 64 + h * hd + d]) * kv.keys[j * hd + d];
          if (s > best_s) best_s = s, best = static_cast<int>(j);
        }
        const bool in_span = static_cast<std::size_t>(best) < k0 && en[best] > st[best] &&
                             st[best] < c1 && en[best] > c0;
        if (in_span && ids[best] == ids[row + 1]) ++hits;
      }
      EXPECT_NEAR(r.hit_rate[l * c.n_heads + h], double(hits) / r.needle_tokens, 1e-12)
          << "L" << l << "Q" << h;
      total_hits += hits;
    }
  EXPECT_GT(total_hits, 0);  // some head of the trained model points at the copied tokens

  // A needle missing from the prompt is skipped; no scorable probe at all is an error.
  EXPECT_EQ(retrieval_probe(model, {"Tom had a ball.", "purple dragon"}).needle_tokens, 0);
  EXPECT_THROW(retrieval_scores(model, {{"Tom had a ball.", "purple dragon"}}), Error);
  const HeadScores s = retrieval_scores(model, {probe, {"Tom had a ball.", "purple dragon"}});
  EXPECT_EQ(s.items, 1);
  ASSERT_EQ(s.ranked.size(), 40u);
  for (std::size_t i = 1; i < s.ranked.size(); ++i) EXPECT_GE(s.ranked[i - 1].score, s.ranked[i].score);
}

// A query head with zero queries attends uniformly: entropy at position p is log(p + 1).
TEST(HeadScores, EntropyOfAZeroQueryHeadIsLogOfVisibleCount) {
  auto rm = testing::make_random_model(testing::small_config(), 5);
  const int hd = rm.config.head_dim, dim = rm.config.dim;
  std::fill_n(rm.weights.layers[1].wq.f32().begin() + 2 * hd * dim, hd * dim, 0.0f);
  Model model;
  model.config = rm.config;
  model.weights = rm.weights;
  const std::vector<std::vector<int>> docs = {{1, 2, 3, 4, 5, 6}, {7, 8, 9}, {4}};
  const HeadScores s = entropy_scores(model, docs);
  double expected = 0;
  int rows = 0;
  for (int n : {6, 3})
    for (int p = 1; p < n; ++p) expected += std::log(p + 1.0), ++rows;
  expected /= rows;
  EXPECT_EQ(s.items, 2);
  const HeadScore& last = s.ranked.back();  // uniform attention has the largest entropy
  EXPECT_EQ(last.head, (QueryHeadId{1, 2}));
  EXPECT_NEAR(last.score, expected, 1e-9);
  EXPECT_THROW(entropy_scores(model, {{3}}), Error);
}

TEST(HeadScores, InfluenceIsMinusTheCurveAreaSpreadToQueryHeads) {
  const ModelConfig c = testing::small_config(48, 80, 2, 6, 2);  // 2 layers, groups of 3
  InfluenceCurves curves;
  curves.model_fingerprint = "0x0000000000000001";
  curves.method = "am";
  curves.baseline_ratio = 0.1;
  curves.grid = {0.0, 0.1, 0.5};
  curves.n_layers = 2;
  curves.n_kv_heads = 2;
  // area of (0, a), (0.1, 0), (0.5, b) = 0.05 a + 0.2 b
  const double ab[4][2] = {{0.2, -0.1}, {0.4, -0.5}, {0.0, 0.0}, {1.0, 0.0}};
  for (int i = 0; i < 4; ++i) {
    HeadCurve h;
    h.layer = i / 2;
    h.kv_head = i % 2;
    h.ratios = curves.grid;
    h.mean = {ab[i][0], 0.0, ab[i][1]};
    h.sem = h.std = {0, 0, 0};
    h.documents = 3;
    curves.heads.push_back(h);
  }
  const HeadScores s = influence_scores(curves, c, "");
  ASSERT_EQ(s.ranked.size(), 12u);
  // scores: L0H0 -(0.01-0.02)=0.01, L0H1 -(0.02-0.1)=0.08, L1H0 0, L1H1 -0.05
  EXPECT_EQ(s.ranked[0].head, (QueryHeadId{0, 3}));
  EXPECT_NEAR(s.ranked[0].score, 0.08, 1e-12);
  EXPECT_EQ(s.ranked[2].head, (QueryHeadId{0, 5}));
  EXPECT_NEAR(s.ranked[3].score, 0.01, 1e-12);
  EXPECT_NEAR(s.ranked[11].score, -0.05, 1e-12);
  EXPECT_EQ(s.ranked[11].head, (QueryHeadId{1, 5}));
  EXPECT_EQ(s.items, 3);
  EXPECT_THROW(influence_scores(curves, c, "0x0000000000000002"), Error);
  InfluenceCurves missing = curves;
  missing.heads.pop_back();
  EXPECT_THROW(influence_scores(missing, c, ""), Error);

  const std::string path = std::string(KVC_TEST_TMP) + "/head_scores_test.json";
  write_head_scores(path, s);
  const HeadScores back = read_head_scores(path, &c);
  ASSERT_EQ(back.ranked.size(), 12u);
  for (std::size_t i = 0; i < 12; ++i) {
    EXPECT_EQ(back.ranked[i].head, s.ranked[i].head);
    EXPECT_EQ(back.ranked[i].score, s.ranked[i].score);
  }
  HeadScores dup = s;
  dup.ranked[1].head = dup.ranked[0].head;
  write_head_scores(path, dup);
  EXPECT_THROW(read_head_scores(path), Error);
  HeadScores short_list = s;
  short_list.ranked.pop_back();
  write_head_scores(path, short_list);
  EXPECT_THROW(read_head_scores(path), Error);
  const ModelConfig other = testing::small_config(48, 80, 3, 6, 2);
  write_head_scores(path, s);
  EXPECT_THROW(read_head_scores(path, &other), Error);
}

}}  // namespace
}  // namespace kvcompact
