// Key selection by orthogonal matching pursuit on the attention mass (Attention Matching,
// arXiv 2602.16284, "OMP" key selection).
#pragma once

#include <optional>
#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/nnls.h"
#include "compaction/nnls_active_set.h"

namespace kvcompact {

/// Result of omp_order: the selection order and the final fit.
struct OmpResult {
  std::vector<int> order;       ///< [steps] column indices in the order OMP picked them
  std::vector<double> weights;  ///< [steps] NNLS weights of `order` after the last step (>= 0)
};

/// Greedy orthogonal matching pursuit with non-negative refits on the columns of the exp-score
/// matrix E [n, T] (E_ij = exp(S_ij - m_i) >= 0) against the mass target z [n] (Z_i):
///   r = z;  repeat `steps` times:
///     j* = argmax_{j not selected} E[:, j]^T r   (raw inner product, ties -> lowest index; when no
///          correlation is positive the largest one is still taken, so the order always has
///          `steps` entries and every prefix of it is a selection)
///     S <- S + {j*};  w_S = argmin_{w >= 0} ||E_S w - z||  (exact Lawson-Hanson NNLS, as the
///          paper refits with NNLS; warm-started from the previous w);  r = z - E_S w_S.
/// The order's first t entries are OMP's selection for budget t, for every t <= steps.
///   E: [n, T] row-major, z: [n]. Cost O(steps * n * T) plus the NNLS refits on the Gram
/// matrix of the selected columns (built incrementally). Throws Error unless 0 <= steps <= T,
/// on negative sizes, or on non-finite input.
OmpResult omp_order(const double* E, int n, int T, const double* z, int steps,
                    const ActiveSetNnlsOptions& nnls = {});

/// How the OMP loop refits the weights after each pick.
enum class OmpRefit {
  Exact,    ///< exact Lawson-Hanson NNLS (omp_order's refit)
  Bounded,  ///< bounded_nnls with the AM beta options (lstsq start clipped to [e^lo, e^hi], then
            ///< `iters` projected-gradient steps): the paper's OMPCompaction._nnls_pg
};

/// Options of the paper's OMP loop (adamzweiger/compaction, compaction/algorithms/omp.py,
/// OMPCompaction._select_keys_omp). Its best configuration (evaluation/configs/algorithms/
/// ablation.py) is refit = Bounded with nnls iters 0, lo = log(1e-12), hi = 7, progressive
/// schedule, drop_below = -7.
struct OmpOptions {
  OmpRefit refit = OmpRefit::Exact;
  NnlsOptions nnls;          ///< Bounded refit: bounds [lo, hi] in nats and iters
  bool progressive = false;  ///< DEFAULT_PROGRESSIVE_SCHEDULE: below 300 selected keys 1 key per
                             ///< step and a refit every step; below 1500, 2 keys and a refit every
                             ///< 2nd step; then 4 keys, every 2nd (skipped refits keep the previous
                             ///< weights and give new keys e^lo)
  std::optional<double> drop_below;  ///< after t keys: drop keys with log-weight below this (nats),
                                     ///< exclude them for good and pick replacements (<= 3 rounds)
  bool operator==(const OmpOptions&) const = default;
};

/// The paper's OMP loop for exactly t keys on E [n, T] (E_ij = exp(S_ij - m_i)) against z [n]:
/// residual r = z - E_S w; pick the k keys (schedule) of largest E[:, j]^T r among keys neither
/// selected nor excluded (ties: lower index first); refit w on E_S (options.refit, on the refit
/// steps of the schedule); with drop_below, once t keys are selected, refit and drop the keys whose
/// log w is below it, then continue picking (at most 3 such rounds). Returns the selected keys
/// sorted ascending: t of them, or fewer when keys run out. Unlike omp_order a smaller t is not a
/// prefix of a larger one. Throws Error unless 0 <= t <= T, on negative sizes or non-finite input.
std::vector<int> omp_select(const double* E, int n, int T, const double* z, int t, const OmpOptions& options);

/// OMP order of the first `key_count` keys of a head (keys 0..key_count-1, e.g. the prefix before
/// a recent window): builds E_ij = exp(s q_i . k_j - row_max_i) [n, key_count] (s = 1/sqrt(d),
/// double) and calls omp_order(E, target, steps).
///   row_max: [n] (the shift of the logits, e.g. max over all T keys), target: [n] mass in the
///   same units. Memory: n * key_count doubles. Throws Error unless 0 <= steps <= key_count <= T,
///   on size mismatches or invalid input.
std::vector<int> omp_key_order(const HeadCompactionInput& in, const std::vector<double>& row_max,
                               const std::vector<double>& target, int key_count, int steps);

/// exp-scores of the first `key_count` keys: E_ij = exp(s q_i . k_j - row_max_i) [n, key_count]
/// row-major double, as omp_key_order builds them. Throws as omp_key_order.
std::vector<double> omp_exp_scores(const HeadCompactionInput& in, const std::vector<double>& row_max, int key_count);

}  // namespace kvcompact
