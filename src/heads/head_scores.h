// Head scores as ranked lists: retrieval heads (Wu et al. 2024, arXiv 2404.15574), attention
// entropy, and influence (area under a KV head's influence curve, arXiv 2602.16284).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "heads/head_set.h"
#include "budgets/influence_curves.h"
#include "model/model.h"

namespace kvcompact {

/// One scored query head.
struct HeadScore {
  QueryHeadId head;
  double score = 0;
};

/// A ranking of every query head of a model, best (first to mask) first.
struct HeadScores {
  std::string method;             ///< "retrieval" | "entropy" | "influence" | "patching"
  std::string model_fingerprint;  ///< fingerprint_hex of the model ("" when not known)
  std::string order;              ///< how the list is ordered, in words
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int items = 0;                  ///< probes / documents / documents-of-curves the scores average
  std::vector<HeadScore> ranked;  ///< every query head exactly once, ranking order
};

/// A retrieval probe: the model is teacher-forced to copy `needle`, which occurs verbatim in
/// `prompt`, right after the prompt.
struct RetrievalProbe {
  std::string prompt;
  std::string needle;
};

/// Per-probe result of retrieval scoring.
struct RetrievalProbeResult {
  int needle_tokens = 0;         ///< answer tokens scored (0: probe skipped)
  int needle_span_tokens = 0;    ///< context tokens overlapping the needle's occurrence
  std::vector<double> hit_rate;  ///< [n_layers * n_heads] hits / needle tokens
};

/// Retrieval score of every query head on one probe, following Wu et al.'s detection: the
/// sequence prompt + needle (a space inserted when neither side has one) is run teacher-forced;
/// at each step that predicts needle token k, a head scores a hit when its highest attention
/// weight (over all visible entries) falls on a context position inside the needle's first
/// occurrence in the prompt that holds the same token id as needle token k. Unlike Wu et al., the
/// copied tokens are the reference needle (teacher forcing), not the model's own greedy output, so
/// that models that copy imperfectly are still scored on the copy they should make.
/// A probe whose needle is not found in the decoded prompt gets needle_tokens = 0.
RetrievalProbeResult retrieval_probe(const Model& model, const RetrievalProbe& probe);

/// Retrieval scores: hit rates averaged over the probes that were scored (needle found), ranked
/// highest first (ties by layer, head). Throws Error when no probe could be scored.
/// `progress(done, total)` is called after each probe when set.
HeadScores retrieval_scores(const Model& model, const std::vector<RetrievalProbe>& probes,
                            const std::function<void(int, int)>& progress = {});

/// Mean attention entropy (nats) of each query head over every query position p >= 1 of the
/// documents (token ids, BOS first; the distribution over the p + 1 visible entries), ranked
/// lowest first (most focused heads first; ties by layer, head). Throws Error when no document
/// has 2 or more tokens.
HeadScores entropy_scores(const Model& model, const std::vector<std::vector<int>>& documents,
                          const std::function<void(int, int)>& progress = {});

/// Influence scores from an influence sweep: a KV head's score is minus the area under its mean
/// curve (trapezoids over its ratios, nats/token x ratio), i.e. how much log-perplexity falls when
/// that head alone gets more keys; every query head of the group gets its KV head's score.
/// Ranked highest first (ties by layer, head). Heads not swept are an Error (named), as are
/// curves whose layer/KV-head counts differ from the config.
HeadScores influence_scores(const InfluenceCurves& curves, const ModelConfig& config,
                            const std::string& model_fingerprint);

/// A ranking from per-head scores: per_head [n_layers * n_heads] (layer-major, query heads),
/// sorted highest first when `descending` (else lowest first), ties in layer, head order; the
/// other fields as given (n_kv_heads from config). Throws Error when per_head has another size.
HeadScores make_head_scores(const ModelConfig& config, const std::string& model_fingerprint,
                            const std::string& method, const std::string& order, int items,
                            const std::vector<double>& per_head, bool descending);

/// JSON: {"method", "model_fingerprint", "order", "n_layers", "n_heads", "n_kv_heads", "items",
/// "heads": [{"rank", "name", "layer", "head", "kv_head", "score"}]}; written atomically.
void write_head_scores(const std::string& path, const HeadScores& scores);

/// Reads a head-scores file and validates it: every head (whole-number layer and head, in range,
/// its "name" if present equal to "L<l>Q<h>") at most once, finite scores; the ranking is the
/// entries' "rank" fields (a permutation of 1..N) when present, else the array order; `config` (when given) must match n_layers / n_heads. The list must hold
/// every head of the model. Throws Error naming the file and entry.
HeadScores read_head_scores(const std::string& path, const ModelConfig* config = nullptr);

}  // namespace kvcompact
