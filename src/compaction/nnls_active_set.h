// Exact non-negative least squares by the Lawson-Hanson active-set method.
#pragma once

#include <vector>

namespace kvcompact {

/// Options of the active-set NNLS solvers below.
struct ActiveSetNnlsOptions {
  /// Cap on outer iterations (a column entering the passive set); 0 means 3 * cols + 30.
  /// On reaching it the current feasible iterate is returned (no exception).
  int max_iter = 0;
  /// Relative optimality tolerance: the solver stops when every zero weight has a dual
  /// (b - G w)_j <= tol * scale, scale = max(max_j |b_j|, max_j G_jj), i.e. the KKT conditions
  /// hold to that tolerance.
  double tol = 1e-10;
  bool operator==(const ActiveSetNnlsOptions&) const = default;
};

/// Solves min_w ||M w - z||^2 subject to w >= 0 exactly (Lawson & Hanson, "Solving Least Squares
/// Problems", 1974, ch. 23, algorithm NNLS), in double precision.
///   M: [rows, cols] row-major, z: [rows]  ->  w: [cols], w >= 0.
/// Works on the normal equations (G = M^T M [cols, cols], b = M^T z); each passive-set subproblem
/// G_PP s = b_P is solved by Cholesky (LAPACK dposv), falling back to min-norm least squares
/// (dgelsd) when G_PP is singular (e.g. rows < cols or repeated columns), so the returned w is a
/// KKT point: g = M^T (M w - z) has g_j ~ 0 where w_j > 0 and g_j >= -tol where w_j = 0.
/// Starts from w = 1 on every column (all passive; beta = log w = 0 in Attention Matching) and lets
/// the inner loop drop the columns that hit zero. Throws Error on negative sizes or non-finite
/// input.
std::vector<double> nnls_active_set(const double* M, int rows, int cols, const double* z,
                                    const ActiveSetNnlsOptions& options = {});

/// The same solver on the normal equations: min_w 1/2 w^T G w - b^T w, w >= 0, with G: [cols, cols]
/// symmetric positive semi-definite row-major and b: [cols]. `start` (size cols or empty): a
/// warm start, clipped at 0, whose positive entries form the initial passive set; empty = start
/// from w = 0 (plain Lawson-Hanson). Throws Error on negative sizes, a start of the wrong size, or
/// non-finite input.
std::vector<double> nnls_active_set_gram(const double* G, const double* b, int cols,
                                         const std::vector<double>& start = {},
                                         const ActiveSetNnlsOptions& options = {});

}  // namespace kvcompact
