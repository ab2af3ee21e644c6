// ObservedAttention (kvpress's ObservedAttentionPress; H2O's accumulated attention, arXiv
// 2306.14048, normalised by how many queries could attend each key).
#pragma once

#include <vector>

#include "compaction/head_compaction.h"

namespace kvcompact {

/// Scores [T]: score_j = (1 / (T - j)) * mean over the group's query heads of sum_{i >= j} A_(i,h),j,
/// the causal softmax attention of every context query (h2o_scores / group_size / (T - j)).
/// Needs in.context_queries; throws Error when missing or on bad input.
std::vector<double> observed_attention_scores(const HeadCompactionInput& in);

/// Keeps the t entries with the highest observed_attention_scores. Throws Error unless 0 <= t <= T.
CompactedHead compact_observed_attention(const HeadCompactionInput& in, int t);

}  // namespace kvcompact
