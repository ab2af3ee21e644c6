// Sharded influence sweeps (see influence_shards.h).
#include "studies/influence_shards.h"

#include <fmt/format.h>

#include <cmath>

#include "core/error.h"
#include "io/json_number.h"

namespace kvcompact {
namespace {

/// The heads and documents of stored settings (make_unit_study has added its keys already).
InfluenceStudy study_of_unit(UnitStudy unit) {
  InfluenceStudy st;
  const nlohmann::json& s = unit.settings;
  try {
    const int L = json_int(s.at("n_layers"), "study settings", "n_layers");
    const int H = json_int(s.at("n_kv_heads"), "study settings", "n_kv_heads");
    for (const auto& name : s.at("heads")) st.heads.push_back(parse_head_names(name.get<std::string>(), L, H).at(0));
    st.documents = json_int(s.at("documents"), "study settings", "documents");
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("study settings: malformed ({})", e.what()));
  }
  if (st.heads.empty() || st.documents < 1 ||
      static_cast<std::size_t>(unit.units()) != static_cast<std::size_t>(st.documents) * st.heads.size())
    throw Error(fmt::format("study settings: {} units for {} documents x {} heads", unit.units(), st.documents,
                            st.heads.size()));
  st.settings = unit.settings;
  st.id = unit.id;
  st.unit = std::move(unit);
  return st;
}

std::string unit_label(const InfluenceStudy& st, std::size_t u) {
  const HeadId& h = st.heads[u % st.heads.size()];
  return fmt::format("doc {} {}", u / st.heads.size() + 1, head_name(h.layer, h.kv_head));
}

}  // namespace

InfluenceStudy make_study(nlohmann::json settings) {
  std::vector<std::string> names, hashes;
  try {
    const std::vector<std::string> heads = settings.at("heads").get<std::vector<std::string>>();
    const auto input_hashes = settings.at("input_hashes").get<std::vector<std::string>>();
    for (std::size_t d = 0; d < input_hashes.size(); ++d)
      for (const std::string& h : heads) {
        names.push_back(fmt::format("doc_{:05d}_{}", d, h));
        hashes.push_back(input_hashes[d]);
      }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("study settings: malformed ({})", e.what()));
  }
  return study_of_unit(make_unit_study(study_kind("influence"), std::move(settings), std::move(names), std::move(hashes)));
}

nlohmann::json influence_unit_json(const InfluenceUnit& u) {
  return {{"document", u.document},
          {"head", head_name(u.head.layer, u.head.kv_head)},
          {"context_tokens", u.context_tokens},
          {"eval_tokens", u.eval_tokens},
          {"spans", u.spans},
          {"baseline_nll", u.baseline_nll},
          {"seconds", u.seconds},
          {"units", "delta NLL, nats/token"},
          {"delta", u.delta}};
}

InfluenceUnit parse_influence_unit(const nlohmann::json& j, const InfluenceStudy& st, int unit,
                                   const std::string& path) {
  const int L = json_int(st.settings.at("n_layers"), path, "n_layers");
  const int H = json_int(st.settings.at("n_kv_heads"), path, "n_kv_heads");
  const std::size_t grid = st.settings.at("grid").size();
  InfluenceUnit u;
  try {
    u.document = json_int(j.at("document"), path, "document");
    u.head = parse_head_names(j.at("head").get<std::string>(), L, H).at(0);
    u.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
    u.eval_tokens = json_int(j.at("eval_tokens"), path, "eval_tokens");
    u.spans = json_int(j.at("spans"), path, "spans");
    u.baseline_nll = j.at("baseline_nll").get<double>();
    u.seconds = j.value("seconds", 0.0);
    u.delta = j.at("delta").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed unit file ({})", path, e.what()));
  }
  const std::size_t nh = st.heads.size();
  const auto uu = static_cast<std::size_t>(unit);
  if (u.document != static_cast<int>(uu / nh) || !(u.head == st.heads[uu % nh]))
    throw Error(fmt::format("{}: holds document {} head {}, expected {} (renamed?)", path, u.document + 1,
                            head_name(u.head.layer, u.head.kv_head), unit_label(st, uu)));
  if (u.delta.size() != grid)
    throw Error(fmt::format("{}: {} values for a grid of {}", path, u.delta.size(), grid));
  for (double x : u.delta)
    if (!std::isfinite(x)) throw Error(fmt::format("{}: a delta is not finite (edited?); delete it to sweep it again", path));
  if (!std::isfinite(u.baseline_nll) || u.baseline_nll < 0 || u.context_tokens < 1 || u.eval_tokens < 1)
    throw Error(fmt::format("{}: baseline_nll, context_tokens or eval_tokens out of range (edited?)", path));
  return u;
}

StudyStatus study_status(const std::vector<std::string>& dirs) {
  const UnitStudyState us = read_unit_study(dirs, study_kind("influence"));
  StudyStatus st;
  st.dirs = dirs;
  st.study = study_of_unit(us.study);
  st.units = static_cast<std::size_t>(us.study.units());
  st.results.resize(st.units);
  for (std::size_t u = 0; u < st.units; ++u) {
    if (us.results[u].is_null()) {
      st.missing.push_back(unit_label(st.study, u));
      continue;
    }
    st.results[u] = parse_influence_unit(us.results[u], st.study, static_cast<int>(u), us.files[u]);
    ++st.done;
  }
  for (const UnitStudyState::Shard& s : us.shards) {
    ShardStatus ss;
    ss.shard = s.shard;
    ss.begin = s.begin;
    ss.end = s.end;
    ss.done = s.done;
    for (std::size_t u = s.begin; u < s.end; ++u)
      if (!st.results[u]) ss.missing.push_back(unit_label(st.study, u));
    st.shards.push_back(std::move(ss));
  }
  return st;
}

InfluenceCurves merge_units(const StudyStatus& st) {
  if (st.done == 0) throw Error(fmt::format("{}: no finished units to merge", st.dirs.at(0)));
  const nlohmann::json& s = st.study.settings;
  InfluenceCurves curves;
  try {
    curves.model_fingerprint = s.at("model_fingerprint").get<std::string>();
    curves.method = s.at("method").get<std::string>();
    curves.baseline_ratio = s.at("baseline_ratio").get<double>();
    curves.grid = s.at("grid").get<std::vector<double>>();
    curves.n_layers = json_int(s.at("n_layers"), "study settings", "n_layers");
    curves.n_kv_heads = json_int(s.at("n_kv_heads"), "study settings", "n_kv_heads");
    curves.evaluated = s.at("evaluated").get<std::string>();
    if (s.contains("sliding_layers")) curves.sliding_layers = s.at("sliding_layers").get<std::vector<int>>();
    if (!s.at("budgets").is_null()) {
      curves.budget_proportions = s["budgets"].at("proportions").get<std::vector<double>>();
      curves.budgets_source = s["budgets"].at("source").get<std::string>();
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("study settings: malformed ({})", e.what()));
  }
  const std::size_t nh = st.study.heads.size();
  for (std::size_t k = 0; k < nh; ++k) {
    const HeadId& h = st.study.heads[k];
    std::vector<std::vector<double>> rows;
    for (int d = 0; d < st.study.documents; ++d)
      if (const auto& u = st.results[static_cast<std::size_t>(d) * nh + k]) rows.push_back(u->delta);
    if (rows.empty()) continue;
    const CurveStats cs = aggregate_documents(rows);
    HeadCurve hc;
    hc.layer = h.layer;
    hc.kv_head = h.kv_head;
    hc.ratios = curves.grid;
    hc.mean = cs.mean;
    hc.sem = cs.sem;
    hc.std = cs.std;
    hc.documents = cs.documents;
    curves.heads.push_back(std::move(hc));
  }
  return curves;
}

}  // namespace kvcompact
