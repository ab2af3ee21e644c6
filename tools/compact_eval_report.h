// The compact-eval table, JSON, CSV and figure: printed by `compact-eval` and by `merge` of a
// sharded compact-eval study (tools/cmd_compact_eval.cpp).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/compact_eval.h"

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

}  // namespace kvcompact::cli
