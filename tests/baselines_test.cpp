#include "compaction/baselines.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compaction/attention_matching.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::vector<float> iota_matrix(int rows, int cols, float offset) {
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  for (std::size_t i = 0; i < m.size(); ++i) m[i] = offset + 0.01f * static_cast<float>(i);
  return m;
}

TEST(Baselines, RecentKeepsTheLastEntriesUnchanged) {
  const int T = 10, d = 3;
  const std::vector<float> K = iota_matrix(T, d, 0.0f), V = iota_matrix(T, d, 5.0f);
  const HeadCompactionInput in{K.data(), V.data(), nullptr, T, 0, d};  // needs no queries
  const CompactedHead c = compact_recent(in, 3);
  EXPECT_EQ(c.selected, (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(c.beta, std::vector<float>(3, 0.0f));
  EXPECT_EQ(c.keys, std::vector<float>(K.begin() + 21, K.end()));
  EXPECT_EQ(c.values, std::vector<float>(V.begin() + 21, V.end()));
  EXPECT_EQ(compact_recent(in, 0).size(), 0);
  EXPECT_EQ(compact_recent(in, T).selected.front(), 0);
}

TEST(Baselines, RandomIsSeededSortedDistinctAndUniform) {
  EXPECT_EQ(random_indices(10, 4, 1), random_indices(10, 4, 1));
  EXPECT_NE(random_indices(1000, 10, 1), random_indices(1000, 10, 2));
  EXPECT_EQ(random_indices(6, 6, 3), (std::vector<int>{0, 1, 2, 3, 4, 5}));
  // Each index is kept with probability t/T = 0.3: 3000 draws -> 900 +- 25 (1 sd) per index.
  std::vector<int> count(10, 0);
  for (std::uint64_t seed = 0; seed < 3000; ++seed) {
    const std::vector<int> s = random_indices(10, 3, seed);
    ASSERT_EQ(s.size(), 3u);
    EXPECT_LT(s[0], s[1]);
    EXPECT_LT(s[1], s[2]);
    for (int i : s) ++count[i];
  }
  for (int c : count) {
    EXPECT_GT(c, 750);
    EXPECT_LT(c, 1050);
  }
  EXPECT_THROW(random_indices(3, 4, 0), Error);
  EXPECT_THROW(random_indices(3, -1, 0), Error);
}

TEST(Baselines, RandomHeadCopiesOriginalEntries) {
  const int T = 12, d = 2;
  const std::vector<float> K = iota_matrix(T, d, 0.0f), V = iota_matrix(T, d, 1.0f);
  const HeadCompactionInput in{K.data(), V.data(), nullptr, T, 0, d};
  const CompactedHead c = compact_random(in, 5, 9);
  ASSERT_EQ(c.selected, random_indices(T, 5, 9));
  for (int j = 0; j < 5; ++j) {
    EXPECT_EQ(c.keys[j * d + 1], K[c.selected[j] * d + 1]);
    EXPECT_EQ(c.values[j * d], V[c.selected[j] * d]);
    EXPECT_EQ(c.beta[j], 0.0f);
  }
}

TEST(Baselines, AttnNoFitUsesAttentionMatchingKeysAndOriginalValues) {
  const int n = 30, T = 16, d = 4;
  std::mt19937_64 rng(5);
  std::normal_distribution<float> g(0.0f, 1.5f);
  std::vector<float> Q(n * d), K(T * d), V(T * d);
  for (float& x : Q) x = g(rng);
  for (float& x : K) x = g(rng);
  for (float& x : V) x = g(rng);
  const HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  for (SelectionScore s : {SelectionScore::Rms, SelectionScore::Mean, SelectionScore::Max}) {
    AttentionMatchingOptions opt;
    opt.score = s;
    const CompactedHead c = compact_attn_nofit(in, 5, opt);
    EXPECT_EQ(c.selected, AttentionMatcher(in, opt).select(5));
    EXPECT_EQ(c.beta, std::vector<float>(5, 0.0f));
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < d; ++k) EXPECT_EQ(c.values[j * d + k], V[c.selected[j] * d + k]);
  }
}

TEST(Baselines, BadInputThrows) {
  const std::vector<float> K = iota_matrix(4, 2, 0.0f), V = iota_matrix(4, 2, 1.0f);
  const HeadCompactionInput in{K.data(), V.data(), nullptr, 4, 0, 2};
  EXPECT_THROW(compact_recent(in, 5), Error);
  EXPECT_THROW(compact_random(in, -1, 0), Error);
  EXPECT_THROW(compact_attn_nofit(in, 2), Error);  // no reference queries
  EXPECT_THROW(head_from_selection(in, {2, 1}), Error);
  EXPECT_THROW(head_from_selection(in, {0, 4}), Error);
  const HeadCompactionInput empty{nullptr, nullptr, nullptr, 0, 0, 2};
  EXPECT_THROW(compact_recent(empty, 1), Error);
  EXPECT_EQ(compact_random(empty, 0, 1).size(), 0);
  std::vector<float> Kn = K;
  Kn[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compact_recent({Kn.data(), V.data(), nullptr, 4, 0, 2}, 2), Error);
  EXPECT_THROW(compact_recent({K.data(), V.data(), nullptr, 4, 0, 0}, 2), Error);
}

}}  // namespace
}  // namespace kvcompact
