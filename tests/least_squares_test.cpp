#include "compaction/least_squares.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"

namespace kvcompact {
namespace {

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

}  // namespace
}  // namespace kvcompact
