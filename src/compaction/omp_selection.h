// Key selection by orthogonal matching pursuit on the attention mass (Attention Matching,
// arXiv 2602.16284, "OMP" key selection).
#pragma once

#include <vector>

#include "compaction/head_compaction.h"
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

/// OMP order of the first `key_count` keys of a head (keys 0..key_count-1, e.g. the prefix before
/// a recent window): builds E_ij = exp(s q_i . k_j - row_max_i) [n, key_count] (s = 1/sqrt(d),
/// double) and calls omp_order(E, target, steps).
///   row_max: [n] (the shift of the logits, e.g. max over all T keys), target: [n] mass in the
///   same units. Memory: n * key_count doubles. Throws Error unless 0 <= steps <= key_count <= T,
///   on size mismatches or invalid input.
std::vector<int> omp_key_order(const HeadCompactionInput& in, const std::vector<double>& row_max,
                               const std::vector<double>& target, int key_count, int steps);

}  // namespace kvcompact
