// The budget-eval series (issues #3, #18): one compact-eval per per-head budget schedule
// (optimized from influence curves, uniform, pyramid), each keeping the same total keys at a
// ratio; sharded, every series is a compact-eval study of its own in DIR/series_<k>/ run with the
// same --shard, and DIR/shards/budget_eval_shard_I_of_N.json names the series.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/compact_eval.h"
#include "studies/unit_study.h"

namespace kvcompact {

/// One series: a label (the schedule's name), where it came from (a budgets file or "") and its
/// per-head proportions [n_layers * n_kv_heads] (budget_solver.h).
struct BudgetEvalSeries {
  std::string label, source;
  std::vector<double> proportions;
};

/// The series' results (or, merged from a folder, what is missing).
struct BudgetEvalResult {
  std::vector<BudgetEvalSeries> series;
  std::vector<CompactEvalResult> results;  ///< [series]; empty when the folder is incomplete
  std::vector<std::string> missing;        ///< "series_<k> (label): documents 1 3 ..." per incomplete series
  bool complete() const { return missing.empty(); }
};

/// Runs every series over `documents` with `base` (one method; each series' proportions) in this
/// process. Throws as run_compact_eval.
BudgetEvalResult run_budget_eval(const Model& model, const std::vector<std::string>& documents,
                                 const CompactEvalOptions& base, const std::vector<BudgetEvalSeries>& series);

/// Runs shard `shard` of every series into DIR/series_<k> (run_compact_eval_shard), after writing
/// this shard's manifest DIR/shards/budget_eval_shard_I_of_N.json (`header` is kept in it for the
/// merge: model, data, method, ...). Refuses a folder holding another kind of study, or a
/// budget-eval of other series or settings. Returns merge_budget_eval(dir).
BudgetEvalResult run_budget_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                       const CompactEvalOptions& base, const std::vector<BudgetEvalSeries>& series,
                                       const nlohmann::json& header, const std::string& dir, const ShardSpec& shard);

/// Reads a budget-eval folder: the series from its manifests, each series' compact-eval study;
/// `header` gets the manifests' header. Throws Error when there is no manifest, the manifests
/// disagree, or as merge_compact_eval.
BudgetEvalResult merge_budget_eval(const std::string& dir, nlohmann::json* header = nullptr);

}  // namespace kvcompact
