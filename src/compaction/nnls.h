// Bounded non-negative least squares for the Attention-Matching mass weights (beta = log w).
#pragma once

#include <vector>

namespace kvcompact {

/// Options of bounded_nnls. The weights are kept in [e^lo, e^hi], i.e. beta = log w in [lo, hi].
struct NnlsOptions {
  int iters = 2;     ///< projected-gradient steps after the clipped least-squares start (>= 0)
  double lo = -3.0;  ///< lower bound of beta = log w (nats)
  double hi = 3.0;   ///< upper bound of beta = log w (nats); needs lo <= hi
  double rcond = 1e-12;  ///< dgelsd cut-off for the unconstrained start (see solve_least_squares)
  bool operator==(const NnlsOptions&) const = default;
};

/// Squared spectral norm ||M||_2^2 = largest eigenvalue of M^T M (Gram by cblas_dsyrk, then power
/// iteration with the Rayleigh quotient to relative change 1e-14), M: [rows, cols] row-major.
/// 0 for an empty matrix. Throws Error on negative sizes or non-finite entries.
double spectral_norm_squared(const double* M, int rows, int cols);

/// Approximately solves min_w ||M w - z||^2 subject to e^lo <= w <= e^hi, as in Attention Matching
/// (arXiv 2602.16284, beta fit): w0 = clip(unconstrained min-norm least-squares solution), then
/// `iters` projected-gradient steps w <- clip(w - (1/||M||_2^2) M^T (M w - z), e^lo, e^hi).
///   M: [rows, cols] row-major, z: [rows]  ->  w: [cols], every entry in [e^lo, e^hi].
/// The gradient uses the Gram matrix M^T M [cols, cols] (O(cols^2) per step). A caller that has
/// G = M^T M (row-major, both triangles) and b = M^T z already (e.g. as a sub-block of a larger
/// Gram, AttentionMatcher::share_gram) passes them as `gram` / `mtz`, which saves the
/// O(rows cols^2) product; M is then read only when G is too ill-conditioned for the normal
/// equations. Throws Error on bad options (iters < 0, lo > hi, non-finite bounds), negative sizes
/// or non-finite input.
std::vector<double> bounded_nnls(const double* M, int rows, int cols, const double* z,
                                 const NnlsOptions& options = {}, const double* gram = nullptr,
                                 const double* mtz = nullptr);

/// The same fit from the normal equations: G = M^T M [cols, cols] (row-major, both triangles),
/// b = M^T z [cols] and `start`, the unconstrained least-squares solution [cols] (bounded_nnls
/// computes it from G when well conditioned, else from M). Clips the start to [e^lo, e^hi], then
/// runs the `iters` projected-gradient steps. Lets a caller that grows G one column at a time (the
/// paper's OMP loop) refit without M. Throws Error on bad options, sizes or non-finite input.
std::vector<double> bounded_nnls_gram(const double* G, const double* b, int cols, std::vector<double> start,
                                      const NnlsOptions& options = {});

}  // namespace kvcompact
