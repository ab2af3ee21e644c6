// The budget-eval series (see budget_eval.h).
#include "studies/budget_eval.h"

#include <fmt/format.h>

#include <filesystem>

#include "studies/compact_eval_shards.h"
#include "core/error.h"
#include "core/log.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string series_dir(const std::string& dir, std::size_t k) {
  return (fs::path(dir) / fmt::format("series_{}", k)).string();
}

/// The series of a budget-eval: label, source and the id of its compact-eval study (which holds
/// every setting, the proportions and the documents), so that a merge never takes another
/// study's series folder.
json series_json(const Model& model, const std::vector<std::string>& documents, const CompactEvalOptions& base,
                 const std::vector<BudgetEvalSeries>& series) {
  json out = json::array();
  for (const BudgetEvalSeries& s : series) {
    CompactEvalOptions opt = base;
    opt.budget_proportions = s.proportions;
    out.push_back({{"label", s.label}, {"source", s.source}, {"study", make_compact_eval_study(model, documents, opt).id}});
  }
  return out;
}

}  // namespace

BudgetEvalResult run_budget_eval(const Model& model, const std::vector<std::string>& documents,
                                 const CompactEvalOptions& base, const std::vector<BudgetEvalSeries>& series) {
  BudgetEvalResult out;
  out.series = series;
  for (const BudgetEvalSeries& s : series) {
    CompactEvalOptions opt = base;
    opt.budget_proportions = s.proportions;
    opt.progress = false;
    log_line(fmt::format("budget-eval: {} on {} documents", s.label, documents.size()));
    out.results.push_back(run_compact_eval(model, documents, opt));
  }
  return out;
}

BudgetEvalResult run_budget_eval_shard(const Model& model, const std::vector<std::string>& documents,
                                       const CompactEvalOptions& base, const std::vector<BudgetEvalSeries>& series,
                                       const json& header, const std::string& dir, const ShardSpec& shard_in) {
  if (series.empty()) throw Error("budget-eval: no series to run");
  const ShardSpec shard = shard_in.active() ? shard_in : ShardSpec{0, 1};
  const StudyKind& kind = study_kind("budget-eval");
  refuse_other_study_kinds(dir, kind);
  const json settings = {{"series", series_json(model, documents, base, series)}};
  for (const std::string& f : shard_manifest_files(dir, kind.manifest_prefix())) {
    const json m = read_json_file(f);
    if (m.value("settings", json()) != settings)
      throw Error(fmt::format("{}: holds a budget-eval of other series ({}); use another --out folder", f,
                              m.value("settings", json()).dump()));
  }
  write_file_atomic((fs::path(dir) / "shards" /
                     fmt::format("{}{}_of_{}.json", kind.manifest_prefix(), shard.index, shard.count))
                        .string(),
                    json{{"version", 1}, {"shard", {{"index", shard.index}, {"count", shard.count}}},
                         {"settings", settings}, {"header", header}}
                            .dump(1) + "\n");
  for (std::size_t k = 0; k < series.size(); ++k) {
    CompactEvalOptions opt = base;
    opt.budget_proportions = series[k].proportions;
    log_line(fmt::format("budget-eval: shard {}/{}: series {} ({})", shard.index, shard.count, k, series[k].label));
    (void)run_compact_eval_shard(model, documents, opt, series_dir(dir, k), shard);
  }
  return merge_budget_eval(dir);
}

BudgetEvalResult merge_budget_eval(const std::string& dir, json* header) {
  const StudyKind& kind = study_kind("budget-eval");
  refuse_other_study_kinds(dir, kind);
  const std::vector<std::string> files = shard_manifest_files(dir, kind.manifest_prefix());
  if (files.empty())
    throw Error(fmt::format("{}: no budget-eval shard manifests (shards/{}*.json); was it run with budget-eval --out?",
                            dir, kind.manifest_prefix()));
  const json first = read_json_file(files[0]);
  BudgetEvalResult out;
  std::vector<std::string> studies;  // [series]: the compact-eval study each series folder must hold
  try {
    for (const std::string& f : files)
      if (read_json_file(f).at("settings") != first.at("settings"))
        throw Error(fmt::format("{}: its series differ from {}'s; refusing to mix studies", f, files[0]));
    for (const json& s : first.at("settings").at("series")) {
      out.series.push_back({s.at("label").get<std::string>(), s.at("source").get<std::string>(), {}});
      studies.push_back(s.at("study").get<std::string>());
    }
    if (header != nullptr) *header = first.at("header");
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: malformed budget-eval manifest ({})", files[0], e.what()));
  }
  std::vector<CompactEvalResult> results;
  for (std::size_t k = 0; k < out.series.size(); ++k) {
    if (study_kind_in(series_dir(dir, k)) == nullptr) {  // no shard reached this series yet
      out.missing.push_back(fmt::format("series_{} ({}): not started", k, out.series[k].label));
      results.emplace_back();
      continue;
    }
    const CompactEvalMerge m = merge_compact_eval(series_dir(dir, k), /*allow_none=*/true);
    if (m.study.id != studies[k])
      throw Error(fmt::format("{}: holds compact-eval study {}, but series {} ({}) of this budget-eval is study {} "
                              "(a series folder from another study?); refusing to mix studies",
                              series_dir(dir, k), m.study.id, k, out.series[k].label, studies[k]));
    if (!m.missing.empty()) {
      std::string docs;
      for (int d : m.missing) docs += fmt::format(" {}", d + 1);
      out.missing.push_back(fmt::format("series_{} ({}): documents{}", k, out.series[k].label, docs));
    }
    results.push_back(m.result);
  }
  if (out.missing.empty()) out.results = std::move(results);
  return out;
}

}  // namespace kvcompact
