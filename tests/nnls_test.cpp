#include "compaction/nnls.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// M = [[1, 0], [0, 1], [1, 1]], z = (3, -1, 1).
// G = M^T M = [[2, 1], [1, 2]] (eigenvalues 1 and 3, so ||M||_2^2 = 3), M^T z = (4, 0).
// Unconstrained: 2a + b = 4, a + 2b = 0 -> (a, b) = (8/3, -4/3): b is negative.
// With e = e^-3 (the lower bound) the clipped start is (8/3, e). Gradient g = G w - (4, 0).
//  step 1: g = (4/3 + e, 8/3 + 2e); w = (8/3 - (4/3 + e)/3, e - (8/3 + 2e)/3)
//          = (20/9 - e/3, e/3 - 8/9) -> clip -> (20/9 - e/3, e)
//  step 2: g_a = 2(20/9 - e/3) + e - 4 = 4/9 + e/3; a = 20/9 - e/3 - (4/9 + e/3)/3 = 56/27 - 4e/9;
//          b again steps below e and is clipped to e.
// The bounded optimum (b at its bound) has 2a + e = 4, a = 2 - e/2.
const double kM[] = {1, 0, 0, 1, 1, 1};
const double kZ[] = {3, -1, 1};

TEST(Nnls, HandWorkedTwoVariableProblem) {
  const double e = std::exp(-3.0);
  NnlsOptions opt;  // iters 2, lo -3, hi 3
  std::vector<double> w = bounded_nnls(kM, 3, 2, kZ, opt);
  ASSERT_EQ(w.size(), 2u);
  EXPECT_NEAR(w[0], 56.0 / 27.0 - 4.0 * e / 9.0, 1e-12);
  EXPECT_NEAR(w[1], e, 1e-15);

  opt.iters = 0;  // just the clipped least-squares start
  w = bounded_nnls(kM, 3, 2, kZ, opt);
  EXPECT_NEAR(w[0], 8.0 / 3.0, 1e-12);
  EXPECT_NEAR(w[1], e, 1e-15);

  opt.iters = 1;
  w = bounded_nnls(kM, 3, 2, kZ, opt);
  EXPECT_NEAR(w[0], 20.0 / 9.0 - e / 3.0, 1e-12);

  opt.iters = 300;  // converges to the bounded optimum
  w = bounded_nnls(kM, 3, 2, kZ, opt);
  EXPECT_NEAR(w[0], 2.0 - e / 2.0, 1e-10);
  EXPECT_NEAR(w[1], e, 1e-15);
}

TEST(Nnls, UpperBoundIsRespected) {
  // hi = 0 -> w <= 1. Start clip(8/3, -4/3) = (1, e); step: a = 1 - (2 + e - 4)/3 > 1 -> clipped.
  NnlsOptions opt;
  opt.hi = 0.0;
  const std::vector<double> w = bounded_nnls(kM, 3, 2, kZ, opt);
  EXPECT_DOUBLE_EQ(w[0], 1.0);
  EXPECT_NEAR(w[1], std::exp(-3.0), 1e-15);
}

TEST(Nnls, SpectralNormOfDiagonalMatrix) {
  // M = diag(3, 1, 2) with an extra zero row: ||M||_2 = 3, so the step is 1/9.
  const double M[] = {3, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0};
  EXPECT_NEAR(spectral_norm_squared(M, 4, 3), 9.0, 1e-12);
  EXPECT_NEAR(spectral_norm_squared(kM, 3, 2), 3.0, 1e-12);
  EXPECT_EQ(spectral_norm_squared(nullptr, 0, 0), 0.0);
}

TEST(Nnls, RandomProblemsStayWithinBoundsAndImproveOnTheStart) {
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int rows = 40, cols = 12;
  std::vector<double> M(rows * cols), z(rows);
  for (double& x : M) x = u(rng);
  for (double& x : z) x = 4.0 * u(rng) - 1.0;
  auto objective = [&](const std::vector<double>& w) {
    double s = 0;
    for (int i = 0; i < rows; ++i) {
      double r = -z[i];
      for (int j = 0; j < cols; ++j) r += M[i * cols + j] * w[j];
      s += r * r;
    }
    return s;
  };
  NnlsOptions opt;
  opt.lo = -1.0;
  opt.hi = 0.5;
  opt.iters = 0;
  const std::vector<double> w0 = bounded_nnls(M.data(), rows, cols, z.data(), opt);
  opt.iters = 5;
  const std::vector<double> w5 = bounded_nnls(M.data(), rows, cols, z.data(), opt);
  for (double x : w5) {
    EXPECT_GE(x, std::exp(-1.0));
    EXPECT_LE(x, std::exp(0.5));
  }
  // Projected gradient with step 1/L never increases a convex L-smooth objective.
  EXPECT_LE(objective(w5), objective(w0) + 1e-12);
}

TEST(Nnls, BadOptionsThrow) {
  NnlsOptions opt;
  opt.iters = -1;
  EXPECT_THROW(bounded_nnls(kM, 3, 2, kZ, opt), Error);
  opt = {};
  opt.lo = 1.0;
  opt.hi = 0.0;
  EXPECT_THROW(bounded_nnls(kM, 3, 2, kZ, opt), Error);
  opt = {};
  opt.hi = std::nan("");
  EXPECT_THROW(bounded_nnls(kM, 3, 2, kZ, opt), Error);
  const double bad_z[] = {1, std::nan(""), 0};
  EXPECT_THROW(bounded_nnls(kM, 3, 2, bad_z, NnlsOptions{}), Error);
}

}}  // namespace
}  // namespace kvcompact
