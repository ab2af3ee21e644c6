// Sharded compact-eval (see compact_eval_shards.h).
#include "studies/compact_eval_shards.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>

#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "io/json_number.h"

namespace kvcompact {
namespace {

using nlohmann::json;

json unit_result(const CompactEvalUnit& u) {
  json cells = json::array();
  for (const CompactEvalCell& c : u.cells) cells.push_back({c.nll, c.bytes, c.full_bytes, c.heads, c.seconds, c.entries});
  return {{"tokens", u.doc.tokens},
          {"context_tokens", u.doc.context_tokens},
          {"full_nll", u.doc.full_nll},
          {"reference_seconds", u.doc.reference_seconds},
          {"cells", cells}};
}


/// A unit's result read back; throws Error naming the file when it is malformed.
CompactEvalUnit parse_unit(const json& j, int document, std::size_t n_cells, const std::string& path) {
  CompactEvalUnit u;
  u.document = document;
  u.doc.tokens = json_int_list(j.at("tokens"), path, "tokens");
  u.doc.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
  u.doc.full_nll = json_unit_number(j.at("full_nll"), path, "full_nll");
  u.doc.reference_seconds = json_unit_number(j.at("reference_seconds"), path, "reference_seconds");
  const json& cells = j.at("cells");
  if (!cells.is_array() || cells.size() != n_cells)
    throw Error(fmt::format("{}: cells: expected {} (methods x ratios) results", path, n_cells));
  for (const json& c : cells) {
    if (!c.is_array() || c.size() != 6) throw Error(fmt::format("{}: cells: expected rows of 6 numbers", path));
    u.cells.push_back({json_unit_number(c[0], path, "cells (nll)"), json_unit_number(c[1], path, "cells (bytes)", true),
                       json_unit_number(c[2], path, "cells (full bytes)", true), json_unit_number(c[3], path, "cells (heads)", true),
                       json_unit_number(c[4], path, "cells (seconds)"), json_unit_number(c[5], path, "cells (entries)", true)});
  }
  if (u.doc.context_tokens < 2 || static_cast<int>(u.doc.tokens.size()) <= u.doc.context_tokens)
    throw Error(fmt::format("{}: context_tokens {} does not fit its {} tokens", path, u.doc.context_tokens,
                            u.doc.tokens.size()));
  return u;
}

UnitResultCheck unit_check(std::size_t n_cells) {
  return [n_cells](const json& r, int unit, const std::string& path) { (void)parse_unit(r, unit, n_cells, path); };
}

}  // namespace

UnitStudy make_compact_eval_study(const Model& model, const std::vector<std::string>& documents,
                                  const CompactEvalOptions& options) {
  std::vector<std::string> methods, names, hashes;
  for (const MethodSpec& m : options.methods) methods.push_back(to_string(m));
  for (std::size_t d = 0; d < documents.size(); ++d) {
    names.push_back(fmt::format("doc_{}", d));
    hashes.push_back(hash_hex(documents[d]));
  }
  json settings = {{"model_fingerprint", fingerprint_hex(model_fingerprint(model.config, model.weights))},
                         {"methods", methods},
                         {"ratios", options.ratios},
                         {"context_frac", options.context_frac},
                         {"context_tokens", options.context_tokens},
                         {"continuation_tokens", options.continuation_tokens},
                         {"seed", options.seed},
                         {"budget_proportions", options.budget_proportions}};
  if (options.max_head_ratio != 1.0) settings["max_head_ratio"] = options.max_head_ratio;  // older studies: no key
  if (options.chunk_size > 0) settings["chunk_size"] = options.chunk_size;
  UnitStudy study = make_unit_study(study_kind("compact-eval"), settings, std::move(names), std::move(hashes));
  study.inputs = {{"model", model.path}};  // for the merged result's header (paths may differ between nodes)
  return study;
}

UnitShardRun run_compact_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                    const CompactEvalOptions& options, const std::string& dir,
                                    const ShardSpec& shard) {
  if (documents.empty()) throw Error("compact-eval: no documents to evaluate");
  validate_compact_eval_options(model, options);
  const UnitStudy study = make_compact_eval_study(model, documents, options);
  const Transformer transformer(model.config, model.weights);
  const auto t_start = std::chrono::steady_clock::now();
  bool warned_seq_len = false;
  const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
  auto evaluate = [&](int d) {
    const CompactEvalUnit u = evaluate_compact_eval_document(model, transformer, documents[d], d, options, warned_seq_len);
    if (options.progress)
      log_line(fmt::format("compact-eval: shard {}/{}: document {}/{} ({} context + {} continuation tokens), {:.1f} s",
                           s.index, s.count, d + 1, documents.size(), u.doc.context_tokens,
                           u.doc.tokens.size() - u.doc.context_tokens,
                           std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count()));
    return unit_result(u);
  };
  return run_unit_shard(dir, study, shard, evaluate, unit_check(options.methods.size() * options.ratios.size()),
                        options.progress);
}

CompactEvalMerge merge_compact_eval(const std::string& dir, bool allow_none) {
  // Read without a result check: the study's settings tell how many cells a unit holds.
  const UnitStudyState state = read_unit_study(dir, study_kind("compact-eval"));
  CompactEvalMerge out;
  out.study = state.study;
  const json& s = out.study.settings;
  try {
    out.options.methods.clear();
    for (const json& m : s.at("methods")) out.options.methods.push_back(parse_method_spec(m.get<std::string>()));
    out.options.ratios = s.at("ratios").get<std::vector<double>>();
    out.options.context_frac = s.at("context_frac").get<double>();
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed compact-eval settings ({})", dir, e.what()));
  }
  const std::size_t n_cells = out.options.methods.size() * out.options.ratios.size();
  std::vector<CompactEvalUnit> units;
  for (int d = 0; d < out.study.units(); ++d) {
    const json& r = state.results[static_cast<std::size_t>(d)];
    if (r.is_null()) {
      out.missing.push_back(d);
      continue;
    }
    const std::string path = unit_study_path(dir, out.study, d);
    try {
      units.push_back(parse_unit(r, d, n_cells, path));
    } catch (const json::exception& e) {
      throw Error(fmt::format("{}: malformed compact-eval result ({}); delete it to have document {} evaluated again",
                              path, e.what(), d + 1));
    }
  }
  if (units.empty()) {
    if (allow_none) return out;
    throw Error(fmt::format("{}: no finished compact-eval documents to merge", dir));
  }
  out.result = aggregate_compact_eval(out.options, units);
  return out;
}

}  // namespace kvcompact
