#include "compaction/nnls_active_set.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compaction/least_squares.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

double objective(const std::vector<double>& M, int rows, int cols, const std::vector<double>& z,
                 const std::vector<double>& w) {
  double f = 0;
  for (int i = 0; i < rows; ++i) {
    double r = -z[i];
    for (int j = 0; j < cols; ++j) r += M[i * cols + j] * w[j];
    f += r * r;
  }
  return f;
}

// KKT of min ||M w - z||^2, w >= 0: w >= 0, g = M^T (M w - z) = 0 on the support, >= 0 off it.
void expect_kkt(const std::vector<double>& M, int rows, int cols, const std::vector<double>& z,
                const std::vector<double>& w, double tol) {
  ASSERT_EQ(w.size(), static_cast<std::size_t>(cols));
  std::vector<double> r(rows);
  for (int i = 0; i < rows; ++i) {
    r[i] = -z[i];
    for (int j = 0; j < cols; ++j) r[i] += M[i * cols + j] * w[j];
  }
  for (int j = 0; j < cols; ++j) {
    double g = 0;
    for (int i = 0; i < rows; ++i) g += M[i * cols + j] * r[i];
    EXPECT_GE(w[j], 0.0);
    if (w[j] > 0) {
      EXPECT_LT(std::fabs(g), tol) << "column " << j;
    } else {
      EXPECT_GE(g, -tol) << "column " << j;
    }
  }
}

// Brute force over all supports (plain reference): best feasible least-squares solution.
double brute_force_min(const std::vector<double>& M, int rows, int cols, const std::vector<double>& z) {
  double best = std::numeric_limits<double>::infinity();
  for (int mask = 0; mask < (1 << cols); ++mask) {
    std::vector<int> S;
    for (int j = 0; j < cols; ++j)
      if (mask & (1 << j)) S.push_back(j);
    std::vector<double> A(rows * S.size());
    for (int i = 0; i < rows; ++i)
      for (std::size_t k = 0; k < S.size(); ++k) A[i * S.size() + k] = M[i * cols + S[k]];
    const std::vector<double> x = solve_least_squares(A.data(), rows, static_cast<int>(S.size()), z.data(), 1);
    std::vector<double> w(cols, 0.0);
    bool feasible = true;
    for (std::size_t k = 0; k < S.size(); ++k) {
      if (x[k] < 0) feasible = false;
      w[S[k]] = x[k];
    }
    if (feasible) best = std::min(best, objective(M, rows, cols, z, w));
  }
  return best;
}

TEST(NnlsActiveSet, HandWorkedCase) {
  // M = [1 0; 0 1; 1 1], z = [2, -1, 1]: unconstrained solution (2, -1); NNLS: w2 = 0,
  // w1 = (M^T z)_1 / G_11 = 3 / 2, and the dual of w2 is 0 - 1 * 1.5 < 0.
  const std::vector<double> M = {1, 0, 0, 1, 1, 1}, z = {2, -1, 1};
  const std::vector<double> w = nnls_active_set(M.data(), 3, 2, z.data());
  EXPECT_NEAR(w[0], 1.5, 1e-12);
  EXPECT_EQ(w[1], 0.0);
  expect_kkt(M, 3, 2, z, w, 1e-10);
}

TEST(NnlsActiveSet, RecoversAPositiveSolution) {
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int rows = 30, cols = 8;
  std::vector<double> M(rows * cols), wt(cols), z(rows, 0.0);
  for (double& x : M) x = u(rng);
  for (double& x : wt) x = 0.5 + u(rng);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) z[i] += M[i * cols + j] * wt[j];
  const std::vector<double> w = nnls_active_set(M.data(), rows, cols, z.data());
  for (int j = 0; j < cols; ++j) EXPECT_NEAR(w[j], wt[j], 1e-9);
}

TEST(NnlsActiveSet, KktAndBruteForceOnRandomProblems) {
  std::mt19937_64 rng(11);
  std::normal_distribution<double> g(0.0, 1.0);
  for (int trial = 0; trial < 40; ++trial) {
    const int rows = 3 + trial % 9, cols = 1 + trial % 7;  // includes rows < cols (rank deficient)
    std::vector<double> M(rows * cols), z(rows);
    for (double& x : M) x = (trial % 2) ? std::exp(g(rng)) : g(rng);
    for (double& x : z) x = g(rng) * 2.0;
    const std::vector<double> w = nnls_active_set(M.data(), rows, cols, z.data());
    expect_kkt(M, rows, cols, z, w, 1e-8);
    EXPECT_NEAR(objective(M, rows, cols, z, w), brute_force_min(M, rows, cols, z), 1e-9)
        << "trial " << trial;
  }
}

TEST(NnlsActiveSet, GramFormWithWarmStartAgrees) {
  std::mt19937_64 rng(12);
  std::normal_distribution<double> g(0.0, 1.0);
  const int rows = 25, cols = 10;
  std::vector<double> M(rows * cols), z(rows);
  for (double& x : M) x = g(rng);
  for (double& x : z) x = g(rng);
  std::vector<double> G(cols * cols, 0.0), b(cols, 0.0);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      b[j] += M[i * cols + j] * z[i];
      for (int k = 0; k < cols; ++k) G[j * cols + k] += M[i * cols + j] * M[i * cols + k];
    }
  const std::vector<double> a = nnls_active_set(M.data(), rows, cols, z.data());
  const std::vector<double> cold = nnls_active_set_gram(G.data(), b.data(), cols);
  std::vector<double> start(cols);
  for (double& x : start) x = std::fabs(g(rng));
  const std::vector<double> warm = nnls_active_set_gram(G.data(), b.data(), cols, start);
  for (int j = 0; j < cols; ++j) {
    EXPECT_NEAR(a[j], cold[j], 1e-9);
    EXPECT_NEAR(a[j], warm[j], 1e-9);
  }
  expect_kkt(M, rows, cols, z, cold, 1e-8);
}

TEST(NnlsActiveSet, BadInputThrows) {
  const std::vector<double> M = {1, 0, 0, 1}, z = {1, 1};
  std::vector<double> bad = M;
  bad[2] = std::numeric_limits<double>::quiet_NaN();
  EXPECT_THROW(nnls_active_set(bad.data(), 2, 2, z.data()), Error);
  EXPECT_THROW(nnls_active_set(M.data(), -1, 2, z.data()), Error);
  EXPECT_THROW(nnls_active_set_gram(M.data(), z.data(), 2, {1.0}), Error);  // start of wrong size
  ActiveSetNnlsOptions o;
  o.tol = -1;
  EXPECT_THROW(nnls_active_set(M.data(), 2, 2, z.data(), o), Error);
  EXPECT_TRUE(nnls_active_set(M.data(), 2, 0, z.data()).empty());
  const std::vector<double> zero = nnls_active_set(M.data(), 0, 2, z.data());  // no rows: w = 0
  EXPECT_EQ(zero, std::vector<double>(2, 0.0));
}

}}  // namespace
}  // namespace kvcompact
