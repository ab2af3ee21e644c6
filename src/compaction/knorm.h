// Knorm (Devoto et al. 2024, "A simple and effective L2 norm-based strategy for KV cache
// compression", arXiv 2406.11430), as kvpress's KnormPress: keep the keys of smallest L2 norm.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"

namespace kvcompact {

/// Knorm scores [T]: -||k_j||_2 (RoPE keeps the norm, so keys after RoPE give the same scores).
/// Throws Error on bad input (validate_head_input).
std::vector<double> knorm_scores(const HeadCompactionInput& in);

/// Keeps the t keys of smallest norm (compact_top_scores of knorm_scores). Throws Error unless 0 <= t <= T.
CompactedHead compact_knorm(const HeadCompactionInput& in, int t);

}  // namespace kvcompact
