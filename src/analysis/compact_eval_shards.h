// Sharded compact-eval (issue #18): the study's work units are its documents, split into N
// contiguous shards that independent processes (SLURM array tasks) run; each document's result is
// one file written atomically into the shared output folder, and `merge` aggregates them to the
// numbers a one-process run gives.
//
// Folder layout (beside an influence study's, never mixed with it):
//   DIR/units/compact_eval_doc_<d>.json             one document (0-based d), written once
//   DIR/shards/compact_eval_shard_<i>_of_<n>.json   each shard's manifest: settings, study id, range
// No file has two writers, no locks are needed; a rerun skips the documents already written.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/compact_eval.h"
#include "analysis/influence_shards.h"

namespace kvcompact {

/// A compact-eval study: every setting the units must share (model fingerprint, methods in
/// canonical form, ratios, context / continuation rule, seed, budgets, the documents' count and
/// FNV-1a hashes); `id` is FNV-1a 64 of its compact dump (16 hex digits).
struct CompactEvalStudy {
  nlohmann::json settings;
  std::string id;
  int documents = 0;
};

/// The study of running `options` on `documents` with `model`.
CompactEvalStudy make_compact_eval_study(const Model& model, const std::vector<std::string>& documents,
                                         const CompactEvalOptions& options);

/// What one shard did.
struct CompactEvalShardRun {
  std::size_t begin = 0, end = 0;     ///< its documents [begin, end)
  std::size_t evaluated = 0, skipped = 0;  ///< skipped: already written by an earlier run
};

/// Runs shard `shard` (count 0: the whole study as shard 0/1) of the study into `dir`: refuses a
/// folder holding another study's shards (Error naming both ids and the differing settings),
/// writes the manifest, then evaluates each of its documents that has no unit file yet and writes
/// that unit atomically. Throws as run_compact_eval.
CompactEvalShardRun run_compact_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                           const CompactEvalOptions& options, const std::string& dir,
                                           const ShardSpec& shard);

/// Whether `dir` holds compact-eval shard manifests.
bool has_compact_eval_study(const std::string& dir);

/// A merged study: the aggregate of the finished documents and the missing ones.
struct CompactEvalMerge {
  CompactEvalStudy study;
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
