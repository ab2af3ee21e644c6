// Dense least squares via LAPACKE_dgelsd (column-major call, see least_squares.h).
#include "compaction/least_squares.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <cblas.h>
#include <lapacke.h>

#include "core/error.h"

namespace kvcompact {
namespace {

// Householder QR of the column-major a [m, n] (m >= n) and, when the triangular factor is well
// conditioned, the least-squares solution written into the first n rows of b [ldb, k]. Returns
// false (a and b then undefined) when R's reciprocal 1-norm condition estimate (dtrcon) is at or
// below min_rc. The _work calls skip LAPACKE's NaN scans (the caller has checked every entry).
bool solve_by_qr(std::vector<double>& a, lapack_int m, lapack_int n, std::vector<double>& b, lapack_int ldb,
                 lapack_int k, double min_rc) {
  std::vector<double> tau(static_cast<std::size_t>(n));
  double query = 0.0;
  if (LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, a.data(), m, tau.data(), &query, -1) != 0) return false;
  double query2 = 0.0;
  if (LAPACKE_dormqr_work(LAPACK_COL_MAJOR, 'L', 'T', m, k, n, a.data(), m, tau.data(), b.data(), ldb, &query2,
                          -1) != 0)
    return false;
  std::vector<double> work(static_cast<std::size_t>(std::max({query, query2, 3.0 * n, 1.0})));
  const lapack_int lwork = static_cast<lapack_int>(work.size());
  if (LAPACKE_dgeqrf_work(LAPACK_COL_MAJOR, m, n, a.data(), m, tau.data(), work.data(), lwork) != 0) return false;
  double rc = 0.0;
  std::vector<lapack_int> iwork(static_cast<std::size_t>(n));
  if (LAPACKE_dtrcon_work(LAPACK_COL_MAJOR, '1', 'U', 'N', n, a.data(), m, &rc, work.data(), iwork.data()) != 0 ||
      !(rc > min_rc))
    return false;
  if (LAPACKE_dormqr_work(LAPACK_COL_MAJOR, 'L', 'T', m, k, n, a.data(), m, tau.data(), b.data(), ldb,
                          work.data(), lwork) != 0)
    return false;
  return LAPACKE_dtrtrs_work(LAPACK_COL_MAJOR, 'U', 'N', 'N', n, k, a.data(), m, b.data(), ldb) == 0;
}

}  // namespace

std::vector<double> gram_matrix(const double* A, int rows, int cols) {
  const std::size_t C = static_cast<std::size_t>(std::max(cols, 0));
  std::vector<double> G(C * C, 0.0);
  if (rows <= 0 || cols <= 0) return G;
  cblas_dsyrk(CblasRowMajor, CblasUpper, CblasTrans, cols, rows, 1.0, A, cols, 0.0, G.data(), cols);
  for (std::size_t i = 0; i < C; ++i)
    for (std::size_t j = 0; j < i; ++j) G[i * C + j] = G[j * C + i];
  return G;
}

void check_finite_matrix(const double* M, int rows, int cols, const char* what) {
  if (rows < 0 || cols < 0)
    throw Error(fmt::format("{}: negative size ({} x {})", what, rows, cols));
  const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
  // A double is NaN or infinite exactly when its exponent bits are all ones: the largest exponent
  // field over the matrix is an integer max, which the compiler vectorises (the per-entry
  // std::isfinite branch did not, and ran on every AM fit of an influence sweep).
  constexpr std::uint64_t kExponent = 0x7FF0000000000000ull;
  std::uint64_t largest = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::uint64_t bits;
    std::memcpy(&bits, M + i, sizeof bits);
    largest = std::max(largest, bits & kExponent);
  }
  if (largest != kExponent) return;
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(M[i]))
      throw Error(fmt::format("{}: matrix entry {} is not finite", what, i));
}

std::vector<double> solve_least_squares(const double* A, int m, int n, const double* B, int k,
                                        double rcond, int* rank) {
  if (m < 0 || n < 0 || k < 0)
    throw Error(fmt::format("least squares: negative size (m={}, n={}, k={})", m, n, k));
  if (rank) *rank = 0;
  const std::size_t M = static_cast<std::size_t>(m), N = static_cast<std::size_t>(n),
                    K = static_cast<std::size_t>(k);
  std::vector<double> X(N * K, 0.0);
  if (m == 0 || n == 0 || k == 0) return X;
  const std::size_t ldb = std::max(M, N);
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < N; ++j)
      if (!std::isfinite(A[i * N + j]))
        throw Error(fmt::format("least squares: matrix entry ({}, {}) is not finite", i, j));
    for (std::size_t c = 0; c < K; ++c)
      if (!std::isfinite(B[i * K + c]))
        throw Error(fmt::format("least squares: right-hand side ({}, {}) is not finite", i, c));
  }
  // Column-major copies: a[i + j*m] = A[i][j], b[i + c*ldb] = B[i][c] (rows m..ldb of b zero).
  std::vector<double> a(M * N), b(ldb * K);
  auto fill = [&] {
    for (std::size_t i = 0; i < M; ++i) {
      for (std::size_t j = 0; j < N; ++j) a[i + j * M] = A[i * N + j];
      for (std::size_t c = 0; c < K; ++c) b[i + c * ldb] = B[i * K + c];
    }
    for (std::size_t c = 0; c < K; ++c)
      for (std::size_t i = M; i < ldb; ++i) b[i + c * ldb] = 0.0;
  };
  fill();
  // Full-rank over-determined systems far from rcond: QR gives dgelsd's solution (there is one
  // minimiser) at a fraction of the cost. sigma_min / sigma_max >= rc_1 / n, and dtrcon may
  // overestimate rc_1 by about 10x, so rc_1 > 1000 n rcond keeps every singular value above
  // 100 rcond sigma_max; then the SVD cut-off cannot drop one and both solvers agree.
  if (m >= n) {
    const double cut = rcond < 0.0 ? std::numeric_limits<double>::epsilon() : rcond;
    const double min_rc = std::max(1000.0 * static_cast<double>(n) * cut, 1e-300);
    if (solve_by_qr(a, m, n, b, static_cast<lapack_int>(ldb), k, min_rc)) {
      if (rank) *rank = n;
      for (std::size_t j = 0; j < N; ++j)
        for (std::size_t c = 0; c < K; ++c) X[j * K + c] = b[j + c * ldb];
      return X;
    }
    fill();  // QR overwrote a (and maybe b); dgelsd starts from the original system
  }
  std::vector<double> s(std::min(M, N));
  lapack_int r = 0;
  const lapack_int info =
      LAPACKE_dgelsd(LAPACK_COL_MAJOR, m, n, k, a.data(), m, b.data(), static_cast<lapack_int>(ldb),
                     s.data(), rcond, &r);
  if (info != 0)
    throw Error(fmt::format("least squares: LAPACK dgelsd failed (info {}) on a {}x{} system", info,
                            m, n));
  if (rank) *rank = static_cast<int>(r);
  for (std::size_t j = 0; j < N; ++j)
    for (std::size_t c = 0; c < K; ++c) X[j * K + c] = b[j + c * ldb];
  return X;
}

std::optional<std::vector<double>> solve_normal_equations(const double* G, int n, const double* AtB, int k,
                                                          double min_rcond, const NormalEquationsRefinement* refine) {
  if (n < 0 || k < 0) throw Error(fmt::format("normal equations: negative size (n={}, k={})", n, k));
  const std::size_t N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k);
  for (std::size_t i = 0; i < N * N; ++i)
    if (!std::isfinite(G[i])) throw Error(fmt::format("normal equations: Gram entry {} is not finite", i));
  for (std::size_t i = 0; i < N * K; ++i)
    if (!std::isfinite(AtB[i])) throw Error(fmt::format("normal equations: right-hand side entry {} is not finite", i));
  if (n == 0 || k == 0) return std::vector<double>(N * K, 0.0);
  // G is symmetric: its row-major array is its column-major array.
  std::vector<double> L(G, G + N * N);
  double anorm = 0.0;  // 1-norm of G (largest column sum)
  for (std::size_t j = 0; j < N; ++j) {
    double col = 0.0;
    for (std::size_t i = 0; i < N; ++i) col += std::fabs(G[i * N + j]);
    anorm = std::max(anorm, col);
  }
  if (LAPACKE_dpotrf_work(LAPACK_COL_MAJOR, 'U', n, L.data(), n) != 0) return std::nullopt;
  double rc = 0.0;
  std::vector<double> work(3 * N);
  std::vector<lapack_int> iwork(N);
  if (LAPACKE_dpocon_work(LAPACK_COL_MAJOR, 'U', n, L.data(), n, anorm, &rc, work.data(), iwork.data()) != 0)
    return std::nullopt;
  const bool refining = !(rc > min_rcond);
  if (refining && (refine == nullptr || !(rc > refine->min_rcond) || refine->A == nullptr || refine->B == nullptr ||
                   refine->m < 0))
    return std::nullopt;
  // Solves G x = rhs in place for rhs [n, k] row-major through the column-major factor.
  std::vector<double> b(N * K);
  auto cholesky_solve = [&](std::vector<double>& rhs) {
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t c = 0; c < K; ++c) b[i + c * N] = rhs[i * K + c];
    if (LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'U', n, k, L.data(), n, b.data(), n) != 0) return false;
    for (std::size_t i = 0; i < N; ++i)
      for (std::size_t c = 0; c < K; ++c) rhs[i * K + c] = b[i + c * N];
    return true;
  };
  std::vector<double> X(AtB, AtB + N * K);
  if (!cholesky_solve(X)) return std::nullopt;
  if (!refining) return X;
  // Corrected semi-normal equations: x += G^{-1} A^T (B - A x) until the step is negligible.
  const std::size_t M = static_cast<std::size_t>(refine->m);
  std::vector<double> R(M * K), step(N * K);
  auto max_abs = [](const std::vector<double>& v) {
    double a = 0.0;
    for (double x : v) a = std::max(a, std::fabs(x));
    return a;
  };
  // The steps stall at about cond(A) * 1e-16 relative (the residual's rounding), which is also
  // the forward error of a QR solution: accept a step below max(1e-14, 1e-15 / sqrt(rc)) of x.
  const double tol = std::max(1e-14, 1e-15 / std::sqrt(rc));
  double last = std::numeric_limits<double>::infinity();
  for (int it = 0; it < refine->max_steps; ++it) {
    std::copy(refine->B, refine->B + M * K, R.begin());
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, refine->m, k, n, -1.0, refine->A, n, X.data(), k, 1.0,
                R.data(), k);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, refine->m, 1.0, refine->A, n, R.data(), k, 0.0,
                step.data(), k);
    if (!cholesky_solve(step)) return std::nullopt;
    for (std::size_t i = 0; i < N * K; ++i) X[i] += step[i];
    const double s = max_abs(step), x = max_abs(X);
    if (!std::isfinite(s) || !std::isfinite(x)) return std::nullopt;
    if (s <= tol * x) return X;
    if (s > 0.5 * last) return std::nullopt;  // not contracting: leave it to QR / SVD
    last = s;
  }
  return std::nullopt;
}

}  // namespace kvcompact
