// Sharded influence sweeps (issue #18): the study's work units (documents x heads) split into N
// contiguous shards that independent processes (SLURM array tasks) run; each unit's result is one
// file written atomically into the shared output folder, and `merge` builds the aggregate.
//
// Folder layout: DIR/units/doc_<d>_<head>.json (one unit, written once by the shard that owns it),
// DIR/shards/shard_<i>_of_<n>.json (each shard's manifest: the study settings, its id and the
// shard's unit range; written by that shard only). No file has two writers, no locks are needed.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/influence_curves.h"
#include "analysis/unit_study.h"

namespace kvcompact {

/// A study: the settings every unit must share. `settings` holds model_fingerprint, method, grid,
/// baseline_ratio, budgets, context_frac, seed, evaluated, qa, heads (names, sweep order),
/// n_layers, n_kv_heads, documents (count) and input_hashes (per document); `id` is FNV-1a 64 of
/// its compact dump (16 hex digits).
struct InfluenceStudy {
  nlohmann::json settings;
  std::string id;
  std::vector<HeadId> heads;
  int documents = 0;
};

/// Builds the study from its settings (computes the id and reads heads / documents back).
InfluenceStudy make_study(nlohmann::json settings);

/// One finished unit: head `head` of document `document`.
struct InfluenceUnit {
  std::string study;            ///< study id
  int document = 0;             ///< 0-based
  HeadId head;
  int context_tokens = 0, eval_tokens = 0, spans = 1;
  double baseline_nll = 0;
  std::vector<double> delta;    ///< [grid], nats/token
  double seconds = 0;           ///< wall time of this unit
};

/// DIR/units/doc_<d>_<head>.json.
std::string unit_path(const std::string& dir, int document, const HeadId& head);
/// Writes a unit atomically.
void write_unit(const std::string& path, const InfluenceUnit& u);
/// Reads a unit; throws Error naming the file when it is malformed or belongs to another study
/// than `study` (when `study` is non-empty).
InfluenceUnit read_unit(const std::string& path, const std::string& study, int n_layers, int n_kv_heads);

/// Refuses (Error naming DIR, both study ids and the differing settings) when DIR/shards holds a
/// manifest of another study; then writes this shard's manifest atomically.
void register_shard(const std::string& dir, const InfluenceStudy& study, const ShardSpec& shard);

/// Per shard: its units, which are done and which are missing.
struct ShardStatus {
  ShardSpec shard;
  std::size_t begin = 0, end = 0;
  std::vector<std::string> missing;  ///< "doc <d+1> <head>"
  std::size_t done = 0;
};
struct StudyStatus {
  InfluenceStudy study;
  std::vector<std::string> dirs;
  std::vector<ShardStatus> shards;     ///< from the manifests found (sorted by N, then I)
  std::size_t units = 0, done = 0;
  std::vector<std::string> missing;    ///< over the whole study
  std::vector<std::string> unit_files; ///< [documents x heads], document-major; "" = missing
};

/// Reads the manifests and unit files of one study spread over `dirs` (the first holding a unit
/// wins). Throws Error when no manifest is found, or when the folders hold manifests or units of
/// different studies (naming the folders and the settings that differ): never mixes studies.
StudyStatus study_status(const std::vector<std::string>& dirs);

/// The aggregate of the finished units (as a one-process `influence` run writes it: the same
/// InfluenceCurves, head order and per-head document order). Heads without any finished unit
/// are left out. Throws Error when no unit is finished.
InfluenceCurves merge_units(const StudyStatus& status);

}  // namespace kvcompact
