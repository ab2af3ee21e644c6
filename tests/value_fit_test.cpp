#include "compaction/value_fit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compaction/least_squares.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(ValueFit, RidgeHandWorkedOneDimensional) {
  // c = p.y / (p.p + lambda_eff), p = (1, 2, 2), y = (1, 0, 3): p.y = 7, p.p = 9.
  const std::vector<double> p = {1, 2, 2}, y = {1, 0, 3};
  ValueFitOptions o;
  o.kind = ValueFit::Ridge;
  o.lambda = 1.0;
  o.scale = RidgeScale::Fixed;
  EXPECT_NEAR(fit_values(p.data(), 3, 1, y.data(), 1, o)[0], 7.0 / 10.0, 1e-13);
  o.lambda = 0.5;
  o.scale = RidgeScale::Sigma;  // lambda_eff = 0.5 * 9
  EXPECT_NEAR(fit_values(p.data(), 3, 1, y.data(), 1, o)[0], 7.0 / 13.5, 1e-12);
  o.scale = RidgeScale::Fro;  // one column: ||p||_F^2 = 9 too
  EXPECT_NEAR(fit_values(p.data(), 3, 1, y.data(), 1, o)[0], 7.0 / 13.5, 1e-12);
  o.kind = ValueFit::Lsq;
  EXPECT_NEAR(fit_values(p.data(), 3, 1, y.data(), 1, o)[0], 7.0 / 9.0, 1e-12);
}

TEST(ValueFit, RidgeLambdaScales) {
  const std::vector<double> P = {3, 0, 0, 4};  // sigma_max^2 = 16, ||P||_F^2 = 25
  ValueFitOptions o;
  o.kind = ValueFit::Ridge;
  o.lambda = 0.1;
  EXPECT_NEAR(ridge_lambda(P.data(), 2, 2, o), 1.6, 1e-12);
  o.scale = RidgeScale::Fro;
  EXPECT_NEAR(ridge_lambda(P.data(), 2, 2, o), 2.5, 1e-12);
  o.scale = RidgeScale::Fixed;
  EXPECT_NEAR(ridge_lambda(P.data(), 2, 2, o), 0.1, 1e-15);
  // Diagonal P: c_j = P_jj y_j / (P_jj^2 + lambda_eff), per column.
  const std::vector<double> Y = {1, 2, 3, 4};  // [2, 2]
  o.scale = RidgeScale::Fro;
  const std::vector<double> C = fit_values(P.data(), 2, 2, Y.data(), 2, o);
  EXPECT_NEAR(C[0], 3.0 * 1 / (9 + 2.5), 1e-12);
  EXPECT_NEAR(C[1], 3.0 * 2 / (9 + 2.5), 1e-12);
  EXPECT_NEAR(C[2], 4.0 * 3 / (16 + 2.5), 1e-12);
  EXPECT_NEAR(C[3], 4.0 * 4 / (16 + 2.5), 1e-12);
}

TEST(ValueFit, RidgeMatchesAugmentedLeastSquares) {
  std::mt19937_64 rng(31);
  std::normal_distribution<double> g(0.0, 1.0);
  const int n = 20, t = 6, d = 3;
  std::vector<double> P(n * t), Y(n * d);
  for (double& x : P) x = g(rng);
  for (double& x : Y) x = g(rng);
  ValueFitOptions o;
  o.kind = ValueFit::Ridge;
  o.lambda = 0.3;
  o.scale = RidgeScale::Fixed;
  const std::vector<double> C = fit_values(P.data(), n, t, Y.data(), d, o);
  // Reference: [P; sqrt(lambda) I] C = [Y; 0] by dgelsd.
  std::vector<double> A((n + t) * t, 0.0), B((n + t) * d, 0.0);
  for (int i = 0; i < n * t; ++i) A[i] = P[i];
  for (int i = 0; i < n * d; ++i) B[i] = Y[i];
  for (int j = 0; j < t; ++j) A[(n + j) * t + j] = std::sqrt(0.3);
  const std::vector<double> ref = solve_least_squares(A.data(), n + t, t, B.data(), d);
  for (int i = 0; i < t * d; ++i) EXPECT_NEAR(C[i], ref[i], 1e-10);
  // lambda = 0 is plain least squares.
  o.lambda = 0.0;
  const std::vector<double> C0 = fit_values(P.data(), n, t, Y.data(), d, o);
  const std::vector<double> ls = solve_least_squares(P.data(), n, t, Y.data(), d);
  for (int i = 0; i < t * d; ++i) EXPECT_NEAR(C0[i], ls[i], 1e-10);
}

TEST(ValueFit, LsqTakesNormalEquationsOnlyWhenSafe) {
  // Random positive P [400, 30] (softmax-like rows): the Cholesky path must give the QR / SVD
  // minimiser within 1e-9. Then column 1 := column 0 (1 + 1e-13): the normal equations must be
  // refused, and the answer is dgelsd's minimum-norm one.
  const int n = 400, t = 30, d = 4;
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> P(static_cast<std::size_t>(n) * t), Y(static_cast<std::size_t>(n) * d);
  for (double& v : P) v = u(rng);
  for (double& v : Y) v = u(rng) - 0.5;
  ValueFitOptions o;  // Lsq
  std::vector<double> fast = fit_values(P.data(), n, t, Y.data(), d, o);
  std::vector<double> ref = solve_least_squares(P.data(), n, t, Y.data(), d, o.rcond);
  ASSERT_EQ(fast.size(), ref.size());
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(fast[i], ref[i], 1e-9 * (1.0 + std::fabs(ref[i])));
  for (int i = 0; i < n; ++i) P[i * t + 1] = P[i * t] * (1.0 + 1e-13);
  fast = fit_values(P.data(), n, t, Y.data(), d, o);
  ref = solve_least_squares(P.data(), n, t, Y.data(), d, o.rcond);
  for (std::size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(fast[i], ref[i], 1e-9 * (1.0 + std::fabs(ref[i])));
  for (int c = 0; c < d; ++c) EXPECT_NEAR(fast[c], fast[d + c], 1e-6 * (1.0 + std::fabs(fast[c])));  // min norm splits evenly
}

TEST(ValueFit, NamesAndErrors) {
  ValueFitOptions o;
  EXPECT_EQ(value_fit_name(o), "lsq");
  o.kind = ValueFit::Ridge;
  EXPECT_EQ(value_fit_name(o), "ridge:0.0001:sigma");
  o.scale = RidgeScale::Fixed;
  o.lambda = 0.5;
  EXPECT_EQ(value_fit_name(o), "ridge:0.5:fixed");
  const std::vector<double> P = {1, 2}, Y = {1, 1};
  o.lambda = -1;
  EXPECT_THROW(fit_values(P.data(), 2, 1, Y.data(), 1, o), Error);
  o.lambda = std::nan("");
  EXPECT_THROW(fit_values(P.data(), 2, 1, Y.data(), 1, o), Error);
  o.kind = ValueFit::Direct;
  EXPECT_EQ(value_fit_name(o), "direct");
  EXPECT_THROW(fit_values(P.data(), 2, 1, Y.data(), 1, o), Error);
  o.kind = ValueFit::Ridge;
  o.lambda = 1;
  std::vector<double> bad = Y;
  bad[0] = std::nan("");
  EXPECT_THROW(fit_values(P.data(), 2, 1, bad.data(), 1, o), Error);
}

}}  // namespace
}  // namespace kvcompact
