#include "compaction/token_eviction.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "compaction/head_compaction.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

struct Ctx {
  int T, d, g;
  std::vector<float> K, V, CQ;
  HeadCompactionInput in() const {
    HeadCompactionInput x{K.data(), V.data(), nullptr, T, 0, d};
    x.context_queries = CQ.data();
    x.group_size = g;
    return x;
  }
};

Ctx random_ctx(int T, int d, int g, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> n(0.0f, 1.0f);
  Ctx c{T, d, g, std::vector<float>(T * d), std::vector<float>(T * d), std::vector<float>(T * g * d)};
  for (float& x : c.K) x = 2.0f * n(rng);
  for (float& x : c.V) x = n(rng);
  for (float& x : c.CQ) x = n(rng);
  return c;
}

// d = 1 (scale 1), one query head: keys and queries given directly.
Ctx scalar_ctx(std::vector<float> keys, std::vector<float> queries) {
  const int T = static_cast<int>(keys.size());
  std::vector<float> V(T);
  std::iota(V.begin(), V.end(), 10.0f);
  return {T, 1, 1, std::move(keys), std::move(V), std::move(queries)};
}

TEST(TokenEviction, CausalVotesHandWorked) {
  // k = (0, ln 3), q = (anything, 1): position 0 sees only key 0 (A = 1); position 1 attends
  // softmax(0, ln 3) = (1/4, 3/4). Votes = (1.25, 0.75).
  const Ctx c = scalar_ctx({0.0f, static_cast<float>(std::log(3.0))}, {5.0f, 1.0f});
  const std::vector<double> v = causal_attention_votes(c.in(), 0, 2);
  EXPECT_NEAR(v[0], 1.25, 1e-7);
  EXPECT_NEAR(v[1], 0.75, 1e-7);
  const std::vector<double> last = causal_attention_votes(c.in(), 1, 1);  // position 1, key 0 only
  ASSERT_EQ(last.size(), 1u);
  EXPECT_NEAR(last[0], 0.25, 1e-7);
}

TEST(TokenEviction, VotesSumToRowsAndGroupRowsAdd) {
  const Ctx c = random_ctx(17, 4, 2, 3);
  const std::vector<double> v = h2o_scores(c.in());
  EXPECT_NEAR(std::accumulate(v.begin(), v.end(), 0.0), 17.0 * 2, 1e-9);  // each row sums to 1
  // Group of two identical query heads = twice the votes of one.
  Ctx one = c, twice = c;
  one.g = 1;
  one.CQ.resize(17 * 4);
  for (int i = 0; i < 17; ++i)
    for (int k = 0; k < 4; ++k) one.CQ[i * 4 + k] = c.CQ[(i * 2) * 4 + k];
  for (int i = 0; i < 17; ++i)
    for (int k = 0; k < 4; ++k) twice.CQ[(i * 2 + 1) * 4 + k] = c.CQ[(i * 2) * 4 + k];
  const std::vector<double> a = h2o_scores(one.in()), b = h2o_scores(twice.in());
  for (int j = 0; j < 17; ++j) EXPECT_NEAR(b[j], 2.0 * a[j], 1e-9);
}

TEST(TokenEviction, SnapKvHandWorked) {
  // Window = positions 4, 5 with q = 1; prefix keys 0..3 = (0, 5, 0, 4): votes favour 1 then 3.
  const Ctx c = scalar_ctx({0, 5, 0, 4, 0, 0}, {1, 1, 1, 1, 1, 1});
  SnapKvOptions o;
  o.window = 2;
  o.pool = {PoolKind::None, 1};
  EXPECT_EQ(compact_snapkv(c.in(), 4, o).selected, (std::vector<int>{1, 3, 4, 5}));
  // Max pooling (kernel 3) spreads key 1's vote to keys 0 and 2: ties go to the lower index.
  o.pool = {PoolKind::Max, 3};
  EXPECT_EQ(compact_snapkv(c.in(), 4, o).selected, (std::vector<int>{0, 1, 4, 5}));
  // Budget within the window: the last t keys.
  EXPECT_EQ(compact_snapkv(c.in(), 2, o).selected, (std::vector<int>{4, 5}));
  EXPECT_EQ(compact_snapkv(c.in(), 1, o).selected, (std::vector<int>{5}));
}

TEST(TokenEviction, StreamingKeepsSinksAndRecent) {
  const Ctx c = random_ctx(10, 2, 1, 4);
  EXPECT_EQ(compact_streaming(c.in(), 6, 4).selected, (std::vector<int>{0, 1, 2, 3, 8, 9}));
  EXPECT_EQ(compact_streaming(c.in(), 3, 4).selected, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(compact_streaming(c.in(), 3, 0).selected, (std::vector<int>{7, 8, 9}));
  EXPECT_EQ(compact_streaming(c.in(), 10, 4).size(), 10);
  EXPECT_THROW(compact_streaming(c.in(), 3, -1), Error);
}

TEST(TokenEviction, H2oHeavyHittersPlusRecent) {
  // Key 1 (k = 3) draws most attention of every later query (q = 1): heavy hitter.
  const Ctx c = scalar_ctx({0, 3, 0, 0, 0}, {1, 1, 1, 1, 1});
  EXPECT_EQ(compact_h2o(c.in(), 2, 0.5).selected, (std::vector<int>{1, 4}));
  EXPECT_EQ(compact_h2o(c.in(), 2, 0.0).selected, (std::vector<int>{0, 1}));  // all heavy
  EXPECT_EQ(compact_h2o(c.in(), 2, 1.0).selected, (std::vector<int>{3, 4}));  // all recent
  EXPECT_THROW(compact_h2o(c.in(), 2, 1.5), Error);
}

TEST(TokenEviction, EveryMethodKeepsTOriginalEntries) {
  const Ctx c = random_ctx(24, 4, 2, 5);
  SnapKvOptions o;
  o.window = 4;
  for (int t = 0; t <= c.T; ++t) {
    for (const CompactedHead& h : {compact_snapkv(c.in(), t, o), compact_streaming(c.in(), t, 4),
                                   compact_h2o(c.in(), t, 0.5)}) {
      ASSERT_EQ(h.size(), t);
      for (int j = 0; j < t; ++j) {
        if (j > 0) {
          EXPECT_LT(h.selected[j - 1], h.selected[j]);
        }
        EXPECT_EQ(h.beta[j], 0.0f);
        for (int k = 0; k < c.d; ++k) {
          EXPECT_EQ(h.keys[j * c.d + k], c.K[h.selected[j] * c.d + k]);
          EXPECT_EQ(h.values[j * c.d + k], c.V[h.selected[j] * c.d + k]);
        }
      }
    }
    if (t >= 4) {  // SnapKV always keeps the window
      const CompactedHead s = compact_snapkv(c.in(), t, o);
      EXPECT_EQ(std::vector<int>(s.selected.end() - 4, s.selected.end()), (std::vector<int>{20, 21, 22, 23}));
    }
  }
}

TEST(TokenEviction, MissingContextQueriesThrow) {
  Ctx c = random_ctx(8, 2, 1, 6);
  HeadCompactionInput in = c.in();
  in.context_queries = nullptr;
  SnapKvOptions o;
  o.window = 2;
  EXPECT_THROW(compact_snapkv(in, 4, o), Error);
  EXPECT_THROW(compact_h2o(in, 4, 0.5), Error);
  EXPECT_NO_THROW(compact_streaming(in, 4, 2));
  EXPECT_EQ(compact_snapkv(in, 2, o).selected, (std::vector<int>{6, 7}));  // window only: no scores
  in = c.in();
  in.group_size = 0;
  EXPECT_THROW(compact_h2o(in, 4, 0.5), Error);
  c.CQ[3] = std::nanf("");
  EXPECT_THROW(compact_h2o(c.in(), 4, 0.5), Error);
  o.window = 0;
  EXPECT_THROW(compact_snapkv(c.in(), 4, o), Error);
  EXPECT_THROW(compact_snapkv(c.in(), 9, SnapKvOptions{}), Error);
}

TEST(PyramidBudgets, HandWorkedLinearSchedule) {
  // L = 5, t = 20, beta = 20: min 1, max 39, step 9.5 -> 39, 29.5, 20, 10.5, 1; largest remainder
  // gives the one missing entry to the first .5 (layer 1).
  EXPECT_EQ(pyramid_budgets_for(5, 100, 20, 20.0), (std::vector<int>{39, 30, 20, 10, 1}));
  EXPECT_EQ(pyramid_budgets(5, 100, 0.2, 20.0), (std::vector<int>{39, 30, 20, 10, 1}));
  EXPECT_EQ(pyramid_budgets_for(4, 100, 10, 1.0), (std::vector<int>{10, 10, 10, 10}));  // beta 1: uniform
  EXPECT_EQ(pyramid_budgets_for(1, 100, 7, 20.0), (std::vector<int>{7}));
  EXPECT_EQ(pyramid_budgets_for(3, 100, 0, 20.0), (std::vector<int>{0, 0, 0}));
}

TEST(PyramidBudgets, SameTotalCappedAndDecreasing) {
  for (int L : {2, 5, 8})
    for (int T : {10, 37, 100})
      for (int t = 1; t <= T; t += 3) {
        const std::vector<int> b = pyramid_budgets_for(L, T, t, 20.0);
        EXPECT_EQ(std::accumulate(b.begin(), b.end(), 0), L * t);
        for (int l = 0; l < L; ++l) {
          EXPECT_GE(b[l], 1);
          EXPECT_LE(b[l], T);
        }
        if (2 * t <= T) {  // no capping: non-increasing from bottom to top
          for (int l = 1; l < L; ++l) EXPECT_LE(b[l], b[l - 1]) << L << " " << T << " " << t;
        }
      }
  EXPECT_THROW(pyramid_budgets_for(0, 10, 2, 20.0), Error);
  EXPECT_THROW(pyramid_budgets_for(3, 10, 11, 20.0), Error);
  EXPECT_THROW(pyramid_budgets_for(3, 10, 2, 0.5), Error);
}

}}  // namespace
}  // namespace kvcompact
