// A probe-free head score by activation patching: how much the gold answer's teacher-forced
// log-probability drops when one query head alone is masked.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heads/head_intervention.h"
#include "heads/head_scores.h"
#include "model/model.h"

namespace kvcompact {

/// One scored item: a prompt and its gold answer as one token sequence (encode_prompt_answer of
/// tasks/answer_generation.h): ids[0 .. prompt_tokens) the prompt (BOS first), the rest the
/// answer.
struct PatchingProbe {
  std::vector<int> ids;
  int prompt_tokens = 0;
};

/// How each head is masked.
struct PatchingOptions {
  Ablation ablation = Ablation::Scale;  ///< Zero, Uniform or Scale (Mean is refused)
  double scale = kDefaultAblationScale; ///< Ablation::Scale: the factor, in (0, 1]
  /// Last: the rows from the prompt's last token on (the answer's predictions), as mask-eval's
  /// `last` masks a generation; the prompt but its last token is prefilled once per item and its
  /// cache reused (KVCache::mark/rollback), so a head costs one forward of 1 + answer tokens.
  /// All: every row, one forward of the whole sequence per head.
  MaskPositions positions = MaskPositions::Last;
};

/// Per-item result: total answer NLL (nats, summed over the answer tokens) unmasked and with
/// each query head masked.
struct PatchingProbeResult {
  int answer_tokens = 0;           ///< 0: the item was skipped (no answer or prompt token)
  double base_nll = 0;             ///< nats, unmasked
  std::vector<double> masked_nll;  ///< [n_layers * n_heads] nats, layer-major
};

/// Scores one item (see patching_scores). Throws Error for ids outside the vocabulary, a
/// sequence past max_seq_len, Ablation::Mean or a scale outside (0, 1].
PatchingProbeResult patching_probe(const Model& model, const PatchingProbe& probe, const PatchingOptions& options);

/// Patching scores: a head's score is the mean over the scored items of masked_nll - base_nll,
/// i.e. the drop in the gold answer's total teacher-forced log-probability (nats per item) when
/// that head alone is masked; ranked highest first (ties by layer, head); method "patching".
/// Items with no answer token (or no prompt token) are skipped; none left is an Error.
/// `progress(done, total)` is called after each item when set.
HeadScores patching_scores(const Model& model, const std::vector<PatchingProbe>& probes,
                           const PatchingOptions& options, const std::function<void(int, int)>& progress = {});

}  // namespace kvcompact
