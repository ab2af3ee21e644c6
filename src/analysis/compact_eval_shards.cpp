// Sharded compact-eval (see compact_eval_shards.h).
#include "analysis/compact_eval_shards.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <tuple>

#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "io/json_number.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kManifestPrefix = "compact_eval_shard_";

std::string study_id(const json& settings) {
  const std::string text = settings.dump();
  return fmt::format("{:016x}", fnv1a64(text.data(), text.size()));
}

std::string unit_file(const std::string& dir, int document) {
  return (fs::path(dir) / "units" / fmt::format("compact_eval_doc_{}.json", document)).string();
}

json unit_json(const std::string& study, const std::string& input_hash, const CompactEvalUnit& u) {
  json cells = json::array();
  for (const CompactEvalCell& c : u.cells) cells.push_back({c.nll, c.bytes, c.full_bytes, c.heads, c.seconds, c.entries});
  return {{"version", 1},
          {"study", study},
          {"document", u.document},
          {"input_hash", input_hash},
          {"tokens", u.doc.tokens},
          {"context_tokens", u.doc.context_tokens},
          {"full_nll", u.doc.full_nll},
          {"reference_seconds", u.doc.reference_seconds},
          {"cells", cells}};
}

double number(const json& v, const std::string& path, const char* field) {
  if (!v.is_number()) throw Error(fmt::format("{}: {}: expected a number", path, field));
  return v.get<double>();
}

/// Reads a unit; throws Error naming the file when it is malformed or of another study.
CompactEvalUnit read_unit_file(const std::string& path, const CompactEvalStudy& st, int document, std::size_t n_cells) {
  const std::string& study = st.id;
  json j;
  try {
    j = read_json_file(path);
  } catch (const Error& e) {
    throw Error(fmt::format("{}; delete it to have document {} evaluated again", e.what(), document + 1));
  }
  CompactEvalUnit u;
  try {
    if (!j.is_object() || j.value("version", 0) != 1)
      throw Error(fmt::format("{}: not a version-1 compact-eval unit; delete it to have document {} evaluated again",
                              path, document + 1));
    if (j.at("study").get<std::string>() != study)
      throw Error(fmt::format("{}: belongs to study {}, not {} (different model or settings); use another folder",
                              path, j.at("study").get<std::string>(), study));
    u.document = json_int(j.at("document"), path, "document");
    if (u.document != document) throw Error(fmt::format("{}: holds document {}, expected {}", path, u.document, document));
    const json& hashes = st.settings.at("input_hashes");
    if (j.at("input_hash").get<std::string>() != hashes.at(static_cast<std::size_t>(document)).get<std::string>())
      throw Error(fmt::format("{}: its input hash is not document {}'s (copied from another document?); delete it to "
                              "have it evaluated again",
                              path, document + 1));
    u.doc.tokens = json_int_list(j.at("tokens"), path, "tokens");
    u.doc.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
    u.doc.full_nll = number(j.at("full_nll"), path, "full_nll");
    u.doc.reference_seconds = number(j.at("reference_seconds"), path, "reference_seconds");
    const json& cells = j.at("cells");
    if (!cells.is_array() || cells.size() != n_cells)
      throw Error(fmt::format("{}: cells: expected {} (methods x ratios) results", path, n_cells));
    for (const json& c : cells) {
      if (!c.is_array() || c.size() != 6) throw Error(fmt::format("{}: cells: expected rows of 6 numbers", path));
      u.cells.push_back({number(c[0], path, "cells"), number(c[1], path, "cells"), number(c[2], path, "cells"),
                         number(c[3], path, "cells"), number(c[4], path, "cells"), number(c[5], path, "cells")});
    }
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed compact-eval unit ({})", path, e.what()));
  }
  if (u.doc.context_tokens < 2 || static_cast<int>(u.doc.tokens.size()) <= u.doc.context_tokens)
    throw Error(fmt::format("{}: context_tokens {} does not fit its {} tokens", path, u.doc.context_tokens,
                            u.doc.tokens.size()));
  return u;
}

struct Manifest {
  std::string path;
  CompactEvalStudy study;
  ShardSpec shard;
};

CompactEvalStudy study_from_settings(const json& settings, const std::string& path) {
  CompactEvalStudy s;
  s.settings = settings;
  s.id = study_id(settings);
  try {
    s.documents = json_int(settings.at("documents"), path, "settings.documents");
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed compact-eval settings ({})", path, e.what()));
  }
  if (s.documents < 1) throw Error(fmt::format("{}: settings.documents must be >= 1", path));
  return s;
}

std::vector<Manifest> read_manifests(const std::string& dir) {
  std::vector<Manifest> out;
  for (const std::string& f : shard_manifest_files(dir, kManifestPrefix)) {
    const json j = read_json_file(f);
    Manifest m;
    m.path = f;
    try {
      m.study = study_from_settings(j.at("settings"), m.path);
      if (m.study.id != j.at("study").get<std::string>())
        throw Error(fmt::format("{}: its study id does not match its settings (edited?)", m.path));
      m.shard.index = json_int(j.at("shard").at("index"), m.path, "shard.index");
      m.shard.count = json_int(j.at("shard").at("count"), m.path, "shard.count");
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed shard manifest ({})", m.path, e.what()));
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

CompactEvalStudy make_compact_eval_study(const Model& model, const std::vector<std::string>& documents,
                                         const CompactEvalOptions& options) {
  std::vector<std::string> methods, hashes;
  for (const MethodSpec& m : options.methods) methods.push_back(to_string(m));
  for (const std::string& d : documents) hashes.push_back(fmt::format("{:016x}", fnv1a64(d.data(), d.size())));
  const json settings = {{"kind", "compact-eval"},
                         {"model_fingerprint", fingerprint_hex(model_fingerprint(model.config, model.weights))},
                         {"methods", methods},
                         {"ratios", options.ratios},
                         {"context_frac", options.context_frac},
                         {"context_tokens", options.context_tokens},
                         {"continuation_tokens", options.continuation_tokens},
                         {"seed", options.seed},
                         {"budget_proportions", options.budget_proportions},
                         {"documents", documents.size()},
                         {"input_hashes", hashes}};
  return study_from_settings(settings, "compact-eval");
}

CompactEvalShardRun run_compact_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                           const CompactEvalOptions& options, const std::string& dir,
                                           const ShardSpec& shard_in) {
  if (documents.empty()) throw Error("compact-eval: no documents to evaluate");
  validate_compact_eval_options(model, options);
  const ShardSpec shard = shard_in.active() ? shard_in : ShardSpec{0, 1};
  const CompactEvalStudy study = make_compact_eval_study(model, documents, options);
  if (!shard_manifest_files(dir, "shard_").empty())
    throw Error(fmt::format("{}: holds an influence sweep; use another --out folder for the compact-eval study", dir));
  for (const Manifest& m : read_manifests(dir))
    if (m.study.id != study.id)
      throw Error(fmt::format("{}: holds compact-eval shards of study {} (from {}), this run is study {}; settings "
                              "that differ: {}. Use another --out folder",
                              dir, m.study.id, m.path, study.id, differing_settings(m.study.settings, study.settings)));
  CompactEvalShardRun run;
  std::tie(run.begin, run.end) = shard_range(documents.size(), shard);
  const json manifest = {{"version", 1},
                         {"study", study.id},
                         {"shard", {{"index", shard.index}, {"count", shard.count}}},
                         {"documents", {{"begin", run.begin}, {"end", run.end}}},
                         {"settings", study.settings}};
  write_file_atomic((fs::path(dir) / "shards" / fmt::format("{}{}_of_{}.json", kManifestPrefix, shard.index, shard.count))
                        .string(),
                    manifest.dump(1) + "\n");
  const Transformer transformer(model.config, model.weights);
  const std::size_t n_cells = options.methods.size() * options.ratios.size();
  const auto t_start = std::chrono::steady_clock::now();
  bool warned_seq_len = false;
  for (std::size_t d = run.begin; d < run.end; ++d) {
    const std::string path = unit_file(dir, static_cast<int>(d));
    if (fs::exists(path)) {
      (void)read_unit_file(path, study, static_cast<int>(d), n_cells);  // refuses another study's or a broken unit
      ++run.skipped;
      if (options.progress)
        log_line(fmt::format("compact-eval: shard {}/{}: document {} already done", shard.index, shard.count, d + 1));
      continue;
    }
    const CompactEvalUnit u = evaluate_compact_eval_document(model, transformer, documents[d], d, options, warned_seq_len);
    write_file_atomic(path, unit_json(study.id, study.settings.at("input_hashes").at(d).get<std::string>(), u).dump() + "\n");
    ++run.evaluated;
    if (options.progress)
      log_line(fmt::format("compact-eval: shard {}/{}: document {}/{} ({} context + {} continuation tokens), {:.1f} s",
                           shard.index, shard.count, d + 1, documents.size(), u.doc.context_tokens,
                           u.doc.tokens.size() - u.doc.context_tokens,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
  }
  return run;
}

bool has_compact_eval_study(const std::string& dir) { return !read_manifests(dir).empty(); }

CompactEvalMerge merge_compact_eval(const std::string& dir, bool allow_none) {
  const std::vector<Manifest> manifests = read_manifests(dir);
  if (manifests.empty())
    throw Error(fmt::format("{}: no compact-eval shard manifests (shards/{}*.json); was it run with compact-eval --out?",
                            dir, kManifestPrefix));
  CompactEvalMerge out;
  out.study = manifests[0].study;
  for (const Manifest& m : manifests)
    if (m.study.id != out.study.id)
      throw Error(fmt::format("{}: study {} differs from study {} of {} (settings that differ: {}); refusing to mix "
                              "studies",
                              m.path, m.study.id, out.study.id, manifests[0].path,
                              differing_settings(m.study.settings, out.study.settings)));
  const json& s = out.study.settings;
  try {
    out.options.methods.clear();
    for (const json& m : s.at("methods")) out.options.methods.push_back(parse_method_spec(m.get<std::string>()));
    out.options.ratios = s.at("ratios").get<std::vector<double>>();
    out.options.context_frac = s.at("context_frac").get<double>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed compact-eval settings ({})", manifests[0].path, e.what()));
  }
  const std::size_t n_cells = out.options.methods.size() * out.options.ratios.size();
  std::vector<CompactEvalUnit> units;
  for (int d = 0; d < out.study.documents; ++d) {
    const std::string path = unit_file(dir, d);
    if (!fs::exists(path)) {
      out.missing.push_back(d);
      continue;
    }
    units.push_back(read_unit_file(path, out.study, d, n_cells));
  }
  if (units.empty()) {
    if (allow_none) return out;
    throw Error(fmt::format("{}: no finished compact-eval documents to merge", dir));
  }
  out.result = aggregate_compact_eval(out.options, units);
  return out;
}

}  // namespace kvcompact
