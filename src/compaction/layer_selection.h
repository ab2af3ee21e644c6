// Layer-scoped selection: methods whose choice for one KV head depends on the layer's other KV
// heads (TOVA's layer-mean ranking, AdaKV's layer budget). compact_cache scores every head, then
// selects layer by layer with these.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/method_spec.h"

namespace kvcompact {

/// One head's scores [T] for a layer-scoped method: tova_head_scores (tova) or snapkv_press_scores
/// (adakv). Throws Error for other families or on bad input.
std::vector<double> layer_scoped_head_scores(const MethodSpec& spec, const HeadCompactionInput& in);

/// The selected indices of each KV head of one layer (sorted), given every head's scores [H][T_h]
/// and budgets [H]: tova keeps the top b_h entries of the layer mean of the scores in every head;
/// adakv runs adakv_select with spec.adakv.alpha. Throws Error for other families or bad budgets.
std::vector<std::vector<int>> layer_scoped_select(const MethodSpec& spec,
                                                  const std::vector<std::vector<double>>& head_scores,
                                                  const std::vector<int>& budgets);

}  // namespace kvcompact
