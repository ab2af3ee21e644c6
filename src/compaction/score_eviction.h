// Score-based eviction (kvpress's ScorerPress contract): a method scores every context entry of a
// head, and the t highest-scoring entries are kept unchanged (beta 0, original values).
#pragma once

#include <vector>

#include "compaction/head_compaction.h"

namespace kvcompact {

/// Keeps the t entries with the highest scores [T] (ties: lower index), in context order, with
/// their original keys and values. Throws Error unless scores.size() == T and 0 <= t <= T, or
/// when a score is NaN.
CompactedHead compact_top_scores(const HeadCompactionInput& in, const std::vector<double>& scores, int t);

/// The group mean of the causal softmax attention that the context query at position `pos`
/// (every query head of the group) gives keys 0..pos: [pos + 1] (double precision).
/// Needs in.context_queries; throws Error when missing or pos is outside [0, T).
std::vector<double> position_attention(const HeadCompactionInput& in, int pos);

}  // namespace kvcompact
