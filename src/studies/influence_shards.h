// Sharded influence sweeps (issue #18) on the shared unit-study runner (studies/unit_study.h):
// the study's work units are documents x heads (document-major), one unit = one head of one
// document over the whole ratio grid; the heads of one document that a shard still has to do are
// swept together (one prefill and baseline), each unit written as soon as it is finished.
//
// Folder layout: DIR/units/doc_<ddddd>_<head>.json (one unit), DIR/shards/shard_<i>_of_<n>.json
// (each shard's manifest). `merge` reads one folder or the shard folders of one study.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "budgets/influence_curves.h"
#include "studies/unit_study.h"

namespace kvcompact {

/// A sweep: the unit study plus what its settings say (heads in sweep order, documents). The
/// settings hold model_fingerprint, method, grid, baseline_ratio, budgets, context_frac, seed,
/// evaluated, qa, heads, n_layers, n_kv_heads, documents and input_hashes (per document).
struct InfluenceStudy {
  UnitStudy unit;
  nlohmann::json settings;  ///< unit.settings
  std::string id;           ///< unit.id
  std::vector<HeadId> heads;
  int documents = 0;
};

/// The study of a run with these settings (unit d * heads + k = head k of document d, named
/// doc_<ddddd>_<head>, its document's input hash). Throws Error for malformed settings.
InfluenceStudy make_study(nlohmann::json settings);

/// One finished unit: head `head` of document `document`.
struct InfluenceUnit {
  int document = 0;             ///< 0-based
  HeadId head;
  int context_tokens = 0, eval_tokens = 0, spans = 1;
  double baseline_nll = 0;
  std::vector<double> delta;    ///< [grid], nats/token
  double seconds = 0;           ///< wall time of this unit
};

/// A unit's result as its file stores it, and back. parse_influence_unit throws Error naming
/// `path` when the result is malformed, is not unit (document, head), or has another grid size.
nlohmann::json influence_unit_json(const InfluenceUnit& u);
InfluenceUnit parse_influence_unit(const nlohmann::json& result, const InfluenceStudy& study, int unit,
                                   const std::string& path);

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
  std::vector<std::optional<InfluenceUnit>> results;  ///< [documents x heads], document-major
};

/// Reads the manifests and unit files of one study spread over `dirs` (read_unit_study: the
/// first folder holding a unit wins). Throws Error when no manifest is found, or when the folders
/// hold manifests or units of different studies (naming the folders and the settings that
/// differ): never mixes studies.
StudyStatus study_status(const std::vector<std::string>& dirs);

/// The aggregate of the finished units (as a one-process `influence` run writes it: the same
/// InfluenceCurves, head order and per-head document order). Heads without any finished unit
/// are left out. Throws Error when no unit is finished.
InfluenceCurves merge_units(const StudyStatus& status);

}  // namespace kvcompact
