// Bounded NNLS by clipped least squares + projected gradient (see nnls.h).
#include "compaction/nnls.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>

#include <cblas.h>
#include <fmt/format.h>

#include "compaction/least_squares.h"
#include "core/error.h"

namespace kvcompact {
namespace {

// Largest eigenvalue of the symmetric positive semi-definite matrix G [n, n] (row-major) by power
// iteration with the Rayleigh quotient, which for symmetric G converges from below with error
// O((l2/l1)^(2k)) and is exact when the top eigenvalue is repeated. Plain loops: O(n^2) per step,
// no threaded BLAS/LAPACK call (a tiny threaded eigen-solver stalls on an oversubscribed machine).
// The start vector 1 + 0.5 sin(j+1) is positive (overlaps the Perron vector of a non-negative
// Gram matrix, as in the AM beta fit) and not orthogonal to generic eigenvectors.
double largest_eigenvalue(const std::vector<double>& G, int n) {
  if (n == 0) return 0.0;
  const std::size_t N = static_cast<std::size_t>(n);
  std::vector<double> v(N), u(N);
  for (std::size_t j = 0; j < N; ++j) v[j] = 1.0 + 0.5 * std::sin(static_cast<double>(j + 1));
  double lambda = 0.0;
  for (int it = 0; it < 1000; ++it) {
    double vv = 0.0, vu = 0.0, uu = 0.0;
    for (std::size_t i = 0; i < N; ++i) {
      double acc = 0.0;
      const double* g = G.data() + i * N;
      for (std::size_t j = 0; j < N; ++j) acc += g[j] * v[j];
      u[i] = acc;
      vv += v[i] * v[i];
      vu += v[i] * acc;
      uu += acc * acc;
    }
    if (uu == 0.0 || vv == 0.0) return 0.0;  // G v = 0: G == 0 on this start vector
    const double next = vu / vv;              // Rayleigh quotient v^T G v / v^T v
    const double inv = 1.0 / std::sqrt(uu);
    for (std::size_t i = 0; i < N; ++i) v[i] = u[i] * inv;
    if (it > 0 && std::fabs(next - lambda) <= 1e-14 * std::fabs(next)) return next;
    lambda = next;
  }
  return lambda;
}

}  // namespace

double spectral_norm_squared(const double* M, int rows, int cols) {
  check_finite_matrix(M, rows, cols, "spectral norm");
  return largest_eigenvalue(gram_matrix(M, rows, cols), cols);
}

namespace {

void check_options(const NnlsOptions& options) {
  if (options.iters < 0)
    throw Error(fmt::format("nnls: iters {} is negative", options.iters));
  if (!std::isfinite(options.lo) || !std::isfinite(options.hi) || options.lo > options.hi)
    throw Error(fmt::format("nnls: bounds [{}, {}] on log-weights are not a finite interval",
                            options.lo, options.hi));
}

}  // namespace

std::vector<double> bounded_nnls_gram(const double* G, const double* b, int cols, std::vector<double> w,
                                      const NnlsOptions& options) {
  check_options(options);
  if (cols < 0) throw Error(fmt::format("nnls: negative size ({} columns)", cols));
  const std::size_t C = static_cast<std::size_t>(cols);
  if (w.size() != C) throw Error(fmt::format("nnls: start has {} entries for {} columns", w.size(), cols));
  check_finite_matrix(G, cols, cols, "nnls Gram");
  check_finite_matrix(b, cols, 1, "nnls M^T z");
  check_finite_matrix(w.data(), cols, 1, "nnls start");
  const double wlo = std::exp(options.lo), whi = std::exp(options.hi);
  auto clip = [&](std::vector<double>& v) {
    for (double& x : v) x = std::clamp(x, wlo, whi);
  };
  clip(w);
  if (options.iters == 0 || cols == 0) return w;
  const std::vector<double> Gv(G, G + C * C);
  const double L = largest_eigenvalue(Gv, cols);
  if (L <= 0.0) return w;  // M == 0: every w is optimal; keep the clipped start.
  const double step = 1.0 / L;
  std::vector<double> g(C);
  for (int it = 0; it < options.iters; ++it) {
    g.assign(b, b + C);
    cblas_dgemv(CblasRowMajor, CblasNoTrans, cols, cols, 1.0, G, cols, w.data(), 1, -1.0, g.data(), 1);
    for (std::size_t j = 0; j < C; ++j) w[j] -= step * g[j];
    clip(w);
  }
  return w;
}

std::vector<double> bounded_nnls(const double* M, int rows, int cols, const double* z,
                                 const NnlsOptions& options, const double* gram_in, const double* mtz) {
  check_options(options);
  check_finite_matrix(M, rows, cols, "nnls");
  check_finite_matrix(z, rows, 1, "nnls target");
  const std::size_t C = static_cast<std::size_t>(cols);
  if (cols == 0) return {};
  // G = M^T M and b = M^T z: the projected gradient's G w - b, and the normal equations of the
  // unconstrained start when G is well conditioned (else dgelsd / QR on M itself).
  const std::vector<double> G = gram_in != nullptr ? std::vector<double>(gram_in, gram_in + C * C) : gram_matrix(M, rows, cols);
  std::vector<double> b(C, 0.0);
  if (mtz != nullptr)
    b.assign(mtz, mtz + C);
  else if (rows > 0)
    cblas_dgemv(CblasRowMajor, CblasTrans, rows, cols, 1.0, M, cols, z, 1, 0.0, b.data(), 1);
  NormalEquationsRefinement refine{M, rows, z};
  std::optional<std::vector<double>> start =
      rows >= cols ? solve_normal_equations(G.data(), cols, b.data(), 1, 1e-10, &refine) : std::nullopt;
  std::vector<double> w = start ? std::move(*start) : solve_least_squares(M, rows, cols, z, 1, options.rcond);
  return bounded_nnls_gram(G.data(), b.data(), cols, std::move(w), options);
}

}  // namespace kvcompact
