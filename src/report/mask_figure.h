// The head-masking figure (issue 5): one panel per task family, score vs number of masked heads.
#pragma once

#include <string>

#include "studies/mask_eval.h"

namespace kvcompact {

/// One panel per family (up to 3 per row), x "# masked heads" (log2 axis over the K values),
/// y "score" from 0 to 1.1 x the largest value (shared by the panels): accuracy as it is, chrF divided by 100 (legend "chrF / 100"), COMET as
/// it is; one colour per metric, TopK solid with markers, RandomK dashed with a mean -/+ SEM band,
/// and the unmasked model's value as a thin dotted-looking flat line ("<metric>, no mask").
/// The "nll" metric (answer NLL) is left out. Throws Error when the result has no K values or no rows.
std::string mask_eval_figure(const MaskEvalResult& result);

}  // namespace kvcompact
