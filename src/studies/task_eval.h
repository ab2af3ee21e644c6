// task-eval (issue 14): generation accuracy of compacted caches on task files whose items mark a
// context span (RULER tasks, tasks/ruler_tasks.h). Per item, the context (BOS + item.context)
// is prefilled once and compacted by each method at each ratio; the question (the rest of the
// prompt, encoded without BOS) is fed verbatim after the cache and the answer generated greedily,
// then scored with item_score (tasks/answer_scoring.h). The uncompacted cache gives the "full"
// row, computed once per item whatever the methods.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tasks/task_suite.h"
#include "studies/unit_study.h"
#include "compaction/compact_cache.h"
#include "core/kv_cache.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {

/// One task file as task-eval reads it.
struct TaskEvalFile {
  std::string path;              ///< as given (error messages, the per-item detail)
  std::vector<TaskItem> items;   ///< after the --n limit
};

/// Options of a task evaluation.
struct TaskEvalOptions {
  std::vector<MethodSpec> methods;            ///< compaction methods; none = the full row only
  std::vector<double> ratios{0.1, 0.2};       ///< keep ratios in [0, 1]
  uint64_t seed = 0;                          ///< seed of `random` and query sampling (+ item index)
  bool progress = true;                       ///< one log_line per item
};

/// The rows an item is evaluated under: "full" (ratio 1) first, then methods x ratios, methods outer.
struct TaskEvalRowKey {
  std::string method;  ///< "full" or the canonical method spec (to_string)
  double ratio = 1;
};
std::vector<TaskEvalRowKey> task_eval_row_keys(const TaskEvalOptions& options);

/// One answer of one item under one row.
struct TaskEvalAnswer {
  std::string text;      ///< generated text, cut at the item's first stop string
  double score = 0;      ///< item_score in [0, 1]
  double seconds = 0;    ///< wall time of compact_cache for this context (0 for "full")
  double entries = 0;    ///< cache entries kept, summed over layers and heads (the full count for "full")
};

/// One item's evaluation: the work unit of a resumable task-eval.
struct TaskEvalUnit {
  std::string file;          ///< task file path
  std::string id, family;    ///< of the item
  int context_tokens = 0;    ///< BOS + item.context, tokens
  int question_tokens = 0;   ///< prompt minus context, encoded without BOS
  double prefill_seconds = 0;  ///< wall time of the context prefill(s), reference queries included
  std::vector<TaskEvalAnswer> answers;  ///< [rows] in task_eval_row_keys order
};

/// One table row: a task family under one method and ratio, over that family's items.
struct TaskEvalRow {
  std::string family, method;
  double ratio = 1;
  int items = 0;
  double score = 0;               ///< mean item_score x 100 (RULER's scale: percent)
  double score_sem = 0;           ///< SEM of that mean over items, x 100 (0 for one item)
  double compaction_seconds = 0;  ///< mean over items of compact_cache wall time per context (0 for full)
  double kept_entries = 0;        ///< mean over items of the entries kept, summed over heads
};

/// The evaluation's result.
struct TaskEvalResult {
  std::vector<TaskEvalRowKey> keys;  ///< the rows of every item (TaskEvalUnit::answers order)
  std::vector<TaskEvalRow> rows;   ///< per family (first-seen order): full, then methods x ratios
  std::vector<TaskEvalUnit> units; ///< per item, in file then item order (the detail list)
  double mean_context_tokens = 0;
  double prefill_seconds = 0;      ///< total over items
};

/// Checks the options and files: throws Error for no file, an empty file ("FILE: empty task file
/// (no items)"), a ratio outside [0, 1] ("--ratios: R is outside [0, 1]"), no ratios while
/// methods are given, and an item without "context" ("FILE: item ID has no \"context\" ...";
/// task-eval compacts that span).
void validate_task_eval(const std::vector<TaskEvalFile>& files, const TaskEvalOptions& options);

/// An item's ids: context = BOS + item.context, question = prompt minus context (no BOS).
struct TaskEvalTokens {
  std::vector<int> context, question;
};
/// Tokenizes an item as task-eval feeds it. Throws Error naming `file` and the item when the
/// context has under 2 tokens, the question none, or context (or context + question) runs past
/// the model's max_seq_len (when it is > 0).
TaskEvalTokens tokenize_task_item(const Model& model, const TaskItem& item, const std::string& file);

/// Greedy continuation of a cache (next_position = T; `last_logits` [vocab] after the context's
/// last token `last_token`): `question` ids are fed in one prefill, then up to max_new_tokens
/// tokens are taken by argmax (ties to the lowest id, over the tokenizer's ids), stopping at EOS or
/// BOS (not appended) or as soon as the generated text holds one of `stop`. Returns the generated
/// text cut at the first stop string (cut_at_stop). The cache ends holding the tokens fed. The
/// decoding is decode_greedy (answer_generation.h).
/// Gives the same text as generate_from_cache with a temperature-0 Sampler and then cut_at_stop.
std::string greedy_answer(const Transformer& transformer, const Tokenizer& tokenizer, KVCache& cache,
                          std::span<const float> last_logits, int last_token, std::span<const int> question,
                          int max_new_tokens, const std::vector<std::string>& stop);

/// Evaluates one item (global index `index` seeds `random`): prefill per distinct reference-query
/// setting (prefill_for_compaction), the full row over a copy of the context cache, each method x
/// ratio over compact_cache's result. Throws as tokenize_task_item and compact_cache.
TaskEvalUnit evaluate_task_item(const Model& model, const Transformer& transformer, const TaskItem& item,
                                const std::string& file, std::size_t index, const TaskEvalOptions& options);

/// The result from per-item units (in order) evaluated under `keys`. Throws Error when a unit's
/// rows do not match the keys.
TaskEvalResult aggregate_task_eval(const std::vector<TaskEvalRowKey>& keys, std::vector<TaskEvalUnit> units);

/// Evaluates every item of every file in one process.
TaskEvalResult run_task_eval(const Model& model, const std::vector<TaskEvalFile>& files,
                             const TaskEvalOptions& options);

/// The resumable study: settings = model fingerprint, canonical methods, ratios, seed; one unit per
/// item (item_<k>, k = 0-based over files in order), hashed by its JSONL line. Folder layout
/// DIR/shards/task_eval_shard_I_of_N.json, DIR/units/task_eval_item_<k>.json (unit_study.h).
UnitStudy make_task_eval_study(const Model& model, const std::vector<TaskEvalFile>& files,
                               const TaskEvalOptions& options);

/// Runs shard `shard` (count 0: every item) of the study into `dir`; finished units are skipped.
UnitShardRun run_task_eval_shard(const Model& model, const std::vector<TaskEvalFile>& files,
                                 const TaskEvalOptions& options, const std::string& dir, const ShardSpec& shard);

/// A study folder read back: the result over the finished items and the missing ones (0-based).
struct TaskEvalMerge {
  UnitStudy study;
  std::vector<TaskEvalRowKey> keys;  ///< the rows, as the study ran them
  TaskEvalResult result;             ///< empty rows when no item is finished
  std::vector<int> missing;
};
/// Throws as read_unit_study, or Error for a malformed unit naming its file; no finished item is
/// an Error unless allow_none.
TaskEvalMerge merge_task_eval(const std::string& dir, bool allow_none = false);

/// The unit's JSON (answers as [{"method", "ratio", "answer", "score", "seconds", "entries"}]) and
/// back; parse throws Error naming `path` when malformed or when its rows differ from `keys`.
nlohmann::json task_eval_unit_json(const TaskEvalUnit& unit, const std::vector<TaskEvalRowKey>& keys);
TaskEvalUnit parse_task_eval_unit(const nlohmann::json& j, const std::vector<TaskEvalRowKey>& keys,
                                  const std::string& path);

}  // namespace kvcompact
