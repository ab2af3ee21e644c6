// The reports of the sharded studies, printed by the study's subcommand (once the study is
// complete) and by `merge`: compact-eval (tools/cmd_compact_eval.cpp), qa-eval (tools/cmd_qa.cpp)
// and mask-eval (tools/cmd_heads.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/budget_eval.h"
#include "studies/compact_eval.h"
#include "studies/mask_eval.h"
#include "studies/qa_eval.h"
#include "studies/task_eval.h"

namespace kvcompact::cli {

/// Output files (empty = none): the table as CSV, the figure, the JSON result.
struct CompactEvalReportFiles {
  std::vector<std::string> csv;
  std::string plot;
  std::vector<std::string> json;
};

/// Prints the result (text table, or JSON when as_json) with `header` (model, data, ...) merged
/// into the JSON, and writes the requested files. Returns the exit status (0).
int report_compact_eval(const CompactEvalResult& r, nlohmann::json header, const CompactEvalReportFiles& files,
                        bool as_json);

/// Prints a qa-eval result (notes, summary and table; JSON when as_json, with `header` merged in)
/// and writes the table as CSV to each of `csv` and the JSON to each of `json`. Returns 0.
int report_qa_eval(const QaEvalResult& r, nlohmann::json header, const std::vector<std::string>& csv,
                   const std::vector<std::string>& json, bool as_json);

/// Writes DIR/mask_eval.{json,csv} and the figure `figure` (when ks is not empty; "" = none),
/// prints the TopK / RandomK table (or the JSON when as_json). Returns 0.
int report_mask_eval(const MaskEvalResult& r, const std::string& dir, const std::string& figure, bool as_json);

/// Output files of a budget-eval (empty paths are skipped).
struct BudgetEvalReportFiles {
  std::vector<std::string> json, csv, plot;
};
/// DIR/budget_eval.{json,csv,svg} plus the user's --out-json/--csv/--plot in `extra` (one each).
BudgetEvalReportFiles budget_eval_files(const std::string& dir, BudgetEvalReportFiles extra);

/// Prints the budget-eval table (or the JSON "budget-frontier" points with `header` merged in when
/// as_json) and writes the files. `r` must be complete. Returns 0.
int report_budget_eval(const BudgetEvalResult& r, nlohmann::json header, const BudgetEvalReportFiles& files,
                       bool as_json);

/// Prints a task-eval result (summary and table; JSON when as_json, with `header` merged in: rows
/// and the per-item answers) and writes the table as CSV to each of `csv` and the JSON to each of
/// `json` (tools/cmd_task_eval.cpp). Returns 0.
int report_task_eval(const TaskEvalResult& r, nlohmann::json header, const std::vector<std::string>& csv,
                     const std::vector<std::string>& json, bool as_json);

}  // namespace kvcompact::cli
