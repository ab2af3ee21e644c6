// C2 fitting variants: least squares, ridge (see value_fit.h).
#include "compaction/value_fit.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>

#include "compaction/least_squares.h"
#include "compaction/nnls.h"
#include "core/error.h"

namespace kvcompact {

std::string value_fit_name(const ValueFitOptions& options) {
  switch (options.kind) {
    case ValueFit::Lsq: return "lsq";
    case ValueFit::Direct: return "direct";
    case ValueFit::Ridge: {
      const char* s = options.scale == RidgeScale::Sigma ? "sigma"
                      : options.scale == RidgeScale::Fro ? "fro"
                                                         : "fixed";
      return fmt::format("ridge:{}:{}", options.lambda, s);
    }
  }
  return "lsq";
}

double ridge_lambda(const double* P, int n, int t, const ValueFitOptions& options) {
  if (!std::isfinite(options.lambda) || options.lambda < 0.0)
    throw Error(fmt::format("ridge C2 fit: lambda {} must be finite and >= 0", options.lambda));
  if (n < 0 || t < 0) throw Error(fmt::format("ridge C2 fit: negative size ({} x {})", n, t));
  switch (options.scale) {
    case RidgeScale::Fixed: return options.lambda;
    case RidgeScale::Sigma: return options.lambda * spectral_norm_squared(P, n, t);
    case RidgeScale::Fro: {
      double f = 0.0;
      const std::size_t count = static_cast<std::size_t>(n) * static_cast<std::size_t>(t);
      for (std::size_t i = 0; i < count; ++i) {
        if (!std::isfinite(P[i])) throw Error(fmt::format("ridge C2 fit: P entry {} is not finite", i));
        f += P[i] * P[i];
      }
      return options.lambda * f;
    }
  }
  return options.lambda;
}

std::vector<double> fit_values(const double* P, int n, int t, const double* Y, int d,
                               const ValueFitOptions& options) {
  if (n < 0 || t < 0 || d < 0)
    throw Error(fmt::format("C2 fit: negative size (n={}, t={}, d={})", n, t, d));
  switch (options.kind) {
    case ValueFit::Direct:
      throw Error("C2 fit: 'direct' takes the original values; there is nothing to fit");
    case ValueFit::Lsq: {
      // Normal equations (P^T P) C2 = P^T Y when well conditioned (Cholesky), else dgelsd / QR on P.
      if (n >= t && t > 0 && d > 0) {
        const std::size_t T2 = static_cast<std::size_t>(t), D2 = static_cast<std::size_t>(d);
        check_finite_matrix(P, n, t, "C2 fit: P");
        check_finite_matrix(Y, n, d, "C2 fit: target");
        const std::vector<double> G = gram_matrix(P, n, t);
        std::vector<double> PtY(T2 * D2, 0.0);
        cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, n, 1.0, P, t, Y, d, 0.0, PtY.data(), d);
        NormalEquationsRefinement refine{P, n, Y};
        if (auto X = solve_normal_equations(G.data(), t, PtY.data(), d, 1e-10, &refine)) return std::move(*X);
      }
      return solve_least_squares(P, n, t, Y, d, options.rcond);
    }
    case ValueFit::Ridge: break;
  }
  const std::size_t N = static_cast<std::size_t>(n), Tt = static_cast<std::size_t>(t),
                    D = static_cast<std::size_t>(d);
  for (std::size_t i = 0; i < N * D; ++i)
    if (!std::isfinite(Y[i])) throw Error(fmt::format("ridge C2 fit: target entry {} is not finite", i));
  const double lam = ridge_lambda(P, n, t, options);  // also checks P
  std::vector<double> C2(Tt * D, 0.0);
  if (t == 0 || d == 0 || n == 0) return C2;
  if (lam > 0.0) {
    // A = P^T P + lam I [t, t], B = P^T Y [t, d].
    std::vector<double> A = gram_matrix(P, n, t);
    for (std::size_t i = 0; i < Tt; ++i) A[i * Tt + i] += lam;
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, t, d, n, 1.0, P, t, Y, d, 0.0, C2.data(), d);
    const lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', t, d, A.data(), t, C2.data(), d);
    bool ok = info == 0;
    for (std::size_t i = 0; ok && i < Tt * D; ++i) ok = std::isfinite(C2[i]);
    if (ok) return C2;
  }
  // Augmented least squares [P; sqrt(lam) I] C2 = [Y; 0].
  std::vector<double> A((N + Tt) * Tt, 0.0), B((N + Tt) * D, 0.0);
  std::copy(P, P + N * Tt, A.begin());
  std::copy(Y, Y + N * D, B.begin());
  const double s = std::sqrt(lam);
  for (std::size_t j = 0; j < Tt; ++j) A[(N + j) * Tt + j] = s;
  return solve_least_squares(A.data(), n + t, t, B.data(), d, options.rcond);
}

}  // namespace kvcompact
