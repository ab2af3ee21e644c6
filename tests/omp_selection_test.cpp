#include "compaction/omp_selection.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compaction/head_attention.h"
#include "compaction/nnls_active_set.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// Plain reference OMP: everything recomputed from scratch at every step, NNLS from a cold start.
std::vector<int> reference_omp(const std::vector<double>& E, int n, int T, const std::vector<double>& z,
                               int steps) {
  std::vector<int> S;
  std::vector<double> w;
  for (int step = 0; step < steps; ++step) {
    std::vector<double> r = z;
    for (int i = 0; i < n; ++i)
      for (std::size_t k = 0; k < S.size(); ++k) r[i] -= E[i * T + S[k]] * w[k];
    int best = -1;
    double best_c = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < T; ++j) {
      if (std::find(S.begin(), S.end(), j) != S.end()) continue;
      double c = 0;
      for (int i = 0; i < n; ++i) c += E[i * T + j] * r[i];
      if (c > best_c) {
        best_c = c;
        best = j;
      }
    }
    S.push_back(best);
    std::vector<double> M(n * S.size());
    for (int i = 0; i < n; ++i)
      for (std::size_t k = 0; k < S.size(); ++k) M[i * S.size() + k] = E[i * T + S[k]];
    w = nnls_active_set(M.data(), n, static_cast<int>(S.size()), z.data());
  }
  return S;
}

TEST(OmpSelection, HandWorkedThreeKeys) {
  // Columns e0 = (1,0,0), e1 = (0,1,0), e2 = (1,1,0); z = (1,2,0).
  // Step 1: E^T z = (1, 2, 3) -> key 2; w = 3/2; r = (-0.5, 0.5, 0).
  // Step 2: correlations key0 -0.5, key1 +0.5 -> key 1; NNLS on {2,1}: z = e2 + e1, w = (1, 1), r = 0.
  // Step 3: only key 0 is left.
  const std::vector<double> E = {1, 0, 1, 0, 1, 1, 0, 0, 0}, z = {1, 2, 0};
  const OmpResult two = omp_order(E.data(), 3, 3, z.data(), 2);
  EXPECT_EQ(two.order, (std::vector<int>{2, 1}));
  ASSERT_EQ(two.weights.size(), 2u);
  EXPECT_NEAR(two.weights[0], 1.0, 1e-12);
  EXPECT_NEAR(two.weights[1], 1.0, 1e-12);
  EXPECT_EQ(omp_order(E.data(), 3, 3, z.data(), 3).order, (std::vector<int>{2, 1, 0}));
  const OmpResult one = omp_order(E.data(), 3, 3, z.data(), 1);
  EXPECT_NEAR(one.weights[0], 1.5, 1e-12);
}

TEST(OmpSelection, MatchesPlainReferenceOnRandomExpScores) {
  std::mt19937_64 rng(21);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int trial = 0; trial < 6; ++trial) {
    const int n = 40 + 5 * trial, T = 20 + trial;
    std::vector<double> S(n * T), E(n * T), z(n, 0.0);
    for (double& x : S) x = 2.0 * g(rng);
    for (int i = 0; i < n; ++i) {
      double m = -1e300;
      for (int j = 0; j < T; ++j) m = std::max(m, S[i * T + j]);
      for (int j = 0; j < T; ++j) {
        E[i * T + j] = std::exp(S[i * T + j] - m);
        z[i] += E[i * T + j];
      }
    }
    const int steps = 12;
    const OmpResult got = omp_order(E.data(), n, T, z.data(), steps);
    EXPECT_EQ(got.order, reference_omp(E, n, T, z, steps)) << "trial " << trial;
    // Prefix property: fewer steps give a prefix of the order.
    const OmpResult five = omp_order(E.data(), n, T, z.data(), 5);
    EXPECT_EQ(five.order, std::vector<int>(got.order.begin(), got.order.begin() + 5));
    for (double w : got.weights) EXPECT_GE(w, 0.0);
  }
}

TEST(OmpSelection, HeadKeyOrderUsesExpScoresOfTheHead) {
  std::mt19937_64 rng(22);
  std::normal_distribution<float> g(0.0f, 1.0f);
  const int n = 30, T = 12, d = 4;
  std::vector<float> Q(n * d), K(T * d), V(T * d);
  for (float& x : Q) x = g(rng);
  for (float& x : K) x = 2.0f * g(rng);
  for (float& x : V) x = g(rng);
  const HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  const HeadAttentionStats st = compute_head_attention(in);
  const std::vector<int> order = omp_key_order(in, st.row_max, st.mass, T, 6);
  // Same thing from an explicitly built E.
  std::vector<double> E(n * T);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < T; ++j) {
      double s = 0;
      for (int c = 0; c < d; ++c) s += double(Q[i * d + c]) * K[j * d + c];
      E[i * T + j] = std::exp(s / 2.0 - st.row_max[i]);
    }
  EXPECT_EQ(order, reference_omp(E, n, T, st.mass, 6));
  EXPECT_THROW(omp_key_order(in, st.row_max, st.mass, T, T + 1), Error);
  EXPECT_THROW(omp_key_order(in, st.row_max, std::vector<double>(3), T, 2), Error);
}

TEST(OmpSelection, PaperLoopWithExactRefitIsThePlainOmpSelection) {
  // omp_select (the paper's loop) with an exact refit, one key per step and no drops picks what
  // the plain reference OMP picks, as a sorted set.
  std::mt19937_64 rng(33);
  std::normal_distribution<double> g(0.0, 1.0);
  const int n = 45, T = 24;
  std::vector<double> E(n * T), z(n, 0.0);
  for (int i = 0; i < n; ++i) {
    std::vector<double> s(T);
    for (double& x : s) x = 2.0 * g(rng);
    const double m = *std::max_element(s.begin(), s.end());
    for (int j = 0; j < T; ++j) z[i] += (E[i * T + j] = std::exp(s[j] - m));
  }
  for (int t : {1, 5, 12}) {
    std::vector<int> want = reference_omp(E, n, T, z, t);
    std::sort(want.begin(), want.end());
    EXPECT_EQ(omp_select(E.data(), n, T, z.data(), t, OmpOptions{}), want) << "t = " << t;
  }
}

TEST(OmpSelection, DropsKeysBelowTheCutoffAndPicksReplacementsByHand) {
  // Two queries, three keys, target z = (1, 1); E rows (1, 1, 0.5) and (1, 0.9, 0.5).
  // Step 1: E^T z = (2, 1.9, 1) -> key 0; the bounded refit gives w0 = 1 and a zero residual.
  // Step 2: every correlation is 0 -> lowest index, key 1; [c0 c1] w = z is solved exactly by
  // w = (1, 0), clipped to w1 = e^lo = 1e-12: beta1 = -27.6.
  // Without drops that is the answer {0, 1}. With drop = -7 key 1 is excluded and key 2 picked;
  // c2 = 0.5 c0, so the least-squares start is the minimum-norm w = (1, 0.5) / 1.25 = (0.8, 0.4),
  // beta2 = log 0.4 > -7: stable, answer {0, 2}.
  const std::vector<double> E = {1, 1, 0.5, 1, 0.9, 0.5}, z = {1, 1};
  OmpOptions o;
  o.refit = OmpRefit::Bounded;
  o.nnls.iters = 0;
  o.nnls.lo = std::log(1e-12);
  o.nnls.hi = 7.0;
  EXPECT_EQ(omp_select(E.data(), 2, 3, z.data(), 2, o), (std::vector<int>{0, 1}));
  o.drop_below = -7.0;
  EXPECT_EQ(omp_select(E.data(), 2, 3, z.data(), 2, o), (std::vector<int>{0, 2}));
  // Keys run out: with column 2 = 0.1 * column 1 = (0.1, 0.09), [c0 c2] w = z is again solved by
  // w = (1, 0), so the replacement drops too and only key 0 is left.
  const std::vector<double> E2 = {1, 1, 0.1, 1, 0.9, 0.09};
  EXPECT_EQ(omp_select(E2.data(), 2, 3, z.data(), 2, o), (std::vector<int>{0}));
}

TEST(OmpSelection, ProgressiveScheduleKeepsEveryBudgetExact) {
  // Past 300 keys the schedule picks 2 per step and refits every 2nd step; the result is still
  // t distinct sorted keys, and its first 300 picks are those of the one-key-per-step loop.
  std::mt19937_64 rng(44);
  std::normal_distribution<double> g(0.0, 1.0);
  const int n = 60, T = 340, t = 320;
  std::vector<double> E(static_cast<std::size_t>(n) * T), z(n, 0.0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < T; ++j) z[i] += (E[static_cast<std::size_t>(i) * T + j] = std::exp(g(rng) - 3.0));
  OmpOptions o;
  o.refit = OmpRefit::Bounded;
  o.progressive = true;
  const std::vector<int> got = omp_select(E.data(), n, T, z.data(), t, o);
  ASSERT_EQ(got.size(), static_cast<std::size_t>(t));
  EXPECT_TRUE(std::is_sorted(got.begin(), got.end()));
  EXPECT_EQ(std::adjacent_find(got.begin(), got.end()), got.end());
  o.progressive = false;
  const std::vector<int> first = omp_select(E.data(), n, T, z.data(), 300, o);
  for (int j : first) EXPECT_TRUE(std::binary_search(got.begin(), got.end(), j)) << j;
  EXPECT_THROW(omp_select(E.data(), n, T, z.data(), T + 1, o), Error);
}

TEST(OmpSelection, BadInputThrows) {
  const std::vector<double> E = {1, 0, 0, 1}, z = {1, 1};
  EXPECT_THROW(omp_order(E.data(), 2, 2, z.data(), 3), Error);
  EXPECT_THROW(omp_order(E.data(), 2, 2, z.data(), -1), Error);
  std::vector<double> bad = E;
  bad[1] = std::numeric_limits<double>::infinity();
  EXPECT_THROW(omp_order(bad.data(), 2, 2, z.data(), 1), Error);
  EXPECT_TRUE(omp_order(E.data(), 2, 2, z.data(), 0).order.empty());
}

}}  // namespace
}  // namespace kvcompact
