#include "compaction/key_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "compaction/head_attention.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::vector<float> random_matrix(int rows, int cols, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  for (float& x : m) x = g(rng);
  return m;
}

// Plain loop reference: A = softmax(Q K^T / sqrt(d)) and the three per-key scores.
struct RefScores {
  std::vector<double> rms, mean, max;
};
RefScores reference_scores(const std::vector<float>& Q, const std::vector<float>& K, int n, int T, int d) {
  RefScores r{std::vector<double>(T, 0.0), std::vector<double>(T, 0.0), std::vector<double>(T, 0.0)};
  for (int i = 0; i < n; ++i) {
    std::vector<double> s(T);
    for (int j = 0; j < T; ++j) {
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += double(Q[i * d + c]) * double(K[j * d + c]);
      s[j] = dot / std::sqrt(double(d));
    }
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    for (int j = 0; j < T; ++j) {
      const double a = s[j] / z;
      r.rms[j] += a * a;
      r.mean[j] += a;
      r.max[j] = std::max(r.max[j], a);
    }
  }
  for (int j = 0; j < T; ++j) {
    r.rms[j] = std::sqrt(r.rms[j] / n);
    r.mean[j] /= n;
  }
  return r;
}

std::vector<int> reference_ranking(const std::vector<double>& s) {
  std::vector<int> idx(s.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(), [&](int a, int b) { return s[a] != s[b] ? s[a] > s[b] : a < b; });
  return idx;
}

TEST(KeySelection, ScoresAndRankingMatchLoopReference) {
  const int n = 37, T = 53, d = 8;
  const std::vector<float> Q = random_matrix(n, d, 1, 1.5f), K = random_matrix(T, d, 2, 1.5f),
                           V = random_matrix(T, d, 3, 1.0f);
  const HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  const HeadAttentionStats st = compute_head_attention(in);
  const RefScores ref = reference_scores(Q, K, n, T, d);
  const std::vector<double> rms = key_scores(st, SelectionScore::Rms),
                            mean = key_scores(st, SelectionScore::Mean),
                            mx = key_scores(st, SelectionScore::Max);
  for (int j = 0; j < T; ++j) {
    EXPECT_NEAR(rms[j], ref.rms[j], 1e-12);
    EXPECT_NEAR(mean[j], ref.mean[j], 1e-12);
    EXPECT_NEAR(mx[j], ref.max[j], 1e-12);
  }
  EXPECT_EQ(rank_keys(rms), reference_ranking(ref.rms));
  EXPECT_EQ(rank_keys(mean), reference_ranking(ref.mean));
  EXPECT_EQ(rank_keys(mx), reference_ranking(ref.max));
  // The three scores are different criteria: on this data RMS and mean orders differ somewhere.
  EXPECT_NE(rank_keys(rms), rank_keys(mean));
}

TEST(KeySelection, TiesGoToLowerIndexAndSelectionIsInContextOrder) {
  const std::vector<double> scores = {1, 3, 3, 0, 3};
  const std::vector<int> ranking = rank_keys(scores);
  EXPECT_EQ(ranking, (std::vector<int>{1, 2, 4, 0, 3}));
  EXPECT_EQ(top_keys(ranking, 0), std::vector<int>{});
  EXPECT_EQ(top_keys(ranking, 2), (std::vector<int>{1, 2}));
  EXPECT_EQ(top_keys(ranking, 4), (std::vector<int>{0, 1, 2, 4}));
  EXPECT_THROW(top_keys(ranking, 6), Error);
  EXPECT_THROW(top_keys(ranking, -1), Error);
  EXPECT_THROW(rank_keys({1.0, std::nan("")}), Error);
}

TEST(KeySelection, ScoreNames) {
  EXPECT_EQ(parse_selection_score("rms"), SelectionScore::Rms);
  EXPECT_EQ(parse_selection_score("mean"), SelectionScore::Mean);
  EXPECT_EQ(parse_selection_score("max"), SelectionScore::Max);
  EXPECT_EQ(selection_score_name(SelectionScore::Max), "max");
  EXPECT_THROW(parse_selection_score("RMS2"), Error);
}

TEST(ScorePooling, HandWorkedAvgAndMax) {
  const std::vector<double> s = {1, 2, 3, 4, 5};
  // avg, kernel 3, zero padding counted: (0+1+2)/3, (1+2+3)/3, ..., (4+5+0)/3.
  const std::vector<double> avg = pool_scores(s, {PoolKind::Avg, 3});
  const std::vector<double> want_avg = {1, 2, 3, 4, 3};
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(avg[j], want_avg[j], 1e-15);
  EXPECT_EQ(pool_scores(s, {PoolKind::Max, 3}), (std::vector<double>{2, 3, 4, 5, 5}));
  EXPECT_EQ(pool_scores({3, 1, 2}, {PoolKind::Max, 5}), (std::vector<double>{3, 3, 3}));
  EXPECT_EQ(pool_scores(s, {PoolKind::Max, 1}), s);
  EXPECT_EQ(pool_scores(s, {PoolKind::None, 1}), s);
  EXPECT_TRUE(pool_scores({}, {PoolKind::Avg, 3}).empty());
  EXPECT_THROW(pool_scores(s, {PoolKind::Avg, 4}), Error);
  EXPECT_THROW(pool_scores(s, {PoolKind::Max, 0}), Error);
  EXPECT_THROW(pool_scores({1.0, std::nan("")}, {PoolKind::Max, 3}), Error);
  EXPECT_EQ(pooling_name({PoolKind::Avg, 5}), "avg:5");
  EXPECT_EQ(pooling_name({}), "none");
}

}}  // namespace
}  // namespace kvcompact
