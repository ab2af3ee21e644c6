// The runner of sharded studies (see unit_study.h).
#include "studies/unit_study.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <set>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "io/json_number.h"
#include "ops/matmul.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

bool parse_int(const std::string& s, int& v) {
  if (s.empty()) return false;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  return ec == std::errc() && p == s.data() + s.size();
}

bool valid_unit_name(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

struct Manifest {
  std::string path;
  UnitStudy study;
  ShardSpec shard;
};

/// The study described by `settings` (as make_unit_study wrote it), read back from `path`.
UnitStudy study_from_settings(const StudyKind& kind, const json& settings, const std::string& path) {
  UnitStudy s;
  s.kind = kind;
  try {
    if (settings.at("kind").get<std::string>() != kind.name)
      throw Error(fmt::format("{}: a {} manifest, not {}", path, settings.at("kind").get<std::string>(), kind.name));
    s.unit_names = settings.at("unit_names").get<std::vector<std::string>>();
    s.unit_hashes = settings.at("unit_hashes").get<std::vector<std::string>>();
    const int units = json_int(settings.at("units"), path, "settings.units");
    if (units < 1 || static_cast<std::size_t>(units) != s.unit_names.size() || s.unit_hashes.size() != s.unit_names.size())
      throw Error(fmt::format("{}: settings.units, unit_names and unit_hashes disagree", path));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed {} settings ({})", path, kind.name, e.what()));
  }
  for (const std::string& n : s.unit_names)
    if (!valid_unit_name(n)) throw Error(fmt::format("{}: bad unit name '{}'", path, n));
  s.settings = settings;
  s.id = hash_hex(settings.dump());
  return s;
}

std::vector<Manifest> read_manifests(const std::string& dir, const StudyKind& kind) {
  std::vector<Manifest> out;
  for (const std::string& f : shard_manifest_files(dir, kind.manifest_prefix())) {
    const json j = read_json_file(f);
    Manifest m;
    m.path = f;
    try {
      m.study = study_from_settings(kind, j.at("settings"), f);
      if (j.contains("inputs")) m.study.inputs = j.at("inputs");
      if (m.study.id != j.at("study").get<std::string>())
        throw Error(fmt::format("{}: its study id does not match its settings (edited?)", f));
      m.shard.index = json_int(j.at("shard").at("index"), f, "shard.index");
      m.shard.count = json_int(j.at("shard").at("count"), f, "shard.count");
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed shard manifest ({})", f, e.what()));
    }
    if (m.shard.count < 1 || m.shard.index < 0 || m.shard.index >= m.shard.count)
      throw Error(fmt::format("{}: shard {}/{} is not a shard", f, m.shard.index, m.shard.count));
    out.push_back(std::move(m));
  }
  return out;
}

/// "3" (1-based), with the unit's name when it says more than its number: "2 (topk_k4)".
std::string unit_number(const UnitStudy& st, int unit) {
  const std::string& name = st.unit_names[static_cast<std::size_t>(unit)];
  if (name == fmt::format("doc_{}", unit)) return fmt::format("{}", unit + 1);
  return fmt::format("{} ({})", unit + 1, name);
}

/// "document 3", "condition 2 (topk_k4)".
std::string unit_label(const UnitStudy& st, int unit) { return st.kind.noun + " " + unit_number(st, unit); }

/// Reads and checks one unit file; returns its result.
json read_unit_file(const std::string& path, const UnitStudy& st, int unit, const UnitResultCheck& check) {
  const std::string again = fmt::format("delete it to have {} evaluated again", unit_label(st, unit));
  json j;
  try {
    j = read_json_file(path);
  } catch (const Error& e) {
    throw Error(fmt::format("{}; {}", e.what(), again));
  }
  json result;
  try {
    if (!j.is_object() || j.value("version", 0) != 1)
      throw Error(fmt::format("{}: not a version-1 {} unit; {}", path, st.kind.name, again));
    const std::string study = j.at("study").get<std::string>();
    if (study != st.id)
      throw Error(fmt::format("{}: belongs to study {}, not {} (different model or settings; copied from another "
                              "study's folder?); delete it, or use another --out folder for this study",
                              path, study, st.id));
    const int u = json_int(j.at("unit"), path, "unit");
    if (u != unit) throw Error(fmt::format("{}: holds {} {}, expected {}; {}", path, st.kind.noun, u + 1, unit + 1, again));
    if (j.at("input_hash").get<std::string>() != st.unit_hashes[static_cast<std::size_t>(unit)])
      throw Error(fmt::format("{}: its input hash is not {} {}'s (copied from another {}?); {}", path, st.kind.noun,
                              unit + 1, st.kind.noun, again));
    result = j.at("result");
    if (result.is_null()) throw Error(fmt::format("{}: holds no result; {}", path, again));
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed {} unit ({}); {}", path, st.kind.name, e.what(), again));
  }
  if (check) {
    try {
      check(result, unit, path);
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed {} result ({}); {}", path, st.kind.name, e.what(), again));
    }
  }
  return result;
}

}  // namespace

ShardSpec parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  ShardSpec s;
  if (slash == std::string::npos || !parse_int(text.substr(0, slash), s.index) ||
      !parse_int(text.substr(slash + 1), s.count))
    throw Error(fmt::format("--shard '{}': expected I/N (shard I of N, 0 <= I < N)", text));
  if (s.count < 1) throw Error(fmt::format("--shard '{}': N must be >= 1", text));
  if (s.index < 0 || s.index >= s.count)
    throw Error(fmt::format("--shard '{}': I must be in 0..{} (shards are numbered from 0)", text, s.count - 1));
  return s;
}

std::pair<std::size_t, std::size_t> shard_range(std::size_t n, const ShardSpec& s) {
  const auto N = static_cast<std::size_t>(s.count), i = static_cast<std::size_t>(s.index);
  return {i * n / N, (i + 1) * n / N};
}

std::string differing_settings(const json& a, const json& b) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : a.items())
    if (!b.contains(k) || b[k] != v) keys.push_back(k);
  for (const auto& [k, v] : b.items())
    if (!a.contains(k)) keys.push_back(k);
  if (keys.empty()) return "none";
  std::string out;
  for (const auto& k : keys)
    out += (out.empty() ? "" : ", ") + (k == "input_hashes" || k == "unit_hashes" ? std::string("input documents") : k);
  return out;
}

std::vector<std::string> shard_manifest_files(const std::string& dir, const std::string& prefix) {
  std::vector<std::string> files;
  const fs::path sd = fs::path(dir) / "shards";
  std::error_code ec;
  if (!fs::is_directory(sd, ec)) return files;
  for (const auto& e : fs::directory_iterator(sd))
    if (e.path().extension() == ".json" && e.path().filename().string().starts_with(prefix))
      files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

const std::vector<StudyKind>& study_kinds() {
  static const std::vector<StudyKind> kinds = {
      {"influence", "", "unit", "an influence sweep"},
      {"compact-eval", "compact_eval", "document", "a compact-eval study"},
      {"qa-eval", "qa_eval", "article", "a qa-eval study"},
      {"mask-eval", "mask_eval", "condition", "a mask-eval study"},
      {"task-eval", "task_eval", "item", "a task-eval study"},
      // The budget-eval's own manifests name its series; each series is a compact-eval study in
      // a sub-folder (studies/budget_eval.h).
      {"budget-eval", "budget_eval", "series", "a budget-eval study"},
  };
  return kinds;
}

const StudyKind& study_kind(const std::string& name) {
  for (const StudyKind& k : study_kinds())
    if (k.name == name) return k;
  throw Error(fmt::format("unknown study kind '{}'", name));
}

const StudyKind* study_kind_in(const std::string& dir) {
  const StudyKind* found = nullptr;
  for (const StudyKind& k : study_kinds()) {
    // (The influence sweep's "shard_" never matches the other kinds' "<stem>_shard_" files.)
    if (shard_manifest_files(dir, k.manifest_prefix()).empty()) continue;
    if (found != nullptr)
      throw Error(fmt::format("{}: holds shard manifests of {} and of {}; one folder holds one study", dir,
                              found->article, k.article));
    found = &k;
  }
  return found;
}

void refuse_other_study_kinds(const std::string& dir, const StudyKind& kind) {
  for (const StudyKind& k : study_kinds())
    if (k.name != kind.name && !shard_manifest_files(dir, k.manifest_prefix()).empty())
      throw Error(fmt::format("{}: holds {}; use another --out folder for the {} {}", dir, k.article, kind.name,
                              kind.name == "influence" ? "sweep" : "study"));
}

std::string hash_hex(const std::string& bytes) { return fmt::format("{:016x}", fnv1a64(bytes.data(), bytes.size())); }

UnitStudy make_unit_study(const StudyKind& kind, json settings, std::vector<std::string> unit_names,
                          std::vector<std::string> unit_hashes) {
  if (unit_names.empty()) throw Error(fmt::format("{}: no {}s to evaluate", kind.name, kind.noun));
  if (unit_names.size() != unit_hashes.size())
    throw Error(fmt::format("{}: {} unit names but {} input hashes", kind.name, unit_names.size(), unit_hashes.size()));
  std::set<std::string> seen;
  for (const std::string& n : unit_names) {
    if (!valid_unit_name(n)) throw Error(fmt::format("{}: bad unit name '{}'", kind.name, n));
    if (!seen.insert(n).second) throw Error(fmt::format("{}: unit name '{}' is repeated", kind.name, n));
  }
  settings["kind"] = kind.name;
  // --fast-quant (int8 activations) changes every number: shards with and without it never mix.
  settings["fast_quant"] = matmul_mode() == MatmulMode::FastQuant;
  settings["units"] = unit_names.size();
  settings["unit_names"] = unit_names;
  settings["unit_hashes"] = unit_hashes;
  UnitStudy s;
  s.kind = kind;
  s.id = hash_hex(settings.dump());
  s.settings = std::move(settings);
  s.unit_names = std::move(unit_names);
  s.unit_hashes = std::move(unit_hashes);
  return s;
}

std::string unit_study_path(const std::string& dir, const UnitStudy& study, int unit) {
  const std::string& name = study.unit_names.at(static_cast<std::size_t>(unit));
  return (fs::path(dir) / "units" / (study.kind.stem.empty() ? name + ".json" : study.kind.stem + "_" + name + ".json"))
      .string();
}

UnitShardRun run_unit_shard_groups(const std::string& dir, const UnitStudy& study, const ShardSpec& shard_in,
                                   const std::function<int(int unit)>& group_of, const UnitGroupEvaluate& evaluate,
                                   const UnitResultCheck& check, bool progress) {
  const ShardSpec shard = shard_in.active() ? shard_in : ShardSpec{0, 1};
  refuse_other_study_kinds(dir, study.kind);
  for (const Manifest& m : read_manifests(dir, study.kind))
    if (m.study.id != study.id)
      throw Error(fmt::format("{}: holds {} shards of study {} (from {}), this run is study {}; settings that differ: "
                              "{}. Use another --out folder",
                              dir, study.kind.name, m.study.id, m.path, study.id,
                              differing_settings(m.study.settings, study.settings)));
  UnitShardRun run;
  std::tie(run.begin, run.end) = shard_range(static_cast<std::size_t>(study.units()), shard);
  // The shard's finished units are checked before its manifest is written: a refused run leaves
  // the folder as it found it.
  std::vector<bool> done(run.end - run.begin, false);
  for (std::size_t u = run.begin; u < run.end; ++u) {
    const std::string path = unit_study_path(dir, study, static_cast<int>(u));
    if (!fs::exists(path)) continue;
    (void)read_unit_file(path, study, static_cast<int>(u), check);  // refuses another study's or a broken unit
    done[u - run.begin] = true;
  }
  json manifest = {{"version", 1},
                   {"study", study.id},
                   {"shard", {{"index", shard.index}, {"count", shard.count}}},
                   {"units", {{"begin", run.begin}, {"end", run.end}}},
                   {"settings", study.settings}};
  if (!study.inputs.is_null()) manifest["inputs"] = study.inputs;
  write_file_atomic((fs::path(dir) / "shards" /
                     fmt::format("{}{}_of_{}.json", study.kind.manifest_prefix(), shard.index, shard.count))
                        .string(),
                    manifest.dump(1, ' ', false, json::error_handler_t::replace) + "\n");
  // The units still to do, in order, cut into runs of one group.
  std::vector<std::vector<int>> groups;
  for (std::size_t u = run.begin; u < run.end; ++u) {
    const int unit = static_cast<int>(u);
    if (done[u - run.begin]) {
      ++run.skipped;
      if (progress)
        log_line(fmt::format("{}: shard {}/{}: {} already done", study.kind.name, shard.index, shard.count,
                             unit_label(study, unit)));
      continue;
    }
    if (groups.empty() || group_of(groups.back().back()) != group_of(unit)) groups.emplace_back();
    groups.back().push_back(unit);
  }
  for (const std::vector<int>& g : groups) {
    std::vector<bool> written(g.size(), false);
    auto write = [&](int unit, const json& result) {
      const auto it = std::find(g.begin(), g.end(), unit);
      if (it == g.end() || written[static_cast<std::size_t>(it - g.begin())])
        throw Error(fmt::format("{}: unit {} written twice or outside its group (a bug)", study.kind.name, unit));
      written[static_cast<std::size_t>(it - g.begin())] = true;
      const json j = {{"version", 1},
                      {"study", study.id},
                      {"unit", unit},
                      {"name", study.unit_names[static_cast<std::size_t>(unit)]},
                      {"input_hash", study.unit_hashes[static_cast<std::size_t>(unit)]},
                      {"result", result}};
      write_file_atomic(unit_study_path(dir, study, unit), j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n");
      ++run.evaluated;
    };
    evaluate(g, write);
    for (std::size_t i = 0; i < g.size(); ++i)
      if (!written[i]) throw Error(fmt::format("{}: unit {} was not written (a bug)", study.kind.name, g[i]));
  }
  return run;
}

UnitShardRun run_unit_shard(const std::string& dir, const UnitStudy& study, const ShardSpec& shard,
                            const std::function<json(int)>& evaluate, const UnitResultCheck& check, bool progress) {
  return run_unit_shard_groups(
      dir, study, shard, [](int unit) { return unit; },
      [&](const std::vector<int>& units, const UnitWriter& write) { write(units[0], evaluate(units[0])); }, check,
      progress);
}

UnitStudyState read_unit_study(const std::vector<std::string>& dirs, const StudyKind& kind,
                               const UnitResultCheck& check) {
  if (dirs.empty()) throw Error("merge: no folder given");
  std::vector<Manifest> manifests;
  for (const std::string& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) throw Error(fmt::format("{}: no such folder", dir));
    refuse_other_study_kinds(dir, kind);
    std::vector<Manifest> here = read_manifests(dir, kind);
    if (here.empty() && dirs.size() > 1)
      throw Error(fmt::format("{}: no {} shard manifests (shards/{}*.json); every folder given to merge must be a "
                              "shard folder of the study",
                              dir, kind.name, kind.manifest_prefix()));
    for (Manifest& m : here) manifests.push_back(std::move(m));
  }
  if (manifests.empty())
    throw Error(fmt::format("{}: no {} shard manifests (shards/{}*.json); was it run with {} --out DIR [--shard "
                            "I/N]?",
                            dirs[0], kind.name, kind.manifest_prefix(), kind.name));
  UnitStudyState st;
  st.dirs = dirs;
  st.study = manifests[0].study;
  for (const Manifest& m : manifests)
    if (m.study.id != st.study.id)
      throw Error(fmt::format("{}: study {} differs from study {} of {} (settings that differ: {}); refusing to mix "
                              "studies",
                              m.path, m.study.id, st.study.id, manifests[0].path,
                              differing_settings(m.study.settings, st.study.settings)));
  const int n = st.study.units();
  st.results.assign(static_cast<std::size_t>(n), json());
  st.files.assign(static_cast<std::size_t>(n), "");
  for (int u = 0; u < n; ++u) {
    for (const std::string& dir : dirs) {  // the first folder holding the unit wins
      const std::string path = unit_study_path(dir, st.study, u);
      if (!fs::exists(path)) continue;
      st.results[static_cast<std::size_t>(u)] = read_unit_file(path, st.study, u, check);
      st.files[static_cast<std::size_t>(u)] = path;
      break;
    }
    if (st.files[static_cast<std::size_t>(u)].empty()) st.missing.push_back(u);
  }
  std::sort(manifests.begin(), manifests.end(), [](const Manifest& a, const Manifest& b) {
    return std::make_pair(a.shard.count, a.shard.index) < std::make_pair(b.shard.count, b.shard.index);
  });
  for (const Manifest& m : manifests) {
    if (!st.shards.empty() && st.shards.back().shard.count == m.shard.count &&
        st.shards.back().shard.index == m.shard.index)
      continue;  // the same shard in two folders
    UnitStudyState::Shard s;
    s.shard = m.shard;
    std::tie(s.begin, s.end) = shard_range(static_cast<std::size_t>(n), m.shard);
    for (std::size_t u = s.begin; u < s.end; ++u) s.done += st.results[u].is_null() ? 0 : 1;
    st.shards.push_back(s);
  }
  return st;
}

UnitStudyState read_unit_study(const std::string& dir, const StudyKind& kind, const UnitResultCheck& check) {
  return read_unit_study(std::vector<std::string>{dir}, kind, check);
}

std::string unit_study_status_line(const UnitStudyState& st) {
  std::string line = fmt::format("{} study {}: {}/{} {}s done", st.study.kind.name, st.study.id, st.done(),
                                 st.study.units(), st.study.kind.noun);
  for (std::size_t i = 0; i < st.missing.size() && i < 20; ++i) {
    const int u = st.missing[i];
    line += (i == 0 ? fmt::format("; missing {}s: ", st.study.kind.noun) : std::string(" ")) + unit_number(st.study, u);
  }
  if (st.missing.size() > 20) line += " ...";
  return line;
}

}  // namespace kvcompact
