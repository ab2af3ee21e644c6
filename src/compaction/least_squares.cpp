// Dense least squares via LAPACKE_dgelsd (column-major call, see least_squares.h).
#include "compaction/least_squares.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <fmt/format.h>
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

void check_finite_matrix(const double* M, int rows, int cols, const char* what) {
  if (rows < 0 || cols < 0)
    throw Error(fmt::format("{}: negative size ({} x {})", what, rows, cols));
  const std::size_t count = static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols);
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
                                                          double min_rcond) {
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
  if (LAPACKE_dpocon_work(LAPACK_COL_MAJOR, 'U', n, L.data(), n, anorm, &rc, work.data(), iwork.data()) != 0 ||
      !(rc > min_rcond))
    return std::nullopt;
  std::vector<double> b(N * K);  // column-major copy of AtB
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < K; ++c) b[i + c * N] = AtB[i * K + c];
  if (LAPACKE_dpotrs_work(LAPACK_COL_MAJOR, 'U', n, k, L.data(), n, b.data(), n) != 0) return std::nullopt;
  std::vector<double> X(N * K);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t c = 0; c < K; ++c) X[i * K + c] = b[i + c * N];
  return X;
}

}  // namespace kvcompact
