// Orthogonal matching pursuit key selection (see omp_selection.h).
#include "compaction/omp_selection.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>
#include <optional>

#include <cblas.h>
#include <fmt/format.h>

#include "compaction/head_attention.h"
#include "compaction/least_squares.h"
#include "core/error.h"

namespace kvcompact {
namespace {

// Selected columns of the exp-score matrix E [n, T] with their Gram matrix G = E_S^T E_S [k, k]
// (row-major) and b = E_S^T z [k], grown one column at a time (O(n k) per column) so that the
// OMP refits never gather or multiply an [n, k] matrix. Shared by omp_order and omp_select.
struct SelectedColumns {
  std::vector<int> keys;                  // column indices of E, in pick order
  std::vector<std::vector<double>> cols;  // E[:, keys[c]], each [n]
  std::vector<double> G, b;

  std::size_t size() const { return keys.size(); }

  void add(const double* E, std::size_t n, std::size_t T, int j, const double* z) {
    const std::size_t k = keys.size(), m = k + 1;
    std::vector<double> col(n);
    for (std::size_t i = 0; i < n; ++i) col[i] = E[i * T + static_cast<std::size_t>(j)];
    std::vector<double> g(m * m, 0.0);
    for (std::size_t a = 0; a < k; ++a)
      for (std::size_t c = 0; c < k; ++c) g[a * m + c] = G[a * k + c];
    for (std::size_t a = 0; a < k; ++a)
      g[a * m + k] = g[k * m + a] = std::inner_product(cols[a].begin(), cols[a].end(), col.begin(), 0.0);
    g[k * m + k] = std::inner_product(col.begin(), col.end(), col.begin(), 0.0);
    G.swap(g);
    b.push_back(std::inner_product(col.begin(), col.end(), z, 0.0));
    cols.push_back(std::move(col));
    keys.push_back(j);
  }

  // Keeps the columns at `positions` (ascending indices into keys), dropping the rest.
  void keep_only(const std::vector<std::size_t>& positions) {
    const std::size_t k = keys.size(), m = positions.size();
    std::vector<double> g(m * m), nb(m);
    std::vector<int> nkeys(m);
    std::vector<std::vector<double>> ncols(m);
    for (std::size_t a = 0; a < m; ++a) {
      for (std::size_t c = 0; c < m; ++c) g[a * m + c] = G[positions[a] * k + positions[c]];
      nb[a] = b[positions[a]];
      nkeys[a] = keys[positions[a]];
      ncols[a] = std::move(cols[positions[a]]);
    }
    G.swap(g), b.swap(nb), keys.swap(nkeys), cols.swap(ncols);
  }
};

}  // namespace

OmpResult omp_order(const double* E, int n, int T, const double* z, int steps,
                    const ActiveSetNnlsOptions& nnls) {
  if (n < 0 || T < 0) throw Error(fmt::format("omp: negative size ({} x {})", n, T));
  if (steps < 0 || steps > T)
    throw Error(fmt::format("omp: cannot select {} of {} keys", steps, T));
  const std::size_t N = static_cast<std::size_t>(n), TT = static_cast<std::size_t>(T);
  for (std::size_t i = 0; i < N * TT; ++i)
    if (!std::isfinite(E[i])) throw Error(fmt::format("omp: exp-score entry {} is not finite", i));
  for (std::size_t i = 0; i < N; ++i)
    if (!std::isfinite(z[i])) throw Error(fmt::format("omp: target entry {} is not finite", i));

  OmpResult res;
  const std::size_t K = static_cast<std::size_t>(steps);
  std::vector<char> chosen(TT, 0);
  std::vector<double> r(z, z + N), corr(TT, 0.0), w;
  SelectedColumns S;
  for (std::size_t k = 0; k < K; ++k) {
    // corr = E^T r
    if (n > 0)
      cblas_dgemv(CblasRowMajor, CblasTrans, n, T, 1.0, E, T, r.data(), 1, 0.0, corr.data(), 1);
    std::size_t j = TT;
    for (std::size_t c = 0; c < TT; ++c)
      if (!chosen[c] && (j == TT || corr[c] > corr[j])) j = c;
    chosen[j] = 1;
    S.add(E, N, TT, static_cast<int>(j), z);
    w.push_back(0.0);
    w = nnls_active_set_gram(S.G.data(), S.b.data(), static_cast<int>(S.size()), w, nnls);
    // r = z - E_S w
    std::copy(z, z + N, r.begin());
    for (std::size_t a = 0; a < S.size(); ++a)
      if (w[a] != 0.0)
        for (std::size_t i = 0; i < N; ++i) r[i] -= w[a] * S.cols[a][i];
  }
  res.order = S.keys;
  res.weights = w;
  return res;
}

std::vector<double> omp_exp_scores(const HeadCompactionInput& in, const std::vector<double>& row_max, int key_count) {
  validate_head_input(in, "omp key selection");
  if (key_count < 0 || key_count > in.T)
    throw Error(fmt::format("omp key selection: {} keys of {} asked", key_count, in.T));
  const std::size_t N = static_cast<std::size_t>(in.n_queries), Kc = static_cast<std::size_t>(key_count);
  if (row_max.size() != N)
    throw Error(fmt::format("omp key selection: row max has {} entries, {} queries", row_max.size(), N));
  std::vector<int> keys(Kc);
  std::iota(keys.begin(), keys.end(), 0);
  std::vector<double> E = selected_logits(in, keys);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < Kc; ++j) E[i * Kc + j] = std::exp(E[i * Kc + j] - row_max[i]);
  return E;
}

std::vector<int> omp_key_order(const HeadCompactionInput& in, const std::vector<double>& row_max,
                               const std::vector<double>& target, int key_count, int steps) {
  validate_head_input(in, "omp key selection");
  if (key_count < 0 || key_count > in.T || steps < 0 || steps > key_count)
    throw Error(fmt::format("omp key selection: cannot select {} of the first {} of {} keys", steps,
                            key_count, in.T));
  const std::size_t N = static_cast<std::size_t>(in.n_queries);
  if (row_max.size() != N || target.size() != N)
    throw Error(fmt::format("omp key selection: row max ({}) and target ({}) must have one entry per "
                            "query ({})",
                            row_max.size(), target.size(), N));
  if (steps == 0) return {};
  if (N == 0) throw Error("omp key selection: no reference queries");
  const std::vector<double> E = omp_exp_scores(in, row_max, key_count);
  return omp_order(E.data(), in.n_queries, key_count, target.data(), steps).order;
}

std::vector<int> omp_select(const double* E, int n, int T, const double* z, int t, const OmpOptions& options) {
  if (n < 0 || T < 0) throw Error(fmt::format("omp: negative size ({} x {})", n, T));
  if (t < 0 || t > T) throw Error(fmt::format("omp: cannot select {} of {} keys", t, T));
  const std::size_t N = static_cast<std::size_t>(n), TT = static_cast<std::size_t>(T);
  for (std::size_t i = 0; i < N * TT; ++i)
    if (!std::isfinite(E[i])) throw Error(fmt::format("omp: exp-score entry {} is not finite", i));
  for (std::size_t i = 0; i < N; ++i)
    if (!std::isfinite(z[i])) throw Error(fmt::format("omp: target entry {} is not finite", i));
  if (t == 0) return {};
  const double w_floor = std::exp(options.nnls.lo);
  SelectedColumns S;
  std::vector<double> w, current(N, 0.0), r(N), corr(TT);
  std::vector<char> taken(TT, 0), excluded(TT, 0);
  auto refit = [&] {
    const int k = static_cast<int>(S.size());
    const std::size_t K = S.size();
    if (options.refit == OmpRefit::Exact) {
      w = nnls_active_set_gram(S.G.data(), S.b.data(), k, std::vector<double>(K, 1.0));
      return;
    }
    std::optional<std::vector<double>> start = n >= k ? solve_normal_equations(S.G.data(), k, S.b.data(), 1) : std::nullopt;
    if (!start) {  // ill-conditioned: least squares on the gathered columns
      std::vector<double> M(N * K);
      for (std::size_t i = 0; i < N; ++i)
        for (std::size_t c = 0; c < K; ++c) M[i * K + c] = S.cols[c][i];
      start = solve_least_squares(M.data(), n, k, z, 1, options.nnls.rcond);
    }
    w = bounded_nnls_gram(S.G.data(), S.b.data(), k, std::move(*start), options.nnls);
  };
  auto update_current = [&] {  // current = E_S w
    std::fill(current.begin(), current.end(), 0.0);
    for (std::size_t c = 0; c < S.size(); ++c)
      if (w[c] != 0.0)
        for (std::size_t i = 0; i < N; ++i) current[i] += w[c] * S.cols[c][i];
  };
  bool have_previous = false;
  int iteration = 0, rounds = 0;
  while (true) {
    if (static_cast<int>(S.size()) < t) {
      for (std::size_t i = 0; i < N; ++i) r[i] = z[i] - current[i];
      if (n > 0) cblas_dgemv(CblasRowMajor, CblasTrans, n, T, 1.0, E, T, r.data(), 1, 0.0, corr.data(), 1);
      const int have = static_cast<int>(S.size());
      int per_step = 1, interval = 1;
      if (options.progressive) {
        if (have >= 1500) per_step = 4, interval = 2;
        else if (have >= 300) per_step = 2, interval = 2;
      }
      std::vector<int> candidates;
      for (std::size_t c = 0; c < TT; ++c)
        if (!taken[c] && !excluded[c]) candidates.push_back(static_cast<int>(c));
      const int pick = std::min({per_step, static_cast<int>(candidates.size()), t - have});
      if (pick == 0) break;  // keys ran out (drops excluded them)
      std::partial_sort(candidates.begin(), candidates.begin() + pick, candidates.end(), [&](int a, int b) {
        return corr[static_cast<std::size_t>(a)] > corr[static_cast<std::size_t>(b)] ||
               (corr[static_cast<std::size_t>(a)] == corr[static_cast<std::size_t>(b)] && a < b);
      });
      for (int q = 0; q < pick; ++q) {
        const int j = candidates[static_cast<std::size_t>(q)];
        S.add(E, N, TT, j, z);
        taken[static_cast<std::size_t>(j)] = 1;
      }
      if (!have_previous || iteration % interval == 0) {
        refit();
      } else {  // the paper's lazy step: previous weights, e^lo for the new keys
        w.resize(S.size(), w_floor);
      }
      have_previous = true;
      update_current();
      ++iteration;
    } else if (options.drop_below) {
      if (++rounds > 3) break;
      refit();
      std::vector<std::size_t> keep;
      for (std::size_t c = 0; c < S.size(); ++c) {
        if (std::log(w[c]) < *options.drop_below) {
          excluded[static_cast<std::size_t>(S.keys[c])] = 1;  // never a candidate again
        } else {
          keep.push_back(c);
        }
      }
      if (keep.size() == S.size()) break;  // stable
      S.keep_only(keep);
      if (S.size() == 0) {
        w.clear();
        std::fill(current.begin(), current.end(), 0.0);
      } else {
        refit();
        update_current();
      }
      have_previous = false;
      ++iteration;
    } else {
      break;
    }
  }
  std::vector<int> sel = S.keys;
  std::sort(sel.begin(), sel.end());
  return sel;
}

}  // namespace kvcompact
