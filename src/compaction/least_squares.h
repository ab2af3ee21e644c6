// Dense linear least squares, min-norm for rank-deficient / under-determined systems (LAPACK dgelsd).
#pragma once

#include <optional>
#include <vector>

namespace kvcompact {

/// Throws Error "WHAT: negative size (r x c)" or "WHAT: matrix entry I is not finite" (I the flat
/// row-major index) unless M: [rows, cols] has non-negative sizes and only finite entries.
void check_finite_matrix(const double* M, int rows, int cols, const char* what);

/// G = A^T A [cols, cols] of A [rows, cols] row-major, by cblas_dsyrk with both triangles filled;
/// all zeros when rows or cols is 0. Does not check the entries (callers do).
std::vector<double> gram_matrix(const double* A, int rows, int cols);

/// Solves min_X ||A X - B||_F in double precision with LAPACK dgelsd (SVD-based; among all
/// minimisers it returns the one of minimum Frobenius norm, so under-determined and rank-deficient
/// systems are handled). Singular values below rcond * sigma_max count as zero (rcond < 0: machine
/// precision, as in LAPACK).
///   A: [m, n] row-major, B: [m, k] row-major  ->  X: [n, k] row-major.
/// m == 0 or n == 0 gives X = 0. Throws Error on negative sizes, non-finite input or when the SVD
/// does not converge. Memory: one column-major copy of A and of B (dgelsd overwrites them).
/// Fast path: when m >= n and the Householder QR factor R is well conditioned (dtrcon's
/// reciprocal condition estimate > 1000 n rcond, so the SVD would keep every singular value),
/// the system is solved by QR (dgeqrf, dormqr, dtrtrs) instead, which gives the same unique
/// minimiser up to rounding; all other systems go to dgelsd.
std::vector<double> solve_least_squares(const double* A, int m, int n, const double* B, int k,
                                        double rcond = 1e-12, int* rank = nullptr);

/// The same minimiser from the normal equations, when they are safe: G = A^T A [n, n] and
/// AtB = A^T B [n, k] (row-major, as dsyrk / dgemm give them) -> X [n, k] by Cholesky (dpotrf,
/// dpotrs). Returns std::nullopt, and the caller solves from A instead, when G is not positive
/// definite or its reciprocal condition estimate (dpocon, 1-norm) is at or below min_rcond: the
/// normal equations lose about cond(G) * 1e-16 relative accuracy, so min_rcond = 1e-10 keeps the
/// answer within ~1e-6 of the QR / SVD one. Throws Error on negative sizes or non-finite input.
///
/// With `refine` (the system itself: A [m, n] and B [m, k], row-major) a G whose estimate is at or
/// below min_rcond but above refine->min_rcond (default 1e-16, i.e. cond(A) < ~1e8) is not given
/// up: from the Cholesky solution x, the corrected semi-normal equations (Bjorck, Numerical
/// Methods for Least Squares Problems, sec. 2.5.2) step x <- x + G^{-1} A^T (B - A x), residual
/// in double, contracting by about cond(G) * 1e-16 per step, until the step is at most
/// max(1e-14, 1e-15 / sqrt(rcond estimate)) of max|x| (about cond(A) * 1e-16, the forward error of a
/// QR solution; at most refine->max_steps steps). That is the least-squares minimiser the QR would
/// give, at 4 m n k flops per step against the QR's ~2 m n^2. nullopt when the steps stall.
struct NormalEquationsRefinement {
  const double* A = nullptr;  ///< [m, n] row-major
  int m = 0;
  const double* B = nullptr;  ///< [m, k] row-major
  double min_rcond = 1e-16;
  int max_steps = 8;
};
std::optional<std::vector<double>> solve_normal_equations(const double* G, int n, const double* AtB, int k,
                                                          double min_rcond = 1e-10,
                                                          const NormalEquationsRefinement* refine = nullptr);

}  // namespace kvcompact
