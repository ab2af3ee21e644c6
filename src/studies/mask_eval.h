// TopK vs RandomK head masking on task suites (issue 5): mask the K best-ranked heads, or K random
// heads, and measure accuracy and reference similarity (chrF; COMET through comet-score).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "metrics/comet_score.h"
#include "heads/head_intervention.h"
#include "heads/head_scores.h"
#include "metrics/similarity_score.h"
#include "tasks/task_suite.h"
#include "studies/unit_study.h"
#include "model/model.h"

namespace kvcompact {

/// Options of a masking study.
struct MaskEvalOptions {
  std::vector<int> ks;          ///< numbers of masked heads, each in [1, n_layers * n_heads]
  int random_seeds = 5;         ///< RandomK draws per K (the same draws serve every family)
  uint64_t seed = 0;            ///< base seed of the RandomK draws
  Ablation ablation = Ablation::Zero;
  double scale = kDefaultAblationScale;  ///< Ablation::Scale: the factor, in (0, 1]
  /// Rows each forward call masks; unset: Last for Ablation::Scale (the paper's), All otherwise.
  std::optional<MaskPositions> positions;
  const HeadMeans* means = nullptr;  ///< required for Ablation::Mean
  /// Where RandomK draws from: "all" (every query head) or "rest" (the heads outside the ranking's
  /// first K, as Cognitive Mirrors' ablation_topk.py; needs K <= heads - K).
  std::string random_from = "all";
  /// "gold": similarity to the task's reference answer; "model": to the unmasked model's answer.
  std::string reference = "gold";
  /// Metrics besides accuracy: any of "chrf", "comet", "nll", "bleu", "rouge1", "cosine",
  /// "cm_accuracy".
  std::vector<std::string> metrics = {"chrf"};
  CometOptions comet;
  SimilarityOptions similarity;  ///< the Python scorer of bleu, rouge1, cosine and cm_accuracy
  bool progress = true;         ///< one line per condition on stderr
  /// MaskPositions::Last leaves every prompt row but the last unmasked, so each item's prompt
  /// prefix is the same under every condition: it is prefilled once and its KV cache reused
  /// (up to this many bytes of caches, float32 keys and values; items past it are prefilled per
  /// condition). 0 turns the reuse off. The answers are those of one prefill of the whole prompt
  /// up to the last bits of the logits.
  std::size_t prefix_cache_bytes = std::size_t{4} << 30;
};

/// One output row: a metric's value for one family under one condition.
/// condition "none" (k = 0, nothing masked), "topk" (the first k heads of the ranking) or
/// "randomk" (mean and SEM over `draws` random sets of k heads). Metrics: "accuracy" (fraction
/// of items whose normalised answer equals the reference, 0..1; always against the task
/// reference; answer_type "recall" items count the fraction of their references found,
/// tasks/answer_scoring.h item_score), "chrf" (mean sentence-level chrF, 0..100, sacreBLEU
/// CHRF defaults), "comet" (mean comet-score segment score, model-dependent scale), "nll" (mean
/// teacher-forced NLL of the task's reference answer given the prompt, nats/token; lower is
/// better; measurable even where a small model never answers right), and Cognitive Mirrors'
/// metrics (metrics/similarity_score.h; they ignore `reference`): "bleu" (mean sentence BLEU
/// 0..1, HF evaluate / tensorflow-nmt, of the answer against the unmasked model's answer, so 1 for
/// "none" wherever that answer has >= 4 tokens), "rouge1" (mean ROUGE-1 F 0..1 against the gold
/// answer), "cosine" (mean all-MiniLM-L6-v2 embedding cosine against the gold answer) and
/// "cm_accuracy" (fraction of items with bleu > 0.8 or rouge1 > 0.6 or cosine > 0.6, 0..1:
/// cognitive_mirrors_correct).
struct MaskEvalRow {
  std::string family;
  int k = 0;
  std::string condition;
  std::string metric;
  double mean = 0;
  double sem = 0;  ///< across random draws (0 for none/topk)
  int draws = 1;
  int items = 0;   ///< items of the family
};

/// A whole study.
struct MaskEvalResult {
  std::string model;
  std::string model_fingerprint;
  std::string score_method;     ///< the ranking's method (head-scores file)
  std::string ablation;         ///< to_string(AblationSpec): "zero", "scale:0.0001", ...
  std::string mask_positions = "all";  ///< "all" | "last"
  std::string random_from = "all";     ///< "all" | "rest"
  std::string reference;        ///< "gold" | "model"
  std::vector<std::string> metrics;  ///< "accuracy" first
  std::vector<std::string> families; ///< in order of first appearance in the tasks
  std::vector<int> ks;
  int random_seeds = 0;
  int n_heads_total = 0;        ///< query heads of the model
  std::vector<MaskEvalRow> rows;
  /// The heads masked by TopK at the largest k, in ranking order (names "L<l>Q<h>").
  std::vector<std::string> topk_heads;
};

/// The families whose unmasked exact-match "accuracy" is 0: masking cannot show a drop there. (The
/// unmasked "cm_accuracy" is no guide: its BLEU compares the unmasked answer with itself, 1 for
/// answers of 4+ tokens.) In family order.
std::vector<std::string> zero_accuracy_families(const MaskEvalResult& result);

/// The random set of k query heads of draw `draw` (0-based): a Fisher-Yates shuffle of all heads
/// (layer-major order) less `exclude`, driven by std::mt19937_64 seeded from (seed, k, draw); the
/// first k, sorted. With no exclusions the draws are those of earlier versions. Throws Error when
/// k is negative or more than the heads left.
std::vector<QueryHeadId> random_head_set(const ModelConfig& config, int k, int draw, uint64_t seed,
                                         const std::vector<QueryHeadId>& exclude = {});

/// Runs the study: the unmasked model, then for each k the top-k heads of `scores` and
/// `random_seeds` random draws, every item answered by greedy generation (generate_answer with the
/// item's stop strings and token limit) under the intervention. With `out_dir` non-empty the study
/// runs as one shard into that folder (run_mask_eval_shard): a rerun of the same study reuses the
/// finished conditions. Throws Error for no items, a k outside [1, heads], random_seeds outside
/// [1, 1000] (when ks is not empty), an unknown metric, reference or random_from, random_from
/// "rest" with a k above heads - k, a scale outside (0, 1], scores of another model shape or
/// fingerprint, a folder of another study, as comet_score when "comet" is asked for and as
/// similarity_scores for bleu, rouge1, cosine and cm_accuracy (a missing Python, package or model
/// is found before any condition runs: the scorer is tried on one pair first).
MaskEvalResult run_mask_eval(const Model& model, const std::vector<TaskItem>& items,
                             const HeadScores& scores, const MaskEvalOptions& options,
                             const std::string& out_dir = "");

/// What one mask-eval shard did, and the study's result once every condition is finished.
struct MaskEvalShardRun {
  UnitShardRun run;
  std::string study;                    ///< study id
  int done = 0, units = 0;              ///< finished conditions / all conditions of the study
  std::optional<MaskEvalResult> result; ///< set when the study is complete
};

/// Runs shard `shard` (count 0: all) of the study's conditions (none, then per k: topk, the random
/// draws; one unit each, named by its label: none, topk_k4, randomk_k4_d0) into `out_dir` with
/// the shared unit-study runner (studies/unit_study.h). The study's settings (model, tasks,
/// ablation and means, mask positions, random_from, seed, ks, draws, metrics, reference, ranking,
/// embedding model) identify it; another
/// study's folder is refused. Throws as run_mask_eval.
MaskEvalShardRun run_mask_eval_shard(const Model& model, const std::vector<TaskItem>& items, const HeadScores& scores,
                                     const MaskEvalOptions& options, const std::string& out_dir,
                                     const ShardSpec& shard);

/// A mask-eval study folder merged.
struct MaskEvalMerge {
  std::string study;
  int units = 0;
  std::vector<std::string> missing;     ///< conditions without a unit file
  std::optional<MaskEvalResult> result; ///< set when complete (the metrics need every condition)
};

/// Reads a mask-eval study folder and, when every condition is finished, scores it as
/// run_mask_eval does (the tasks come from the manifests; COMET, when the study asks for it, runs
/// with `comet` and the study's model; the similarity scorer with `similarity`'s Python and the
/// study's embedding model). Throws Error as read_unit_study and for a manifest whose
/// tasks do not match their hash.
MaskEvalMerge merge_mask_eval(const std::string& dir, const CometOptions& comet = {},
                              const SimilarityOptions& similarity = {});

/// JSON form of a result (every field of MaskEvalResult; rows as objects).
nlohmann::json mask_eval_to_json(const MaskEvalResult& result);
/// Parses that JSON form; `source` names the file in errors.
MaskEvalResult mask_eval_from_json(const nlohmann::json& j, const std::string& source);
/// CSV: family,k,condition,metric,mean,sem,draws,items (one line per row).
std::string mask_eval_csv(const MaskEvalResult& result);

}  // namespace kvcompact
