#include "budgets/influence_curves.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "metrics/mean_sem.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "core/error.h"

namespace kvcompact {
namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  std::size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (true) {
    std::size_t p = s.find(sep, start);
    out.push_back(trim(s.substr(start, p == std::string::npos ? std::string::npos : p - start)));
    if (p == std::string::npos) break;
    start = p + 1;
  }
  return out;
}

// Whole-token parse of a non-negative decimal integer; false when not one.
bool parse_int(const std::string& s, int& out) {
  if (s.empty()) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool parse_double(const std::string& s, double& out) {
  if (s.empty()) return false;
  const char* b = s.data();
  if (*b == '+') ++b;
  auto [p, ec] = std::from_chars(b, s.data() + s.size(), out);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(out);
}

void check_ratio_list(const std::vector<double>& v, const std::string& what) {
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i]) || v[i] < 0.0 || v[i] > 1.0)
      throw Error(fmt::format("{}: value {} is outside [0, 1]", what, v[i]));
    if (i > 0 && !(v[i] > v[i - 1]))
      throw Error(fmt::format("{}: values must be strictly increasing ({} then {})", what, v[i - 1], v[i]));
  }
}

// JSON field access with errors "<source>: <path>.<key>: <problem>"; `path` is "" at the top.
struct Where {
  const std::string& source;
  std::string path;
  std::string name(const char* key) const { return path.empty() ? key : path + "." + key; }
};

const nlohmann::json& field(const nlohmann::json& obj, const char* key, const Where& w) {
  if (!obj.is_object())
    throw Error(fmt::format("{}: {}: not a JSON object", w.source, w.path.empty() ? "top level" : w.path));
  auto it = obj.find(key);
  if (it == obj.end()) throw Error(fmt::format("{}: {}: missing", w.source, w.name(key)));
  return *it;
}

std::string get_string(const nlohmann::json& obj, const char* key, const Where& w) {
  const auto& v = field(obj, key, w);
  if (!v.is_string()) throw Error(fmt::format("{}: {}: expected a string", w.source, w.name(key)));
  return v.get<std::string>();
}

double get_number(const nlohmann::json& obj, const char* key, const Where& w) {
  const auto& v = field(obj, key, w);
  if (!v.is_number()) throw Error(fmt::format("{}: {}: expected a number", w.source, w.name(key)));
  return v.get<double>();
}

int get_int(const nlohmann::json& obj, const char* key, const Where& w) {
  const auto& v = field(obj, key, w);
  if (!v.is_number_integer()) throw Error(fmt::format("{}: {}: expected an integer", w.source, w.name(key)));
  const long long x = v.is_number_unsigned() && v.get<unsigned long long>() > 1000000000ULL
                          ? 1000000001LL
                          : v.get<long long>();
  if (x < -1000000000LL || x > 1000000000LL)
    throw Error(fmt::format("{}: {}: integer out of range", w.source, w.name(key)));
  return static_cast<int>(x);
}

std::vector<double> get_numbers(const nlohmann::json& obj, const char* key, const Where& w) {
  const auto& v = field(obj, key, w);
  if (!v.is_array()) throw Error(fmt::format("{}: {}: expected an array of numbers", w.source, w.name(key)));
  std::vector<double> out;
  out.reserve(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_number())
      throw Error(fmt::format("{}: {}[{}]: expected a number (null stands for NaN/inf, not allowed)", w.source,
                              w.name(key), i));
    out.push_back(v[i].get<double>());
  }
  return out;
}

}  // namespace

std::string head_name(int layer, int kv_head) { return fmt::format("L{}H{}", layer, kv_head); }

const HeadCurve* InfluenceCurves::find(int layer, int kv_head) const {
  for (const auto& h : heads)
    if (h.layer == layer && h.kv_head == kv_head) return &h;
  return nullptr;
}

std::vector<HeadId> parse_head_names(const std::string& spec, int n_layers, int n_kv_heads) {
  if (n_layers < 1 || n_kv_heads < 1)
    throw Error(fmt::format("--heads: model has {} layers and {} KV heads", n_layers, n_kv_heads));
  std::vector<HeadId> out;
  if (trim(spec) == "all") {
    for (int l = 0; l < n_layers; ++l)
      for (int h = 0; h < n_kv_heads; ++h) out.push_back({l, h});
    return out;
  }
  std::set<std::pair<int, int>> seen;
  for (const std::string& tok : split(spec, ',')) {
    const std::size_t hpos = tok.find('H');
    int l = -1, h = -1;
    if (tok.size() < 4 || tok[0] != 'L' || hpos == std::string::npos ||
        !parse_int(tok.substr(1, hpos - 1), l) || !parse_int(tok.substr(hpos + 1), h))
      throw Error(fmt::format("--heads: bad head name '{}' (expected L<layer>H<kv_head>, e.g. L0H1, or 'all')", tok));
    if (l >= n_layers || h >= n_kv_heads)
      throw Error(fmt::format("--heads: head '{}' does not exist (model has {} layers x {} KV heads)", tok,
                              n_layers, n_kv_heads));
    if (!seen.insert({l, h}).second) throw Error(fmt::format("--heads: head '{}' listed twice", tok));
    out.push_back({l, h});
  }
  return out;
}

std::vector<double> parse_ratio_grid(const std::string& spec) {
  const std::string what = fmt::format("--ratios '{}'", spec);
  std::vector<double> grid;
  if (spec.find(':') != std::string::npos) {
    auto parts = split(spec, ':');
    double a = 0, b = 0;
    int n = 0;
    if (parts.size() != 3 || !parse_double(parts[0], a) || !parse_double(parts[1], b) ||
        !parse_int(parts[2], n))
      throw Error(fmt::format("{}: expected start:stop:count, e.g. 0:0.5:51", what));
    if (n < 1 || n > 100001) throw Error(fmt::format("{}: count must be in [1, 100001]", what));
    if (n == 1) {
      if (a != b) throw Error(fmt::format("{}: count 1 needs start == stop", what));
      grid.push_back(a);
    } else {
      for (int i = 0; i < n; ++i)
        grid.push_back(i == n - 1 ? b : a + (b - a) * static_cast<double>(i) / (n - 1));
    }
  } else {
    for (const std::string& tok : split(spec, ',')) {
      double v = 0;
      if (!parse_double(tok, v)) throw Error(fmt::format("{}: '{}' is not a number", what, tok));
      grid.push_back(v);
    }
  }
  check_ratio_list(grid, what);
  return grid;
}

std::size_t baseline_index(double baseline, const std::vector<double>& grid) {
  for (std::size_t i = 0; i < grid.size(); ++i)
    if (std::fabs(grid[i] - baseline) <= 1e-9) return i;
  throw Error(fmt::format("--baseline {}: not on the ratio grid (add it to --ratios)", baseline));
}

CurveStats aggregate_documents(const std::vector<std::vector<double>>& per_document) {
  if (per_document.empty()) throw Error("aggregate_documents: no documents");
  const std::size_t n = per_document[0].size();
  if (n == 0) throw Error("aggregate_documents: document 1 has no values");
  for (std::size_t d = 0; d < per_document.size(); ++d) {
    if (per_document[d].size() != n)
      throw Error(fmt::format("aggregate_documents: document {} has {} values, document 1 has {}", d + 1,
                              per_document[d].size(), n));
    for (std::size_t i = 0; i < n; ++i)
      if (!std::isfinite(per_document[d][i]))
        throw Error(fmt::format("aggregate_documents: document {} value {} is not finite", d + 1, i + 1));
  }
  const std::size_t docs = per_document.size();
  CurveStats s;
  s.documents = static_cast<int>(docs);
  s.mean.assign(n, 0.0);
  s.sem.assign(n, 0.0);
  s.std.assign(n, 0.0);
  std::vector<double> column(docs);
  for (std::size_t i = 0; i < n; ++i) {
    for (std::size_t d = 0; d < docs; ++d) column[d] = per_document[d][i];
    const MeanSem m = mean_sem(column);
    s.mean[i] = m.mean, s.std[i] = m.std, s.sem[i] = m.sem;
  }
  return s;
}

bool InfluenceCurves::sliding(int layer) const {
  return std::find(sliding_layers.begin(), sliding_layers.end(), layer) != sliding_layers.end();
}

void check_sliding_layers(const std::vector<int>& layers, int n_layers, const std::string& where) {
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (layers[i] < 0 || layers[i] >= n_layers)
      throw Error(fmt::format("{}: layer {} does not exist ({} layers)", where, layers[i], n_layers));
    if (i > 0 && layers[i] <= layers[i - 1])
      throw Error(fmt::format("{}: layers must be ascending and distinct ({} after {})", where, layers[i], layers[i - 1]));
  }
  if (n_layers > 0 && static_cast<int>(layers.size()) == n_layers)
    throw Error(fmt::format("{}: every layer is a sliding-window layer (none is compacted)", where));
}

void validate_influence_curves(const InfluenceCurves& c, const std::string& source) {
  if (c.n_layers < 1) throw Error(fmt::format("{}: n_layers: must be >= 1, got {}", source, c.n_layers));
  if (c.n_kv_heads < 1) throw Error(fmt::format("{}: n_kv_heads: must be >= 1, got {}", source, c.n_kv_heads));
  if (c.grid.empty()) throw Error(fmt::format("{}: grid: empty", source));
  check_ratio_list(c.grid, fmt::format("{}: grid", source));
  if (!std::isfinite(c.baseline_ratio))
    throw Error(fmt::format("{}: baseline_ratio: not finite", source));
  bool on_grid = false;
  for (double g : c.grid) on_grid = on_grid || std::fabs(g - c.baseline_ratio) <= 1e-9;
  if (!on_grid) throw Error(fmt::format("{}: baseline_ratio: {} is not on the grid", source, c.baseline_ratio));
  check_sliding_layers(c.sliding_layers, c.n_layers, source + ": sliding_layers");
  std::set<std::pair<int, int>> seen;
  for (std::size_t i = 0; i < c.heads.size(); ++i) {
    const HeadCurve& h = c.heads[i];
    const std::string where = fmt::format("{}: heads[{}]", source, i);
    if (h.layer < 0 || h.layer >= c.n_layers || h.kv_head < 0 || h.kv_head >= c.n_kv_heads)
      throw Error(fmt::format("{}: head {} does not exist ({} layers x {} KV heads)", where, h.name(),
                              c.n_layers, c.n_kv_heads));
    if (!seen.insert({h.layer, h.kv_head}).second)
      throw Error(fmt::format("{}: head {} appears twice", where, h.name()));
    if (c.sliding(h.layer))
      throw Error(fmt::format("{}: head {} is in sliding-window layer {}, which is never compacted", where, h.name(),
                              h.layer));
    if (h.ratios.empty()) throw Error(fmt::format("{}.ratios: empty", where));
    check_ratio_list(h.ratios, where + ".ratios");
    if (h.mean.size() != h.ratios.size() || h.sem.size() != h.ratios.size() || h.std.size() != h.ratios.size())
      throw Error(fmt::format("{}: ratios, delta_nll_mean, delta_nll_sem, delta_nll_std have lengths {}, {}, {}, {}",
                              where, h.ratios.size(), h.mean.size(), h.sem.size(), h.std.size()));
    for (std::size_t k = 0; k < h.ratios.size(); ++k) {
      if (!std::isfinite(h.mean[k]))
        throw Error(fmt::format("{}.delta_nll_mean[{}]: not finite", where, k));
      if (!std::isfinite(h.sem[k]) || h.sem[k] < 0)
        throw Error(fmt::format("{}.delta_nll_sem[{}]: must be finite and >= 0", where, k));
      if (!std::isfinite(h.std[k]) || h.std[k] < 0)
        throw Error(fmt::format("{}.delta_nll_std[{}]: must be finite and >= 0", where, k));
    }
    if (h.documents < 1) throw Error(fmt::format("{}.documents: must be >= 1, got {}", where, h.documents));
  }
}

nlohmann::json influence_curves_to_json(const InfluenceCurves& c) {
  validate_influence_curves(c, "influence curves");
  nlohmann::json j;
  j["model_fingerprint"] = c.model_fingerprint;
  j["method"] = c.method;
  j["baseline_ratio"] = c.baseline_ratio;
  j["grid"] = c.grid;
  j["n_layers"] = c.n_layers;
  j["n_kv_heads"] = c.n_kv_heads;
  j["evaluated"] = c.evaluated;
  if (!c.sliding_layers.empty()) j["sliding_layers"] = c.sliding_layers;
  j["budgets"] = c.budget_proportions.empty()
                     ? nlohmann::json(nullptr)
                     : nlohmann::json{{"source", c.budgets_source}, {"proportions", c.budget_proportions}};
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& h : c.heads) {
    heads.push_back({{"name", h.name()},
                     {"layer", h.layer},
                     {"kv_head", h.kv_head},
                     {"ratios", h.ratios},
                     {"delta_nll_mean", h.mean},
                     {"delta_nll_sem", h.sem},
                     {"delta_nll_std", h.std},
                     {"documents", h.documents}});
  }
  j["heads"] = std::move(heads);
  return j;
}

InfluenceCurves influence_curves_from_json(const nlohmann::json& j, const std::string& source) {
  const Where top{source, ""};
  InfluenceCurves c;
  c.model_fingerprint = get_string(j, "model_fingerprint", top);
  c.method = get_string(j, "method", top);
  c.baseline_ratio = get_number(j, "baseline_ratio", top);
  c.grid = get_numbers(j, "grid", top);
  c.n_layers = get_int(j, "n_layers", top);
  c.n_kv_heads = get_int(j, "n_kv_heads", top);
  if (j.contains("evaluated")) c.evaluated = get_string(j, "evaluated", top);
  if (j.contains("sliding_layers"))
    for (double l : get_numbers(j, "sliding_layers", top)) {
      if (l != std::floor(l) || std::fabs(l) > 1e6)
        throw Error(fmt::format("{}: sliding_layers: {} is not a layer index", source, l));
      c.sliding_layers.push_back(static_cast<int>(l));
    }
  if (j.contains("budgets") && !j["budgets"].is_null()) {
    const Where w{source, "budgets"};
    c.budget_proportions = get_numbers(j["budgets"], "proportions", w);
    if (j["budgets"].contains("source")) c.budgets_source = get_string(j["budgets"], "source", w);
    if (static_cast<long long>(c.budget_proportions.size()) != static_cast<long long>(c.n_layers) * c.n_kv_heads)
      throw Error(fmt::format("{}: budgets.proportions: {} values for {} heads", source, c.budget_proportions.size(),
                              static_cast<long long>(c.n_layers) * c.n_kv_heads));
  }
  const auto& heads = field(j, "heads", top);
  if (!heads.is_array()) throw Error(fmt::format("{}: heads: expected an array", source));
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const Where w{source, fmt::format("heads[{}]", i)};
    HeadCurve h;
    h.layer = get_int(heads[i], "layer", w);
    h.kv_head = get_int(heads[i], "kv_head", w);
    const std::string name = get_string(heads[i], "name", w);
    if (name != h.name())
      throw Error(fmt::format("{}: {}: '{}' does not match layer {} kv_head {}", source, w.name("name"), name,
                              h.layer, h.kv_head));
    h.ratios = get_numbers(heads[i], "ratios", w);
    h.mean = get_numbers(heads[i], "delta_nll_mean", w);
    h.sem = get_numbers(heads[i], "delta_nll_sem", w);
    h.std = get_numbers(heads[i], "delta_nll_std", w);
    h.documents = get_int(heads[i], "documents", w);
    c.heads.push_back(std::move(h));
  }
  validate_influence_curves(c, source);
  return c;
}

void write_influence_curves_json(const std::string& path, const InfluenceCurves& curves) {
  write_file_atomic(path, influence_curves_to_json(curves).dump(2) + "\n");
}

InfluenceCurves read_influence_curves_json(const std::string& path) {
  return influence_curves_from_json(read_json_file(path), path);
}

std::string influence_curves_csv(const InfluenceCurves& c) {
  validate_influence_curves(c, "influence curves");
  std::string out = "head,layer,kv_head,ratio,delta_nll_mean,delta_nll_sem,delta_nll_std,documents\n";
  for (const auto& h : c.heads)
    for (std::size_t k = 0; k < h.ratios.size(); ++k)
      out += fmt::format("{},{},{},{},{},{},{},{}\n", h.name(), h.layer, h.kv_head, h.ratios[k], h.mean[k],
                         h.sem[k], h.std[k], h.documents);
  return out;
}

void write_influence_curves_csv(const std::string& path, const InfluenceCurves& curves) {
  write_file_atomic(path, influence_curves_csv(curves));
}

}  // namespace kvcompact
