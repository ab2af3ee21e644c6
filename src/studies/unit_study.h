// The one runner behind every sharded study (issues #18 and #12): a study is a list of work units
// (compact-eval documents, qa-eval articles, mask-eval conditions) with the settings every unit
// shares; N independent processes (SLURM array tasks) each run a contiguous shard of the units
// into one shared folder, a unit's result is one file written once and atomically, and a rerun
// skips the units already written. Reading the folder back gives the finished units' results in
// unit order and the missing ones; the study kind aggregates them as a one-process run does.
//
// Folder layout, for a kind with file stem S (e.g. "compact_eval"):
//   DIR/shards/S_shard_<i>_of_<n>.json   each shard's manifest: version, study id, shard, unit range, settings
//   DIR/units/S_<unit name>.json         one unit: version, study id, unit index and name, its input hash, result
// No file has two writers and no locks are needed (safe on a network file system). A folder holds
// one study of one kind: the influence sweep (studies/influence_shards.h) keeps its own unit files
// but the same manifests, and is refused here as any other kind is.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvcompact {

/// Shard I of N (0 <= I < N); count 0 = not sharded.
struct ShardSpec {
  int index = 0;
  int count = 0;
  bool active() const { return count > 0; }
};

/// Parses "I/N". Throws Error("--shard ...") unless both are integers with N >= 1 and 0 <= I < N.
ShardSpec parse_shard(const std::string& text);

/// Units [begin, end) of shard s among n_units (contiguous, sizes differ by at most one).
std::pair<std::size_t, std::size_t> shard_range(std::size_t n_units, const ShardSpec& s);

/// The keys whose values differ between two study settings, comma-separated ("input documents"
/// for input_hashes / unit_hashes), or "none": what an error about mixed studies names.
std::string differing_settings(const nlohmann::json& a, const nlohmann::json& b);

/// DIR/shards/<prefix>*.json, sorted by name (empty when DIR/shards does not exist).
std::vector<std::string> shard_manifest_files(const std::string& dir, const std::string& prefix);

/// A kind of sharded study.
struct StudyKind {
  std::string name;       ///< "compact-eval": settings.kind, the subcommand, messages
  std::string stem;       ///< "compact_eval": file names (S_shard_I_of_N.json, S_<unit>.json); "" for the
                          ///< influence sweep, whose manifests are shard_I_of_N.json
  std::string manifest_prefix() const { return stem.empty() ? "shard_" : stem + "_shard_"; }
  std::string noun;       ///< "document": what one unit is, in messages
  std::string article;    ///< "a compact-eval study" / "an influence sweep": in "holds ..." errors
};

/// The kinds kvcompact runs (influence, compact-eval, qa-eval, mask-eval).
const std::vector<StudyKind>& study_kinds();
/// The kind named `name`; throws Error for an unknown name.
const StudyKind& study_kind(const std::string& name);
/// The kind of the study whose shard manifests `dir` holds, or nullptr when it holds none. Throws
/// Error naming the folder when it holds manifests of two kinds.
const StudyKind* study_kind_in(const std::string& dir);
/// Throws Error ("DIR: holds an influence sweep; use another --out folder for the qa-eval study")
/// when `dir` holds shard manifests of a kind other than `kind`.
void refuse_other_study_kinds(const std::string& dir, const StudyKind& kind);

/// FNV-1a 64 of `bytes`, as 16 hex digits: study ids and the units' input hashes.
std::string hash_hex(const std::string& bytes);

/// A study: `settings` (what every unit must share; make_unit_study adds "kind", "units",
/// "unit_names" and "unit_hashes"), `id` = hash_hex of its compact dump.
struct UnitStudy {
  StudyKind kind;
  nlohmann::json settings;
  std::string id;
  std::vector<std::string> unit_names;   ///< [units]: file-name part, unique, [A-Za-z0-9_.-]
  std::vector<std::string> unit_hashes;  ///< [units]: hash of each unit's input (document text, ...)
  /// What a merge needs besides the settings and units (mask-eval: the task items), written into
  /// every manifest but not part of the id: the settings must hold a hash of it. null = none.
  nlohmann::json inputs;
  int units() const { return static_cast<int>(unit_names.size()); }
};

/// Builds a study. Throws Error when there are no units, names and hashes differ in count, or a
/// name is empty, repeated or holds characters outside [A-Za-z0-9_.-].
UnitStudy make_unit_study(const StudyKind& kind, nlohmann::json settings, std::vector<std::string> unit_names,
                          std::vector<std::string> unit_hashes);

/// DIR/units/<stem>_<unit name>.json (DIR/units/<unit name>.json for the influence sweep).
std::string unit_study_path(const std::string& dir, const UnitStudy& study, int unit);

/// What one shard did.
struct UnitShardRun {
  std::size_t begin = 0, end = 0;          ///< its units [begin, end)
  std::size_t evaluated = 0, skipped = 0;  ///< skipped: already written by an earlier run
};

/// Checks a unit's stored result (throws Error naming `path` when it is malformed); may be empty.
using UnitResultCheck = std::function<void(const nlohmann::json& result, int unit, const std::string& path)>;

/// Runs shard `shard` (count 0: the whole study as shard 0/1) into `dir`: refuses a folder holding
/// another kind's or another study's shards (Error naming both ids and the settings that differ),
/// writes the shard's manifest, then for each of its units either checks the unit file already
/// there (as read_unit_study does, plus `check`) and skips it, or calls `evaluate(unit)` and writes
/// its result atomically. `progress` gets one line per unit ("" for none).
UnitShardRun run_unit_shard(const std::string& dir, const UnitStudy& study, const ShardSpec& shard,
                            const std::function<nlohmann::json(int unit)>& evaluate, const UnitResultCheck& check,
                            bool progress);

/// Writes one finished unit's result (atomically, at once).
using UnitWriter = std::function<void(int unit, const nlohmann::json& result)>;
/// Evaluates `units` (consecutive units of one group, none finished yet), calling `write` for each
/// as soon as it is done.
using UnitGroupEvaluate = std::function<void(const std::vector<int>& units, const UnitWriter& write)>;

/// run_unit_shard for units that are cheaper together: the shard's unfinished units are cut into
/// runs of equal group_of(unit) (the influence sweep: the heads of one document share its
/// prefill), each run evaluated by one call. Throws Error when a unit is not written.
UnitShardRun run_unit_shard_groups(const std::string& dir, const UnitStudy& study, const ShardSpec& shard,
                                   const std::function<int(int unit)>& group_of, const UnitGroupEvaluate& evaluate,
                                   const UnitResultCheck& check, bool progress);

/// A study folder read back.
struct UnitStudyState {
  UnitStudy study;
  struct Shard {
    ShardSpec shard;
    std::size_t begin = 0, end = 0, done = 0;
  };
  std::vector<Shard> shards;                ///< from the manifests found (sorted by N, then I; once each)
  std::vector<std::string> dirs;            ///< the folders read, in order
  std::vector<nlohmann::json> results;      ///< [units]; null where the unit is missing
  std::vector<std::string> files;           ///< [units]: the unit file read ("" = missing)
  std::vector<int> missing;                 ///< 0-based units without a unit file
  int done() const { return study.units() - static_cast<int>(missing.size()); }
  bool complete() const { return missing.empty(); }
};

/// Reads the manifests of `kind` in `dir` and its unit files. Throws Error when there is no
/// manifest ("was it run with --out?"), manifests of different studies or of another kind, or a
/// unit file that is malformed, of another study, of another unit or input (naming the file and
/// saying to delete it), or that `check` refuses.
UnitStudyState read_unit_study(const std::string& dir, const StudyKind& kind, const UnitResultCheck& check = {});
/// The same over the shard folders of one study (e.g. node-local --out folders): every folder
/// must hold manifests of that study; a unit is read from the first folder holding it.
UnitStudyState read_unit_study(const std::vector<std::string>& dirs, const StudyKind& kind,
                               const UnitResultCheck& check = {});

/// One line of status: "<kind> study <id>: D/U <noun>s done; missing: a b c ..." (1-based numbers
/// and names of the first 20 missing units).
std::string unit_study_status_line(const UnitStudyState& state);

}  // namespace kvcompact
