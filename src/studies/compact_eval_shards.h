// Sharded compact-eval (issue #18): the study's work units are its documents, run by the shared
// unit-study runner (studies/unit_study.h); `merge` aggregates them to the numbers a one-process
// run gives.
//
// Folder layout (never mixed with another study's):
//   DIR/units/compact_eval_doc_<d>.json             one document (0-based d), written once
//   DIR/shards/compact_eval_shard_<i>_of_<n>.json   each shard's manifest: settings, study id, range
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "studies/compact_eval.h"
#include "studies/unit_study.h"

namespace kvcompact {

/// The study of running `options` on `documents` with `model`: every setting the units must share
/// (model fingerprint, methods in canonical form, ratios, context / continuation rule, seed,
/// budgets), one unit per document (named doc_<d>, its text's FNV-1a hash).
UnitStudy make_compact_eval_study(const Model& model, const std::vector<std::string>& documents,
                                         const CompactEvalOptions& options);

/// Runs shard `shard` (count 0: the whole study as shard 0/1) of the study into `dir` (see
/// run_unit_shard: another study's folder is refused, finished documents are skipped). Throws as
/// run_compact_eval.
UnitShardRun run_compact_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                           const CompactEvalOptions& options, const std::string& dir,
                                           const ShardSpec& shard);

/// A merged study: the aggregate of the finished documents and the missing ones.
struct CompactEvalMerge {
  UnitStudy study;
  CompactEvalOptions options;       ///< methods and ratios as the study ran them
  CompactEvalResult result;         ///< over the finished documents, in document order
  std::vector<int> missing;         ///< 0-based documents without a unit file
};

/// Reads the manifests and units of `dir`. Throws Error when there is no manifest, manifests of
/// different studies, a unit of another study, of another document (input hash) or a malformed
/// file (naming it and saying to delete it), or no finished document (unless allow_none: then
/// `result` is empty and every document is missing).
CompactEvalMerge merge_compact_eval(const std::string& dir, bool allow_none = false);

}  // namespace kvcompact
