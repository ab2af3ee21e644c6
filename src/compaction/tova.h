// TOVA (Oren et al. 2024, "Transformers are Multi-State RNNs", arXiv 2401.06104), as kvpress's
// TOVAPress: keep the keys the last context query attends most, averaged over all query heads of
// the layer (one ranking shared by the layer's KV heads); the last key is always kept.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"

namespace kvcompact {

/// One KV head's share of the TOVA scores [T]: the group mean of the last context query's
/// attention on keys 0..T-2, and max + 1 for key T-1 (always kept). Needs in.context_queries;
/// throws Error when missing or on bad input.
std::vector<double> tova_head_scores(const HeadCompactionInput& in);

/// The layer's scores [T]: the mean over its KV heads of tova_head_scores (equal group sizes make
/// it the mean over every query head, as kvpress). Throws Error when the heads' lengths differ.
std::vector<double> tova_layer_scores(const std::vector<std::vector<double>>& head_scores);

}  // namespace kvcompact
