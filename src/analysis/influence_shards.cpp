#include "analysis/influence_shards.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "io/atomic_file.h"
#include "core/error.h"
#include "io/json_number.h"
#include "io/json_file.h"
#include "core/model_fingerprint.h"

namespace kvcompact {
namespace fs = std::filesystem;

namespace {

std::string manifest_name(const ShardSpec& s) { return fmt::format("shard_{}_of_{}.json", s.index, s.count); }

}  // namespace

InfluenceStudy make_study(nlohmann::json settings) {
  InfluenceStudy st;
  const std::string text = settings.dump();
  st.id = fmt::format("{:016x}", fnv1a64(text.data(), text.size()));
  try {
    const int L = json_int(settings.at("n_layers"), "study settings", "n_layers"), H = json_int(settings.at("n_kv_heads"), "study settings", "n_kv_heads");
    for (const auto& name : settings.at("heads"))
      st.heads.push_back(parse_head_names(name.get<std::string>(), L, H).at(0));
    st.documents = json_int(settings.at("documents"), "study settings", "documents");
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("study settings: malformed ({})", e.what()));
  }
  st.settings = std::move(settings);
  return st;
}

std::string unit_path(const std::string& dir, int document, const HeadId& head) {
  return (fs::path(dir) / "units" / fmt::format("doc_{:05d}_{}.json", document, head_name(head.layer, head.kv_head)))
      .string();
}

void write_unit(const std::string& path, const InfluenceUnit& u) {
  const nlohmann::json j = {{"version", 1},
                            {"study", u.study},
                            {"document", u.document},
                            {"head", head_name(u.head.layer, u.head.kv_head)},
                            {"context_tokens", u.context_tokens},
                            {"eval_tokens", u.eval_tokens},
                            {"spans", u.spans},
                            {"baseline_nll", u.baseline_nll},
                            {"seconds", u.seconds},
                            {"units", "delta NLL, nats/token"},
                            {"delta", u.delta}};
  write_file_atomic(path, j.dump(1) + "\n");
}

InfluenceUnit read_unit(const std::string& path, const std::string& study, int n_layers, int n_kv_heads) {
  const nlohmann::json j = read_json_file(path);
  try {
    InfluenceUnit u;
    u.study = j.at("study").get<std::string>();
    if (!study.empty() && u.study != study)
      throw Error(fmt::format("{}: belongs to study {}, not {} (different model or settings); use another folder",
                              path, u.study, study));
    u.document = json_int(j.at("document"), path, "document");
    u.head = parse_head_names(j.at("head").get<std::string>(), n_layers, n_kv_heads).at(0);
    u.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
    u.eval_tokens = json_int(j.at("eval_tokens"), path, "eval_tokens");
    u.spans = json_int(j.at("spans"), path, "spans");
    u.baseline_nll = j.at("baseline_nll").get<double>();
    u.seconds = j.value("seconds", 0.0);
    u.delta = j.at("delta").get<std::vector<double>>();
    return u;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed unit file ({})", path, e.what()));
  }
}

namespace {

struct Manifest {
  std::string path;
  InfluenceStudy study;
  ShardSpec shard;
};

std::vector<Manifest> read_manifests(const std::string& dir) {
  std::vector<Manifest> out;
  for (const std::string& f : shard_manifest_files(dir, "shard_")) {
    const nlohmann::json j = read_json_file(f);
    Manifest m;
    m.path = f;
    try {
      m.study = make_study(j.at("settings"));
      if (m.study.id != j.at("study").get<std::string>())
        throw Error(fmt::format("{}: its study id does not match its settings (edited?)", m.path));
      m.shard.index = json_int(j.at("shard").at("index"), m.path, "shard.index");
      m.shard.count = json_int(j.at("shard").at("count"), m.path, "shard.count");
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: malformed shard manifest ({})", m.path, e.what()));
    }
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace

void register_shard(const std::string& dir, const InfluenceStudy& study, const ShardSpec& shard) {
  refuse_other_study_kinds(dir, study_kind("influence"));
  for (const Manifest& m : read_manifests(dir))
    if (m.study.id != study.id)
      throw Error(fmt::format("{}: holds shards of study {} (from {}), this run is study {}; settings that differ: "
                              "{}. Use another --out folder",
                              dir, m.study.id, m.path, study.id, differing_settings(m.study.settings, study.settings)));
  const auto [b, e] = shard_range(static_cast<std::size_t>(study.documents) * study.heads.size(), shard);
  const nlohmann::json j = {{"version", 1},
                            {"study", study.id},
                            {"shard", {{"index", shard.index}, {"count", shard.count}}},
                            {"units", {{"begin", b}, {"end", e}}},
                            {"settings", study.settings}};
  write_file_atomic((fs::path(dir) / "shards" / manifest_name(shard)).string(), j.dump(1) + "\n");
}

StudyStatus study_status(const std::vector<std::string>& dirs) {
  if (dirs.empty()) throw Error("merge: no folder given");
  StudyStatus st;
  st.dirs = dirs;
  std::string first_dir;
  std::vector<Manifest> all;
  for (const auto& dir : dirs) {
    if (!fs::is_directory(dir)) throw Error(fmt::format("{}: no such folder", dir));
    std::vector<Manifest> here = read_manifests(dir);
    if (here.empty() && dirs.size() > 1)
      throw Error(fmt::format("{}: no influence shard manifests (shards/shard_*.json); every folder given to merge "
                              "must be a shard folder of the study",
                              dir));
    for (Manifest& m : here) {
      if (first_dir.empty()) {
        first_dir = m.path;
        st.study = m.study;
      } else if (m.study.id != st.study.id) {
        throw Error(fmt::format("{}: study {} differs from study {} of {} (settings that differ: {}); refusing to "
                                "mix studies",
                                m.path, m.study.id, st.study.id, first_dir,
                                differing_settings(st.study.settings, m.study.settings)));
      }
      all.push_back(std::move(m));
    }
  }
  if (first_dir.empty())
    throw Error(fmt::format("{}: no shard manifests (shards/shard_*.json); was the sweep run with --shard I/N?",
                            dirs[0]));
  const int L = json_int(st.study.settings.at("n_layers"), "study settings", "n_layers"), H = json_int(st.study.settings.at("n_kv_heads"), "study settings", "n_kv_heads");
  const std::size_t nh = st.study.heads.size();
  st.units = static_cast<std::size_t>(st.study.documents) * nh;
  st.unit_files.assign(st.units, "");
  std::vector<bool> done(st.units, false);
  for (std::size_t u = 0; u < st.units; ++u) {
    const int d = static_cast<int>(u / nh);
    const HeadId& h = st.study.heads[u % nh];
    for (const auto& dir : dirs) {
      const std::string p = unit_path(dir, d, h);
      if (!fs::exists(p)) continue;
      const InfluenceUnit unit = read_unit(p, st.study.id, L, H);  // refuses another study's unit
      if (unit.document != d || !(unit.head == h))
        throw Error(fmt::format("{}: holds document {} head {} (renamed?)", p, unit.document + 1,
                                head_name(unit.head.layer, unit.head.kv_head)));
      st.unit_files[u] = p;
      done[u] = true;
      ++st.done;
      break;
    }
    if (!done[u]) st.missing.push_back(fmt::format("doc {} {}", d + 1, head_name(h.layer, h.kv_head)));
  }
  std::sort(all.begin(), all.end(), [](const Manifest& a, const Manifest& b) {
    return std::pair(a.shard.count, a.shard.index) < std::pair(b.shard.count, b.shard.index);
  });
  for (const Manifest& m : all) {
    if (!st.shards.empty() && st.shards.back().shard.count == m.shard.count &&
        st.shards.back().shard.index == m.shard.index)
      continue;  // the same shard in two folders
    ShardStatus s;
    s.shard = m.shard;
    std::tie(s.begin, s.end) = shard_range(st.units, m.shard);
    for (std::size_t u = s.begin; u < s.end; ++u) {
      if (done[u]) ++s.done;
      else s.missing.push_back(fmt::format("doc {} {}", u / nh + 1, head_name(st.study.heads[u % nh].layer,
                                                                                st.study.heads[u % nh].kv_head)));
    }
    st.shards.push_back(std::move(s));
  }
  return st;
}

InfluenceCurves merge_units(const StudyStatus& st) {
  if (st.done == 0) throw Error(fmt::format("{}: no finished units to merge", st.dirs.at(0)));
  const nlohmann::json& s = st.study.settings;
  const int L = json_int(s.at("n_layers"), "study settings", "n_layers"), H = json_int(s.at("n_kv_heads"), "study settings", "n_kv_heads");
  InfluenceCurves curves;
  try {
    curves.model_fingerprint = s.at("model_fingerprint").get<std::string>();
    curves.method = s.at("method").get<std::string>();
    curves.baseline_ratio = s.at("baseline_ratio").get<double>();
    curves.grid = s.at("grid").get<std::vector<double>>();
    curves.n_layers = L;
    curves.n_kv_heads = H;
    curves.evaluated = s.at("evaluated").get<std::string>();
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
    for (int d = 0; d < st.study.documents; ++d) {
      const std::string& p = st.unit_files[static_cast<std::size_t>(d) * nh + k];
      if (p.empty()) continue;
      InfluenceUnit u = read_unit(p, st.study.id, L, H);
      if (u.delta.size() != curves.grid.size())
        throw Error(fmt::format("{}: {} values for a grid of {}", p, u.delta.size(), curves.grid.size()));
      rows.push_back(std::move(u.delta));
    }
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
