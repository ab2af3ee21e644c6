// Dense least squares via LAPACKE_dgelsd (column-major call, see least_squares.h).
#include "compaction/least_squares.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>
#include <lapacke.h>

#include "core/error.h"

namespace kvcompact {

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
  // Column-major copies: a[i + j*m] = A[i][j], b[i + c*ldb] = B[i][c].
  std::vector<double> a(M * N), b(ldb * K, 0.0);
  for (std::size_t i = 0; i < M; ++i) {
    for (std::size_t j = 0; j < N; ++j) {
      const double v = A[i * N + j];
      if (!std::isfinite(v))
        throw Error(fmt::format("least squares: matrix entry ({}, {}) is not finite", i, j));
      a[i + j * M] = v;
    }
    for (std::size_t c = 0; c < K; ++c) {
      const double v = B[i * K + c];
      if (!std::isfinite(v))
        throw Error(fmt::format("least squares: right-hand side ({}, {}) is not finite", i, c));
      b[i + c * ldb] = v;
    }
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

}  // namespace kvcompact
