// Fitting the compacted values C2 of Attention Matching (arXiv 2602.16284): given the compacted
// head's attention weights P on the reference queries and the target outputs Y, find C2 with
// P C2 ~ Y.
#pragma once

#include <string>
#include <vector>

namespace kvcompact {

/// How C2 is obtained.
enum class ValueFit {
  Lsq,     ///< C2 = argmin ||P C2 - Y||_F, min-norm (LAPACK dgelsd)
  Ridge,   ///< C2 = argmin ||P C2 - Y||_F^2 + lambda_eff ||C2||_F^2
  Direct,  ///< C2 = the original values V[sel] (no fit)
};

/// How the ridge lambda is scaled into lambda_eff.
enum class RidgeScale {
  Sigma,  ///< lambda_eff = lambda * sigma_max(P)^2 (default; scale-free)
  Fro,    ///< lambda_eff = lambda * ||P||_F^2
  Fixed,  ///< lambda_eff = lambda
};

/// Options of the C2 fit.
struct ValueFitOptions {
  ValueFit kind = ValueFit::Lsq;
  double lambda = 1e-4;  ///< ridge strength (>= 0, finite), see RidgeScale
  RidgeScale scale = RidgeScale::Sigma;
  double rcond = 1e-12;  ///< dgelsd cut-off for Lsq (and the ridge fallback)
  bool operator==(const ValueFitOptions&) const = default;
};

/// "lsq", "direct", "ridge:<lambda>:<sigma|fro|fixed>" (lambda printed in shortest round-trip form).
std::string value_fit_name(const ValueFitOptions& options);

/// Effective ridge strength for P [n, t]: lambda * sigma_max(P)^2, lambda * ||P||_F^2 or lambda.
/// Throws Error when lambda is negative or not finite.
double ridge_lambda(const double* P, int n, int t, const ValueFitOptions& options);

/// Fits C2 for Lsq or Ridge:  P: [n, t] row-major, Y: [n, d] row-major  ->  C2: [t, d] row-major.
///   Lsq:   solve_least_squares(P, Y, rcond).
///   Ridge: (P^T P + lambda_eff I) C2 = P^T Y by Cholesky (LAPACK dposv); when lambda_eff == 0 or
///          the Cholesky fails, dgelsd on the augmented system [P; sqrt(lambda_eff) I] C2 = [Y; 0].
/// Throws Error for ValueFit::Direct (the caller copies V), on negative sizes, non-finite input or
/// a bad lambda.
std::vector<double> fit_values(const double* P, int n, int t, const double* Y, int d,
                               const ValueFitOptions& options);

}  // namespace kvcompact
