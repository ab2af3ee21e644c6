// Lawson-Hanson active-set NNLS on the normal equations (see nnls_active_set.h).
#include "compaction/nnls_active_set.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <cblas.h>
#include <fmt/format.h>
#include <lapacke.h>

#include "compaction/least_squares.h"
#include "core/error.h"

namespace kvcompact {
namespace {

void check_finite(const double* p, std::size_t count, const char* what) {
  for (std::size_t i = 0; i < count; ++i)
    if (!std::isfinite(p[i])) throw Error(fmt::format("exact nnls: {} entry {} is not finite", what, i));
}

// s_P = argmin over the passive set: G_PP s = b_P (Cholesky, else min-norm least squares).
std::vector<double> solve_passive(const double* G, const double* b, std::size_t C,
                                  const std::vector<int>& P) {
  const std::size_t k = P.size();
  std::vector<double> A(k * k), x(k);
  for (std::size_t r = 0; r < k; ++r) {
    x[r] = b[P[r]];
    for (std::size_t c = 0; c < k; ++c) A[r * k + c] = G[static_cast<std::size_t>(P[r]) * C + P[c]];
  }
  std::vector<double> chol = A, rhs = x;
  const lapack_int info = LAPACKE_dposv(LAPACK_ROW_MAJOR, 'U', static_cast<lapack_int>(k), 1,
                                        chol.data(), static_cast<lapack_int>(k), rhs.data(), 1);
  bool ok = info == 0;
  if (ok)
    for (double v : rhs) ok = ok && std::isfinite(v);
  if (ok) {
    // Cholesky of a nearly singular G_PP can lose all accuracy; accept it only when the residual
    // of the normal equations is small, else use the SVD-based min-norm solution.
    double res = 0.0, scale = 0.0;
    for (std::size_t r = 0; r < k; ++r) {
      double acc = -x[r];
      for (std::size_t c = 0; c < k; ++c) acc += A[r * k + c] * rhs[c];
      res = std::max(res, std::fabs(acc));
      scale = std::max(scale, std::fabs(x[r]));
    }
    if (res <= 1e-8 * std::max(scale, 1e-300)) return rhs;
  }
  return solve_least_squares(A.data(), static_cast<int>(k), static_cast<int>(k), x.data(), 1, 1e-13);
}

}  // namespace

std::vector<double> nnls_active_set_gram(const double* G, const double* b, int cols,
                                         const std::vector<double>& start,
                                         const ActiveSetNnlsOptions& options) {
  if (cols < 0) throw Error(fmt::format("exact nnls: negative number of columns {}", cols));
  if (!start.empty() && start.size() != static_cast<std::size_t>(cols))
    throw Error(fmt::format("exact nnls: warm start has {} entries for {} columns", start.size(), cols));
  if (!(options.tol >= 0.0) || !std::isfinite(options.tol))
    throw Error(fmt::format("exact nnls: tolerance {} is not a finite non-negative number", options.tol));
  if (options.max_iter < 0)
    throw Error(fmt::format("exact nnls: max_iter {} is negative", options.max_iter));
  const std::size_t C = static_cast<std::size_t>(cols);
  check_finite(G, C * C, "Gram matrix");
  check_finite(b, C, "right-hand side");
  check_finite(start.data(), start.size(), "warm start");
  std::vector<double> w(C, 0.0);
  if (C == 0) return w;

  double scale = 0.0;
  for (std::size_t j = 0; j < C; ++j) scale = std::max({scale, std::fabs(b[j]), G[j * C + j]});
  const double tol = options.tol * std::max(scale, 1e-300);
  const int max_iter = options.max_iter > 0 ? options.max_iter : 3 * cols + 30;

  std::vector<char> passive(C, 0), skip(C, 0);
  for (std::size_t j = 0; j < start.size(); ++j)
    if (start[j] > 0.0) {
      w[j] = start[j];
      passive[j] = 1;
    }
  auto passive_list = [&] {
    std::vector<int> P;
    for (std::size_t j = 0; j < C; ++j)
      if (passive[j]) P.push_back(static_cast<int>(j));
    return P;
  };
  // Inner loop of Lawson-Hanson: from a feasible w with w_P > 0, move towards the unconstrained
  // minimiser s on P, dropping the passive columns that reach zero, until s_P > 0.
  auto inner = [&](std::vector<int> P, std::vector<double> s) {
    for (;;) {
      double alpha = 1.0;
      bool feasible = true;
      for (std::size_t r = 0; r < P.size(); ++r)
        if (s[r] <= 0.0) {
          feasible = false;
          const double wj = w[P[r]];
          alpha = std::min(alpha, wj / (wj - s[r]));
        }
      if (feasible) {
        for (std::size_t r = 0; r < P.size(); ++r) w[P[r]] = s[r];
        return;
      }
      bool dropped = false;
      for (std::size_t r = 0; r < P.size(); ++r) {
        double& wj = w[P[r]];
        wj += alpha * (s[r] - wj);
        // The blocking column(s) land on zero up to rounding.
        if (wj <= 1e-15 * std::max(1.0, std::fabs(s[r])) || (s[r] <= 0.0 && wj <= 0.0)) {
          wj = 0.0;
          passive[P[r]] = 0;
          dropped = true;
        }
      }
      if (!dropped) {  // rounding kept the blocker positive: drop the one that bound alpha
        std::size_t arg = 0;
        double best = 2.0;
        for (std::size_t r = 0; r < P.size(); ++r)
          if (s[r] <= 0.0 && w[P[r]] / std::max(w[P[r]] - s[r], 1e-300) < best) {
            best = w[P[r]] / std::max(w[P[r]] - s[r], 1e-300);
            arg = r;
          }
        w[P[arg]] = 0.0;
        passive[P[arg]] = 0;
      }
      P = passive_list();
      if (P.empty()) return;
      s = solve_passive(G, b, C, P);
    }
  };

  {
    std::vector<int> P = passive_list();
    if (!P.empty()) inner(P, solve_passive(G, b, C, P));
  }
  std::vector<double> dual(C);
  for (int iter = 0; iter < max_iter; ++iter) {
    // dual = b - G w (the negative gradient).
    std::copy(b, b + C, dual.begin());
    cblas_dgemv(CblasRowMajor, CblasNoTrans, cols, cols, -1.0, G, cols, w.data(), 1, 1.0, dual.data(), 1);
    int j = -1;
    double best = tol;
    for (std::size_t c = 0; c < C; ++c)
      if (!passive[c] && !skip[c] && dual[c] > best) {
        best = dual[c];
        j = static_cast<int>(c);
      }
    if (j < 0) break;  // KKT holds: done
    passive[static_cast<std::size_t>(j)] = 1;
    const std::vector<int> P = passive_list();
    const std::vector<double> s = solve_passive(G, b, C, P);
    const std::size_t rj = static_cast<std::size_t>(std::find(P.begin(), P.end(), j) - P.begin());
    if (!(s[rj] > 0.0)) {
      // Degenerate (the entering column cannot take a positive weight numerically): exclude it
      // until the iterate changes, as Lawson-Hanson's safeguard does.
      passive[static_cast<std::size_t>(j)] = 0;
      skip[static_cast<std::size_t>(j)] = 1;
      continue;
    }
    std::fill(skip.begin(), skip.end(), 0);
    inner(P, s);
  }
  return w;
}

std::vector<double> nnls_active_set(const double* M, int rows, int cols, const double* z,
                                    const ActiveSetNnlsOptions& options) {
  if (rows < 0 || cols < 0)
    throw Error(fmt::format("exact nnls: negative size ({} x {})", rows, cols));
  const std::size_t R = static_cast<std::size_t>(rows), C = static_cast<std::size_t>(cols);
  check_finite(M, R * C, "matrix");
  check_finite(z, R, "target");
  const std::vector<double> G = gram_matrix(M, rows, cols);
  std::vector<double> b(C, 0.0);
  if (rows > 0 && cols > 0) cblas_dgemv(CblasRowMajor, CblasTrans, rows, cols, 1.0, M, cols, z, 1, 0.0, b.data(), 1);
  return nnls_active_set_gram(G.data(), b.data(), cols, std::vector<double>(C, 1.0), options);
}

}  // namespace kvcompact
