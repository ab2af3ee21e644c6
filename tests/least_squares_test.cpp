#include "compaction/least_squares.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(LeastSquares, OverDetermined3x2ByHand) {
  // Fit b = x0 + x1*t through (t, b) = (0, 6), (1, 0), (2, 0).
  // Normal equations A^T A x = A^T b: [[3, 3], [3, 5]] x = [6, 0]
  //   -> 3x0 + 3x1 = 6, 3x0 + 5x1 = 0 -> 2x1 = -6 -> x1 = -3, x0 = 5.
  const double A[] = {1, 0, 1, 1, 1, 2};
  const double b[] = {6, 0, 0};
  int rank = -1;
  const std::vector<double> x = solve_least_squares(A, 3, 2, b, 1, 1e-12, &rank);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_NEAR(x[0], 5.0, 1e-12);
  EXPECT_NEAR(x[1], -3.0, 1e-12);
  EXPECT_EQ(rank, 2);
}

TEST(LeastSquares, Square2x2ByHandWithTwoRightHandSides) {
  // [[2, 1], [1, 3]] x = b, det = 5. Cramer: b = (3, 5) -> x = ((9-5)/5, (10-3)/5) = (0.8, 1.4);
  // b = (1, 0) -> x = (3/5, -1/5).  B is [2, 2] row-major: column 0 = (3, 5), column 1 = (1, 0).
  const double A[] = {2, 1, 1, 3};
  const double B[] = {3, 1, 5, 0};
  const std::vector<double> X = solve_least_squares(A, 2, 2, B, 2);
  ASSERT_EQ(X.size(), 4u);  // [2, 2] row-major
  EXPECT_NEAR(X[0], 0.8, 1e-12);
  EXPECT_NEAR(X[2], 1.4, 1e-12);
  EXPECT_NEAR(X[1], 0.6, 1e-12);
  EXPECT_NEAR(X[3], -0.2, 1e-12);
}

TEST(LeastSquares, UnderDeterminedGivesMinimumNorm) {
  // x0 + 2 x1 = 5 has a line of solutions; the min-norm one is along (1, 2): x = 5/5 * (1, 2).
  const double A[] = {1, 2};
  const double b[] = {5};
  const std::vector<double> x = solve_least_squares(A, 1, 2, b, 1);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_NEAR(x[0], 1.0, 1e-12);
  EXPECT_NEAR(x[1], 2.0, 1e-12);
}

TEST(LeastSquares, RankDeficientGivesMinimumNorm) {
  // Columns identical: every x with x0 + x1 = mean(b) = 2 minimises; min-norm is (1, 1).
  const double A[] = {1, 1, 1, 1, 1, 1};
  const double b[] = {1, 2, 3};
  int rank = -1;
  const std::vector<double> x = solve_least_squares(A, 3, 2, b, 1, 1e-12, &rank);
  EXPECT_NEAR(x[0], 1.0, 1e-12);
  EXPECT_NEAR(x[1], 1.0, 1e-12);
  EXPECT_EQ(rank, 1);
}

TEST(LeastSquares, QrFastPathSatisfiesTheNormalEquations) {
  // A well-conditioned 300 x 40 system with 3 right-hand sides takes the QR path; the minimiser is
  // characterised by A^T (A X - B) = 0, checked independently of how X was computed.
  const int m = 300, n = 40, k = 3;
  std::mt19937_64 rng(5);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> A(static_cast<std::size_t>(m) * n), B(static_cast<std::size_t>(m) * k);
  for (double& v : A) v = g(rng);
  for (double& v : B) v = g(rng);
  int rank = -1;
  const std::vector<double> X = solve_least_squares(A.data(), m, n, B.data(), k, 1e-12, &rank);
  EXPECT_EQ(rank, n);
  double worst = 0.0, scale = 0.0;
  for (int c = 0; c < k; ++c) {
    std::vector<double> r(m);
    for (int i = 0; i < m; ++i) {
      double acc = -B[i * k + c];
      for (int j = 0; j < n; ++j) acc += A[i * n + j] * X[j * k + c];
      r[i] = acc;
    }
    for (int j = 0; j < n; ++j) {
      double acc = 0.0, norm = 0.0;
      for (int i = 0; i < m; ++i) {
        acc += A[i * n + j] * r[i];
        norm += std::fabs(A[i * n + j] * r[i]);
      }
      worst = std::max(worst, std::fabs(acc));
      scale = std::max(scale, norm);
    }
  }
  EXPECT_LT(worst, 1e-12 * scale);
}

TEST(LeastSquares, NearlyDependentColumnsStillGiveTheMinimumNorm) {
  // Columns (1, 1, 1) and (1, 1, 1 + 1e-13): full rank in exact arithmetic, but the second singular
  // value is ~5e-14 sigma_max, below rcond = 1e-12, so the answer must be dgelsd's rank-1 minimum
  // norm solution (1, 1) for b = (1, 2, 3), not the huge exact solution a plain QR would give.
  const double A[] = {1, 1, 1, 1, 1, 1 + 1e-13};
  const double b[] = {1, 2, 3};
  int rank = -1;
  const std::vector<double> x = solve_least_squares(A, 3, 2, b, 1, 1e-12, &rank);
  EXPECT_EQ(rank, 1);
  EXPECT_NEAR(x[0], 1.0, 1e-9);
  EXPECT_NEAR(x[1], 1.0, 1e-9);
}

TEST(LeastSquares, NormalEquationsByHandAndRefusals) {
  // The 3 x 2 line fit above: G = A^T A = [[3, 3], [3, 5]], A^T b = (6, 0) -> x = (5, -3).
  const double G[] = {3, 3, 3, 5}, Atb[] = {6, 0};
  const auto x = solve_normal_equations(G, 2, Atb, 1);
  ASSERT_TRUE(x.has_value());
  EXPECT_NEAR((*x)[0], 5.0, 1e-12);
  EXPECT_NEAR((*x)[1], -3.0, 1e-12);
  // Singular and nearly singular Gram matrices are refused (the caller then solves from A).
  const double S[] = {1, 1, 1, 1}, N[] = {1, 1, 1, 1 + 1e-12};
  EXPECT_FALSE(solve_normal_equations(S, 2, Atb, 1).has_value());
  EXPECT_FALSE(solve_normal_equations(N, 2, Atb, 1).has_value());
  const double bad[] = {1, 0, 0, std::numeric_limits<double>::quiet_NaN()};
  EXPECT_THROW(solve_normal_equations(bad, 2, Atb, 1), Error);
  EXPECT_THROW(solve_normal_equations(G, -1, Atb, 1), Error);
}

TEST(LeastSquares, EmptyAndBadInput) {
  EXPECT_TRUE(solve_least_squares(nullptr, 0, 0, nullptr, 1).empty());
  const std::vector<double> zero = solve_least_squares(nullptr, 0, 3, nullptr, 2);
  EXPECT_EQ(zero, std::vector<double>(6, 0.0));
  const double A[] = {1, std::numeric_limits<double>::quiet_NaN()};
  const double b[] = {1};
  EXPECT_THROW(solve_least_squares(A, 1, 2, b, 1), Error);
  const double A2[] = {1, 2};
  const double bad_b[] = {std::numeric_limits<double>::infinity()};
  EXPECT_THROW(solve_least_squares(A2, 1, 2, bad_b, 1), Error);
  EXPECT_THROW(solve_least_squares(A2, -1, 2, b, 1), Error);
}

// A [m, n] with singular values logspaced from 1 down to 1/cond (random orthogonal factors by
// Gram-Schmidt), row-major; the Gram matrix then has condition cond^2.
std::vector<double> conditioned_matrix(int m, int n, double cond, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> g(0.0, 1.0);
  auto orthonormal_columns = [&](int rows, int cols) {
    std::vector<double> Q(static_cast<std::size_t>(rows) * cols);
    for (double& v : Q) v = g(rng);
    for (int j = 0; j < cols; ++j) {
      for (int pass = 0; pass < 2; ++pass)
        for (int p = 0; p < j; ++p) {
          double dot = 0;
          for (int i = 0; i < rows; ++i) dot += Q[i * cols + p] * Q[i * cols + j];
          for (int i = 0; i < rows; ++i) Q[i * cols + j] -= dot * Q[i * cols + p];
        }
      double norm = 0;
      for (int i = 0; i < rows; ++i) norm += Q[i * cols + j] * Q[i * cols + j];
      norm = std::sqrt(norm);
      for (int i = 0; i < rows; ++i) Q[i * cols + j] /= norm;
    }
    return Q;
  };
  const std::vector<double> U = orthonormal_columns(m, n), W = orthonormal_columns(n, n);
  std::vector<double> A(static_cast<std::size_t>(m) * n, 0.0);
  for (int p = 0; p < n; ++p) {
    const double sigma = std::pow(cond, -static_cast<double>(p) / (n - 1));
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) A[i * n + j] += U[i * n + p] * sigma * W[j * n + p];
  }
  return A;
}

TEST(LeastSquares, RefinedNormalEquationsReachTheQrMinimiser) {
  // cond(A) = 1e5 (Gram 1e10 and beyond): the plain normal equations refuse, the refined ones give
  // QR's minimiser (to ~cond(A) * 1e-16 relative); cond(A) = 1e9 is left to QR / SVD.
  const int m = 400, n = 30, k = 2;
  std::mt19937_64 rng(9);
  std::normal_distribution<double> g(0.0, 1.0);
  std::vector<double> B(static_cast<std::size_t>(m) * k);
  for (double& v : B) v = g(rng);
  for (double cond : {1e5, 1e6, 1e9}) {
    const std::vector<double> A = conditioned_matrix(m, n, cond, 21);
    std::vector<double> G(n * n, 0.0), AtB(n * k, 0.0);
    for (int i = 0; i < m; ++i)
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) G[a * n + b] += A[i * n + a] * A[i * n + b];
        for (int c = 0; c < k; ++c) AtB[a * k + c] += A[i * n + a] * B[i * k + c];
      }
    EXPECT_FALSE(solve_normal_equations(G.data(), n, AtB.data(), k).has_value()) << cond;
    const NormalEquationsRefinement refine{A.data(), m, B.data()};
    const auto x = solve_normal_equations(G.data(), n, AtB.data(), k, 1e-10, &refine);
    if (cond > 1e8) {
      EXPECT_FALSE(x.has_value()) << cond;
      continue;
    }
    ASSERT_TRUE(x.has_value()) << cond;
    const std::vector<double> ref = solve_least_squares(A.data(), m, n, B.data(), k, 1e-14);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < ref.size(); ++i) {
      num += ((*x)[i] - ref[i]) * ((*x)[i] - ref[i]);
      den += ref[i] * ref[i];
    }
    EXPECT_LT(std::sqrt(num / den), cond * 1e-14) << cond;
  }
}

}}  // namespace
}  // namespace kvcompact

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// check_finite_matrix finds a NaN or an infinity anywhere (first, middle, last entry) and names the
// first such entry; the largest finite values, denormals and -0 pass.
TEST(CheckFiniteMatrix, FindsEveryNonFiniteEntryAndPassesExtremeFiniteOnes) {
  std::vector<double> m(7 * 5, 1.0);
  m[3] = std::numeric_limits<double>::max();
  m[4] = -std::numeric_limits<double>::max();
  m[5] = std::numeric_limits<double>::denorm_min();
  m[6] = -0.0;
  EXPECT_NO_THROW(check_finite_matrix(m.data(), 7, 5, "m"));
  for (std::size_t at : {std::size_t{0}, std::size_t{17}, m.size() - 1})
    for (double bad : {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                       -std::numeric_limits<double>::infinity()}) {
      std::vector<double> b = m;
      b[at] = bad;
      try {
        check_finite_matrix(b.data(), 7, 5, "m");
        ADD_FAILURE() << "no error for entry " << at;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("entry " + std::to_string(at) + " is not finite"), std::string::npos)
            << e.what();
      }
    }
  EXPECT_THROW(check_finite_matrix(m.data(), -1, 5, "m"), Error);
}

}}  // namespace
}  // namespace kvcompact
