// Baseline per-head compactions (no fit: beta = 0, C2 = original values of the kept keys), used to
// judge Attention Matching (arXiv 2602.16284).
#pragma once

#include <cstdint>
#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/key_selection.h"

namespace kvcompact {

/// A head made of the given context entries unchanged: C1 = K[sel], beta = 0, C2 = V[sel]
/// ([t, head_dim] each). `selected` must be distinct, sorted and in [0, T); throws Error otherwise.
CompactedHead head_from_selection(const HeadCompactionInput& in, const std::vector<int>& selected);

/// t distinct indices drawn uniformly from [0, T) with std::mt19937_64(seed) (partial
/// Fisher-Yates, unbiased bounded draws by rejection), returned in context order.
/// Throws Error unless 0 <= t <= T.
std::vector<int> random_indices(int T, int t, std::uint64_t seed);

/// `random` baseline: random_indices(T, t, seed), original keys and values. Validates the input
/// (NaN/Inf, head_dim <= 0, T == 0 with t > 0) and throws Error.
CompactedHead compact_random(const HeadCompactionInput& in, int t, std::uint64_t seed);

/// `recent` baseline: the last t entries T-t .. T-1, original keys and values. Throws as compact_random.
CompactedHead compact_recent(const HeadCompactionInput& in, int t);

}  // namespace kvcompact
