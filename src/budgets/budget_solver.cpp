#include "budgets/budget_solver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <numeric>
#include <set>

#include "io/atomic_file.h"
#include "io/json_file.h"
#include "compaction/token_eviction.h"
#include "core/error.h"

namespace kvcompact {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

void check_sizes(int n_layers, int n_kv_heads, const char* what) {
  if (n_layers < 1 || n_kv_heads < 1)
    throw Error(fmt::format("{}: need n_layers >= 1 and n_kv_heads >= 1, got {} and {}", what, n_layers, n_kv_heads));
  // Real models have at most a few hundred layers and KV heads; a larger grid is a typo.
  if (n_layers > 4096 || n_kv_heads > 4096)
    throw Error(fmt::format("{}: {} layers x {} KV heads is beyond any model (at most 4096 each)", what, n_layers,
                            n_kv_heads));
}

void check_targets(const std::vector<double>& targets, const char* what) {
  if (targets.empty()) throw Error(fmt::format("{}: no target ratios", what));
  for (double r : targets)
    if (!std::isfinite(r) || r <= 0.0 || r > 1.0)
      throw Error(fmt::format("{}: target ratio {} (--targets) is outside (0, 1]", what, r));
}

bool contains(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// The heads of the layers not in `sliding`, layer-major, with p[k] the proportion of the k-th.
std::vector<HeadBudget> layer_major_heads(int n_layers, int n_kv_heads, const std::vector<double>& p,
                                          const std::vector<int>& sliding = {}) {
  std::vector<HeadBudget> heads;
  std::size_t k = 0;
  for (int l = 0; l < n_layers; ++l)
    if (!contains(sliding, l))
      for (int h = 0; h < n_kv_heads; ++h) heads.push_back({l, h, p.at(k++)});
  return heads;
}

int compacted_head_count(int n_layers, int n_kv_heads, const std::vector<int>& sliding) {
  return (n_layers - static_cast<int>(sliding.size())) * n_kv_heads;
}

// Curves of the compacted heads (layers not in curves.sliding_layers) in layer-major order;
// throws when one is missing.
std::vector<const HeadCurve*> curves_by_head(const InfluenceCurves& curves) {
  std::vector<const HeadCurve*> out;
  for (int l = 0; l < curves.n_layers; ++l)
    for (int h = 0; h < curves.n_kv_heads && !curves.sliding(l); ++h) {
      const HeadCurve* c = curves.find(l, h);
      if (!c)
        throw Error(fmt::format("influence curves: head {} has no curve (the budget solver needs all {} heads; "
                                "sweep with --heads all)",
                                head_name(l, h), compacted_head_count(curves.n_layers, curves.n_kv_heads,
                                                                      curves.sliding_layers)));
      out.push_back(c);
    }
  return out;
}

std::string ratio_key(double r) { return fmt::format("{}", r); }

}  // namespace

double interpolate_curve(const HeadCurve& curve, double r) {
  const auto& x = curve.ratios;
  const auto& y = curve.mean;
  if (x.empty() || y.size() != x.size())
    throw Error(fmt::format("influence curve {}: {} ratios and {} values", curve.name(), x.size(), y.size()));
  if (!std::isfinite(r)) throw Error(fmt::format("influence curve {}: ratio {} is not finite", curve.name(), r));
  if (r <= x.front()) return y.front();
  if (r >= x.back()) return y.back();
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(x.begin(), x.end(), r) - x.begin());  // x[i-1] <= r < x[i]
  const double t = (r - x[i - 1]) / (x[i] - x[i - 1]);
  return y[i - 1] + t * (y[i] - y[i - 1]);
}

bool BudgetSchedule::sliding(int layer) const { return contains(sliding_layers, layer); }

std::vector<double> BudgetSchedule::proportions() const {
  std::vector<double> p(static_cast<std::size_t>(std::max(0, n_layers * n_kv_heads)), -1.0);
  for (const auto& h : heads) {
    if (h.layer < 0 || h.layer >= n_layers || h.kv_head < 0 || h.kv_head >= n_kv_heads)
      throw Error(fmt::format("budget schedule: head {} out of range", h.name()));
    if (sliding(h.layer))
      throw Error(fmt::format("budget schedule: head {} is in sliding-window layer {}", h.name(), h.layer));
    p[static_cast<std::size_t>(h.layer * n_kv_heads + h.kv_head)] = h.proportion;
  }
  for (int l : sliding_layers)
    for (int h = 0; h < n_kv_heads && l >= 0 && l < n_layers; ++h) p[static_cast<std::size_t>(l * n_kv_heads + h)] = 0.0;
  for (std::size_t i = 0; i < p.size(); ++i)
    if (p[i] < 0)
      throw Error(fmt::format("budget schedule: head {} missing",
                              head_name(static_cast<int>(i) / n_kv_heads, static_cast<int>(i) % n_kv_heads)));
  return p;
}

std::vector<int> solve_separable_allocation(const std::vector<std::vector<double>>& cost, int total_units,
                                            int min_units, double* best_cost) {
  const int H = static_cast<int>(cost.size());
  if (H == 0) throw Error("budget solver: no heads");
  if (total_units < 0 || min_units < 0)
    throw Error(fmt::format("budget solver: bad units (total {}, minimum {})", total_units, min_units));
  if (static_cast<long long>(H) * min_units > total_units)
    throw Error(fmt::format("budget solver: {} heads x {} minimum units exceed the {} units available", H, min_units,
                            total_units));
  const std::size_t N = static_cast<std::size_t>(total_units);
  for (int h = 0; h < H; ++h) {
    if (cost[h].size() != N + 1)
      throw Error(fmt::format("budget solver: cost row {} has {} entries, expected {}", h, cost[h].size(), N + 1));
    for (double c : cost[h])
      if (!std::isfinite(c)) throw Error(fmt::format("budget solver: cost row {} has a non-finite entry", h));
  }
  // f[j]: best cost of heads 0..k using exactly j units; choice[k][j]: units of head k there.
  std::vector<double> f(N + 1, kInf), g(N + 1, kInf);
  std::vector<std::vector<int>> choice(static_cast<std::size_t>(H), std::vector<int>(N + 1, -1));
  const int m = min_units;
  for (int j = m; j <= total_units; ++j) {
    f[static_cast<std::size_t>(j)] = cost[0][static_cast<std::size_t>(j)];
    choice[0][static_cast<std::size_t>(j)] = j;
  }
  for (int k = 1; k < H; ++k) {
    const auto& ck = cost[static_cast<std::size_t>(k)];
    auto& chk = choice[static_cast<std::size_t>(k)];
    const int lo = (k + 1) * m;                      // heads 0..k hold at least (k+1) m units
    const int hi = total_units - (H - 1 - k) * m;    // and leave the rest their minimum
    std::fill(g.begin(), g.end(), kInf);
#pragma omp parallel for schedule(dynamic, 64) if (static_cast<long long>(hi - lo) * total_units > 4000000LL)
    for (int j = lo; j <= hi; ++j) {
      double best = kInf;
      int arg = -1;
      for (int u = m; u <= j - k * m; ++u) {
        const double prev = f[static_cast<std::size_t>(j - u)];
        if (prev == kInf) continue;
        const double v = prev + ck[static_cast<std::size_t>(u)];
        if (v < best) {
          best = v;
          arg = u;
        }
      }
      g[static_cast<std::size_t>(j)] = best;
      chk[static_cast<std::size_t>(j)] = arg;
    }
    std::swap(f, g);
  }
  std::vector<int> units(static_cast<std::size_t>(H));
  int j = total_units;
  for (int k = H - 1; k >= 0; --k) {
    const int u = choice[static_cast<std::size_t>(k)][static_cast<std::size_t>(j)];
    if (u < 0) throw Error("budget solver: internal error (no feasible allocation)");
    units[static_cast<std::size_t>(k)] = u;
    j -= u;
  }
  if (best_cost) *best_cost = f[N];
  return units;
}

std::vector<double> predict_delta(const std::vector<double>& proportions, const InfluenceCurves& curves,
                                  const std::vector<double>& targets) {
  const auto heads = curves_by_head(curves);
  const std::size_t H = heads.size();
  const std::size_t all = static_cast<std::size_t>(curves.n_layers) * static_cast<std::size_t>(curves.n_kv_heads);
  if (proportions.size() != all)
    throw Error(fmt::format("predict_delta: {} proportions for {} heads", proportions.size(), all));
  check_targets(targets, "predict_delta");
  std::vector<double> out;
  for (double R : targets) {
    double d = 0;
    for (std::size_t h = 0; h < H; ++h) {
      const double p = proportions[static_cast<std::size_t>(heads[h]->layer * curves.n_kv_heads + heads[h]->kv_head)];
      d += interpolate_curve(*heads[h], std::min(1.0, p * static_cast<double>(H) * R));
    }
    out.push_back(d);
  }
  return out;
}

void set_predicted_delta(BudgetSchedule& s, const InfluenceCurves& curves) {
  if (curves.n_layers != s.n_layers || curves.n_kv_heads != s.n_kv_heads)
    throw Error(fmt::format("influence curves ({} x {} heads) do not match the schedule ({} x {} heads)",
                            curves.n_layers, curves.n_kv_heads, s.n_layers, s.n_kv_heads));
  if (curves.sliding_layers != s.sliding_layers)
    throw Error(fmt::format("influence curves (sliding layers [{}]) do not match the schedule (sliding layers [{}])",
                            fmt::join(curves.sliding_layers, ","), fmt::join(s.sliding_layers, ",")));
  const auto d = predict_delta(s.proportions(), curves, s.targets);
  s.predicted_delta.clear();
  for (std::size_t k = 0; k < d.size(); ++k) s.predicted_delta.emplace_back(s.targets[k], d[k]);
}

BudgetSchedule optimize_budgets(const InfluenceCurves& curves, const BudgetSolverOptions& o) {
  check_sizes(curves.n_layers, curves.n_kv_heads, "optimize_budgets");
  check_targets(o.targets, "optimize_budgets");
  if (!std::isfinite(o.floor) || o.floor < 0.0 || o.floor > 1.0)
    throw Error(fmt::format("--floor {}: must be in [0, 1]", o.floor));
  if (o.units < 1) throw Error(fmt::format("--units {}: must be >= 1", o.units));
  if (!curves.budget_proportions.empty())
    throw Error(fmt::format(
        "optimize_budgets: the curves were swept around per-head budgets ({}), not a uniform "
        "baseline; the additive model needs curves from `influence` without --budgets",
        curves.budgets_source.empty() ? "influence --budgets" : curves.budgets_source));
  const auto heads = curves_by_head(curves);
  const int H = static_cast<int>(heads.size());
  const long long N_ll = static_cast<long long>(H) * o.units;
  if (N_ll > 2000000) throw Error(fmt::format("--units {}: {} heads x units is too large to solve", o.units, H));
  const int N = static_cast<int>(N_ll);
  const int m = std::min(o.units, static_cast<int>(std::ceil(o.floor * o.units - 1e-9)));
  const double U = o.units;
  std::vector<std::vector<double>> cost(static_cast<std::size_t>(H), std::vector<double>(static_cast<std::size_t>(N) + 1));
  for (int h = 0; h < H; ++h)
    for (int u = 0; u <= N; ++u) {
      double c = 0;
      for (double R : o.targets) c += interpolate_curve(*heads[static_cast<std::size_t>(h)], std::min(1.0, u * R / U));
      cost[static_cast<std::size_t>(h)][static_cast<std::size_t>(u)] = c / static_cast<double>(o.targets.size());
    }
  const auto units = solve_separable_allocation(cost, N, m);
  std::vector<double> p(static_cast<std::size_t>(H));
  for (int h = 0; h < H; ++h) p[static_cast<std::size_t>(h)] = static_cast<double>(units[static_cast<std::size_t>(h)]) / N;
  BudgetSchedule s;
  s.schedule = "optimized";
  s.targets = o.targets;
  s.floor = o.floor;
  s.n_layers = curves.n_layers;
  s.n_kv_heads = curves.n_kv_heads;
  s.sliding_layers = curves.sliding_layers;
  s.heads = layer_major_heads(s.n_layers, s.n_kv_heads, p, s.sliding_layers);
  set_predicted_delta(s, curves);
  return s;
}

BudgetSchedule uniform_schedule(int n_layers, int n_kv_heads, const std::vector<double>& targets,
                                const std::vector<int>& sliding_layers) {
  check_sizes(n_layers, n_kv_heads, "uniform schedule");
  check_targets(targets, "uniform schedule");
  check_sliding_layers(sliding_layers, n_layers, "uniform schedule: sliding layers");
  const int H = compacted_head_count(n_layers, n_kv_heads, sliding_layers);
  BudgetSchedule s;
  s.schedule = "uniform";
  s.targets = targets;
  s.floor = 1.0;
  s.n_layers = n_layers;
  s.n_kv_heads = n_kv_heads;
  s.sliding_layers = sliding_layers;
  s.heads = layer_major_heads(n_layers, n_kv_heads, std::vector<double>(static_cast<std::size_t>(H), 1.0 / H),
                              sliding_layers);
  return s;
}

BudgetSchedule pyramid_schedule(int n_layers, int n_kv_heads, const std::vector<double>& targets, double beta,
                                const std::vector<int>& sliding_layers) {
  check_sizes(n_layers, n_kv_heads, "pyramid schedule");
  check_targets(targets, "pyramid schedule");
  check_sliding_layers(sliding_layers, n_layers, "pyramid schedule: sliding layers");
  if (!std::isfinite(beta) || beta < 1.0)
    throw Error(fmt::format("pyramid schedule: beta {} must be >= 1 (shares would grow with layer)", beta));
  // The pyramid runs over the compacted layers, bottom to top.
  const int n_compacted = n_layers - static_cast<int>(sliding_layers.size());
  const std::vector<double> layer_share = pyramid_layer_shares(n_compacted, beta);  // mean 1
  std::vector<double> p;
  double min_p = kInf;
  for (int k = 0; k < n_compacted; ++k)
    for (int h = 0; h < n_kv_heads; ++h) {
      p.push_back(layer_share[static_cast<std::size_t>(k)] / (static_cast<double>(n_compacted) * n_kv_heads));
      min_p = std::min(min_p, p.back());
    }
  BudgetSchedule s;
  s.schedule = "pyramid";
  s.targets = targets;
  s.floor = std::min(1.0, min_p * static_cast<double>(p.size()));
  s.n_layers = n_layers;
  s.n_kv_heads = n_kv_heads;
  s.sliding_layers = sliding_layers;
  s.heads = layer_major_heads(n_layers, n_kv_heads, p, sliding_layers);
  return s;
}

void validate_budget_schedule(const BudgetSchedule& s, const std::string& source) {
  if (s.schedule.empty()) throw Error(fmt::format("{}: schedule: empty name", source));
  if (s.n_layers < 1) throw Error(fmt::format("{}: n_layers: must be >= 1, got {}", source, s.n_layers));
  if (s.n_kv_heads < 1) throw Error(fmt::format("{}: n_kv_heads: must be >= 1, got {}", source, s.n_kv_heads));
  if (s.targets.empty()) throw Error(fmt::format("{}: targets: empty", source));
  for (double r : s.targets)
    if (!std::isfinite(r) || r <= 0 || r > 1)
      throw Error(fmt::format("{}: targets: ratio {} is outside (0, 1]", source, r));
  if (!std::isfinite(s.floor) || s.floor < 0 || s.floor > 1)
    throw Error(fmt::format("{}: floor: {} is outside [0, 1]", source, s.floor));
  check_sliding_layers(s.sliding_layers, s.n_layers, source + ": sliding_layers");
  std::set<std::pair<int, int>> seen;
  double sum = 0;
  for (std::size_t i = 0; i < s.heads.size(); ++i) {
    const HeadBudget& h = s.heads[i];
    if (h.layer < 0 || h.layer >= s.n_layers || h.kv_head < 0 || h.kv_head >= s.n_kv_heads)
      throw Error(fmt::format("{}: heads[{}]: unknown head {} ({} layers x {} KV heads)", source, i, h.name(),
                              s.n_layers, s.n_kv_heads));
    if (!seen.insert({h.layer, h.kv_head}).second)
      throw Error(fmt::format("{}: heads[{}]: head {} listed twice", source, i, h.name()));
    if (s.sliding(h.layer))
      throw Error(fmt::format("{}: heads[{}]: head {} is in sliding-window layer {}, which is never compacted", source,
                              i, h.name(), h.layer));
    if (!std::isfinite(h.proportion) || h.proportion < 0)
      throw Error(fmt::format("{}: heads[{}].proportion: {} must be finite and >= 0", source, i, h.proportion));
    sum += h.proportion;
  }
  const std::size_t H = static_cast<std::size_t>(compacted_head_count(s.n_layers, s.n_kv_heads, s.sliding_layers));
  if (seen.size() != H) {
    for (int l = 0; l < s.n_layers; ++l)
      for (int k = 0; k < s.n_kv_heads && !s.sliding(l); ++k)
        if (!seen.count({l, k})) throw Error(fmt::format("{}: heads: head {} missing", source, head_name(l, k)));
  }
  if (std::fabs(sum - 1.0) > 1e-6)
    throw Error(fmt::format("{}: heads: proportions sum to {}, not 1", source, sum));
  if (!s.predicted_delta.empty()) {
    if (s.predicted_delta.size() != s.targets.size())
      throw Error(fmt::format("{}: predicted_delta: {} values for {} targets", source, s.predicted_delta.size(),
                              s.targets.size()));
    for (std::size_t k = 0; k < s.targets.size(); ++k) {
      if (std::fabs(s.predicted_delta[k].first - s.targets[k]) > 1e-12)
        throw Error(fmt::format("{}: predicted_delta: ratio {} is not target {}", source, s.predicted_delta[k].first,
                                s.targets[k]));
      if (!std::isfinite(s.predicted_delta[k].second))
        throw Error(fmt::format("{}: predicted_delta: value at {} is not finite", source, s.targets[k]));
    }
  }
}

nlohmann::json budget_schedule_to_json(const BudgetSchedule& s) {
  validate_budget_schedule(s, "budget schedule");
  nlohmann::json j;
  j["schedule"] = s.schedule;
  j["targets"] = s.targets;
  j["floor"] = s.floor;
  j["n_layers"] = s.n_layers;
  j["n_kv_heads"] = s.n_kv_heads;
  if (!s.sliding_layers.empty()) j["sliding_layers"] = s.sliding_layers;
  nlohmann::json heads = nlohmann::json::array();
  for (const auto& h : s.heads)
    heads.push_back({{"name", h.name()}, {"layer", h.layer}, {"kv_head", h.kv_head}, {"proportion", h.proportion}});
  j["heads"] = std::move(heads);
  nlohmann::json pd = nlohmann::json::object();
  for (const auto& [r, d] : s.predicted_delta) pd[ratio_key(r)] = d;
  j["predicted_delta"] = std::move(pd);
  return j;
}

nlohmann::json budget_schedule_to_paper_json(const BudgetSchedule& s) {
  validate_budget_schedule(s, "budgets");
  nlohmann::json out = nlohmann::json::object();
  for (const HeadBudget& h : s.heads) out[h.name()] = h.proportion;
  return out;
}

BudgetSchedule budget_schedule_from_paper_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object() || j.empty()) throw Error(fmt::format("{}: expected a JSON object of \"L<l>H<h>\": proportion", source));
  BudgetSchedule s;
  s.schedule = "paper";
  s.targets = {1.0};
  for (const auto& [key, value] : j.items()) {
    // "L<l>H<h>" with canonical decimal indices (from_chars: no overflow, no sign, no spaces).
    int l = -1, h = -1;
    const char* const end = key.data() + key.size();
    const char* at = key.data();
    bool ok = at != end && *at++ == 'L';
    if (ok) {
      const auto r = std::from_chars(at, end, l);
      ok = r.ec == std::errc() && r.ptr != end && *r.ptr == 'H';
      if (ok) {
        const auto r2 = std::from_chars(r.ptr + 1, end, h);
        ok = r2.ec == std::errc() && r2.ptr == end;
      }
    }
    if (!ok || l < 0 || h < 0 || head_name(l, h) != key)
      throw Error(fmt::format("{}: key \"{}\" is not a head name L<layer>H<kv_head>", source, key));
    if (!value.is_number()) throw Error(fmt::format("{}: {}: expected a number", source, key));
    if (l > 4096 || h > 4096) throw Error(fmt::format("{}: {}: beyond any model (at most 4096 layers and KV heads)", source, key));
    const double p = value.get<double>();
    if (!std::isfinite(p) || p < 0) throw Error(fmt::format("{}: {}: proportion {} must be finite and >= 0", source, key, p));
    s.heads.push_back({l, h, p});
    s.n_layers = std::max(s.n_layers, l + 1);
    s.n_kv_heads = std::max(s.n_kv_heads, h + 1);
  }
  std::sort(s.heads.begin(), s.heads.end(), [](const HeadBudget& a, const HeadBudget& b) {
    return std::pair(a.layer, a.kv_head) < std::pair(b.layer, b.kv_head);
  });
  if (s.heads.size() != static_cast<std::size_t>(s.n_layers) * s.n_kv_heads) {
    std::set<std::pair<int, int>> listed;
    for (const HeadBudget& h : s.heads) listed.insert({h.layer, h.kv_head});
    for (int l = 0; l < s.n_layers; ++l)
      for (int h = 0; h < s.n_kv_heads; ++h)
        if (!listed.count({l, h}))
          throw Error(fmt::format("{}: the flat form lists heads up to layer {} and KV head {}, so it must list every "
                                  "head of that {} x {} grid; {} is missing (or a key names a head the model lacks)",
                                  source, s.n_layers - 1, s.n_kv_heads - 1, s.n_layers, s.n_kv_heads, head_name(l, h)));
  }
  double lo = 1;
  for (const HeadBudget& h : s.heads) lo = std::min(lo, h.proportion);
  s.floor = std::clamp(lo * static_cast<double>(s.heads.size()), 0.0, 1.0);
  validate_budget_schedule(s, source);
  return s;
}

BudgetSchedule budget_schedule_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_object()) throw Error(fmt::format("{}: expected a JSON object at the top level", source));
  if (!j.contains("schedule")) return budget_schedule_from_paper_json(j, source);
  auto need = [&](const nlohmann::json& obj, const char* key, const std::string& path) -> const nlohmann::json& {
    auto it = obj.find(key);
    if (it == obj.end()) throw Error(fmt::format("{}: {}{}: missing", source, path, key));
    return *it;
  };
  auto as_int = [&](const nlohmann::json& v, const std::string& name) {
    if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<unsigned long long>() > 1000000000ULL) ||
        v.get<long long>() < -1000000000LL || v.get<long long>() > 1000000000LL)
      throw Error(fmt::format("{}: {}: expected an integer", source, name));
    return static_cast<int>(v.get<long long>());
  };
  auto as_number = [&](const nlohmann::json& v, const std::string& name) {
    if (!v.is_number()) throw Error(fmt::format("{}: {}: expected a number", source, name));
    return v.get<double>();
  };
  BudgetSchedule s;
  const auto& name = need(j, "schedule", "");
  if (!name.is_string()) throw Error(fmt::format("{}: schedule: expected a string", source));
  s.schedule = name.get<std::string>();
  const auto& targets = need(j, "targets", "");
  if (!targets.is_array()) throw Error(fmt::format("{}: targets: expected an array of numbers", source));
  for (std::size_t k = 0; k < targets.size(); ++k)
    s.targets.push_back(as_number(targets[k], fmt::format("targets[{}]", k)));
  s.floor = as_number(need(j, "floor", ""), "floor");
  s.n_layers = as_int(need(j, "n_layers", ""), "n_layers");
  s.n_kv_heads = as_int(need(j, "n_kv_heads", ""), "n_kv_heads");
  if (auto sl = j.find("sliding_layers"); sl != j.end()) {
    if (!sl->is_array()) throw Error(fmt::format("{}: sliding_layers: expected an array of layer indices", source));
    for (std::size_t k = 0; k < sl->size(); ++k) s.sliding_layers.push_back(as_int((*sl)[k], fmt::format("sliding_layers[{}]", k)));
  }
  const auto& heads = need(j, "heads", "");
  if (!heads.is_array()) throw Error(fmt::format("{}: heads: expected an array", source));
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const std::string path = fmt::format("heads[{}].", i);
    if (!heads[i].is_object()) throw Error(fmt::format("{}: heads[{}]: expected an object", source, i));
    HeadBudget h;
    h.layer = as_int(need(heads[i], "layer", path), path + "layer");
    h.kv_head = as_int(need(heads[i], "kv_head", path), path + "kv_head");
    h.proportion = as_number(need(heads[i], "proportion", path), path + "proportion");
    const auto& hn = need(heads[i], "name", path);
    if (!hn.is_string() || hn.get<std::string>() != h.name())
      throw Error(fmt::format("{}: {}name: {} does not match layer {} kv_head {}", source, path, hn.dump(), h.layer,
                              h.kv_head));
    s.heads.push_back(h);
  }
  auto it = j.find("predicted_delta");
  if (it != j.end()) {
    if (!it->is_object()) throw Error(fmt::format("{}: predicted_delta: expected an object", source));
    if (!it->empty()) {
      for (double r : s.targets) {
        auto v = it->find(ratio_key(r));
        if (v == it->end())
          throw Error(fmt::format("{}: predicted_delta: no value for target {}", source, ratio_key(r)));
        s.predicted_delta.emplace_back(r, as_number(*v, "predicted_delta." + ratio_key(r)));
      }
      if (it->size() != s.targets.size())
        throw Error(fmt::format("{}: predicted_delta: {} entries for {} targets", source, it->size(), s.targets.size()));
    }
  }
  validate_budget_schedule(s, source);
  return s;
}

void write_budget_schedule(const std::string& path, const BudgetSchedule& s) {
  write_file_atomic(path, budget_schedule_to_json(s).dump(2) + "\n");
}

BudgetSchedule read_budget_schedule(const std::string& path) {
  return budget_schedule_from_json(read_json_file(path), path);
}

BudgetSchedule read_budget_schedule_for(const std::string& path, int n_layers, int n_kv_heads,
                                        const std::vector<int>& sliding_layers) {
  BudgetSchedule s = read_budget_schedule(path);
  if (s.n_layers != n_layers || s.n_kv_heads != n_kv_heads)
    throw Error(fmt::format("{}: budgets are for {} layers x {} KV heads, the model has {} x {}", path, s.n_layers,
                            s.n_kv_heads, n_layers, n_kv_heads));
  if (!s.sliding_layers.empty() && s.sliding_layers != sliding_layers)
    throw Error(fmt::format("{}: budgets leave out sliding layers [{}], the model's sliding layers are [{}]", path,
                            fmt::join(s.sliding_layers, ","), fmt::join(sliding_layers, ",")));
  return s;
}

BudgetSchedule schedule_by_name_or_file(const std::string& spec, int n_layers, int n_kv_heads,
                                        const std::vector<int>& sliding_layers, const std::vector<double>& targets,
                                        double pyramid_beta) {
  if (spec == "uniform" || spec == "pyramid") {
    BudgetSolverOptions solver;
    solver.targets = targets;
    return named_schedule(spec, n_layers, n_kv_heads, sliding_layers, solver, nullptr, pyramid_beta);
  }
  return read_budget_schedule_for(spec, n_layers, n_kv_heads, sliding_layers);
}

BudgetSchedule named_schedule(const std::string& name, int n_layers, int n_kv_heads,
                              const std::vector<int>& sliding_layers, const BudgetSolverOptions& solver,
                              const InfluenceCurves* curves, double pyramid_beta) {
  if (name == "optimized") {
    if (curves == nullptr) throw Error("--schedule optimized needs influence curves (--curves)");
    return optimize_budgets(*curves, solver);
  }
  if (name == "uniform") return uniform_schedule(n_layers, n_kv_heads, solver.targets, sliding_layers);
  if (name == "pyramid") return pyramid_schedule(n_layers, n_kv_heads, solver.targets, pyramid_beta, sliding_layers);
  throw Error(fmt::format("--schedule: unknown schedule '{}' (valid: optimized, uniform, pyramid)", name));
}

std::vector<int> compacted_head_budgets(const std::vector<double>& p, const std::vector<int>& T, int n_kv_heads,
                                        const std::vector<int>& sliding_layers, double R, double max_head_ratio) {
  if (n_kv_heads < 1 || p.size() != T.size() || p.size() % static_cast<std::size_t>(n_kv_heads) != 0)
    throw Error(fmt::format("per-head budgets: {} proportions and {} head lengths for {} KV heads per layer", p.size(),
                            T.size(), n_kv_heads));
  std::vector<std::size_t> idx;  // the compacted heads
  for (std::size_t i = 0; i < p.size(); ++i)
    if (!contains(sliding_layers, static_cast<int>(i) / n_kv_heads)) idx.push_back(i);
  if (idx.empty()) throw Error("per-head budgets: every layer is a sliding-window layer (none is compacted)");
  std::vector<double> sub_p;
  std::vector<int> sub_t;
  double sum = 0;
  for (std::size_t i : idx) {
    if (!std::isfinite(p[i]) || p[i] < 0) throw Error(fmt::format("per-head budgets: proportion of head {} is {}", i, p[i]));
    sub_p.push_back(p[i]);
    sub_t.push_back(T[i]);
    sum += p[i];
  }
  if (!(sum > 0)) throw Error("per-head budgets: the compacted heads' proportions sum to 0");
  if (idx.size() != p.size())
    for (double& x : sub_p) x /= sum;  // a schedule over every head, applied to the global ones
  const std::vector<int> sub = per_head_budgets(sub_p, sub_t, R, max_head_ratio);
  std::vector<int> out = T;  // sliding heads: every entry (compaction copies those layers)
  for (std::size_t k = 0; k < idx.size(); ++k) out[idx[k]] = sub[k];
  return out;
}

std::vector<int> per_head_budgets(const std::vector<double>& p, const std::vector<int>& T, double R,
                                  double max_head_ratio) {
  const std::size_t H = p.size();
  if (H == 0 || T.size() != H)
    throw Error(fmt::format("per_head_budgets: {} proportions for {} heads", H, T.size()));
  if (!std::isfinite(R) || R <= 0 || R > 1) throw Error(fmt::format("per_head_budgets: ratio {} is outside (0, 1]", R));
  double psum = 0;
  long long tsum = 0;
  std::size_t positive = 0;
  for (std::size_t h = 0; h < H; ++h) {
    if (!std::isfinite(p[h]) || p[h] < 0)
      throw Error(fmt::format("per_head_budgets: proportion of head {} is {}", h, p[h]));
    if (T[h] < 1) throw Error(fmt::format("per_head_budgets: head {} holds {} keys", h, T[h]));
    psum += p[h];
    tsum += T[h];
    if (p[h] > 0) ++positive;
  }
  if (std::fabs(psum - 1.0) > 1e-6) throw Error(fmt::format("per_head_budgets: proportions sum to {}, not 1", psum));
  if (!std::isfinite(max_head_ratio) || max_head_ratio <= 0 || max_head_ratio > 1)
    throw Error(fmt::format("per_head_budgets: max head ratio {} is outside (0, 1]", max_head_ratio));
  // Per-head caps (the paper's max_ratio_per_head): cap_h = max(1, floor(max_head_ratio * T_h)).
  std::vector<int> cap(H);
  long long cap_sum = 0;
  for (std::size_t h = 0; h < H; ++h) {
    cap[h] = max_head_ratio >= 1.0 ? T[h]
                                   : std::max(1, static_cast<int>(std::floor(max_head_ratio * T[h] + 1e-9)));
    cap_sum += cap[h];
  }
  long long tsum_positive = 0;  // keys the heads that may get any can hold
  for (std::size_t h = 0; h < H; ++h)
    if (p[h] > 0) tsum_positive += cap[h];
  const long long asked = std::llround(R * static_cast<double>(tsum));
  if (asked > cap_sum)
    throw Error(fmt::format("per_head_budgets: ratio {} asks for {} keys but a max head ratio of {} leaves room for "
                            "{} (raise the cap or lower the ratio)", R, asked, max_head_ratio, cap_sum));
  const long long wanted = std::clamp<long long>(asked, static_cast<long long>(positive), cap_sum);
  // The positive heads take what they can hold; any excess (only when they are all full) spills
  // over to the zero-proportion heads below, so the total always matches.
  long long total = std::min(wanted, tsum_positive);

  // Water-filling of real quotas q over the free (positive, unfixed) heads.
  std::vector<double> q(H, 0.0);
  std::vector<char> fixed(H, 0);
  for (std::size_t h = 0; h < H; ++h) fixed[h] = p[h] > 0 ? 0 : 1;
  auto share = [&]() {
    double left = static_cast<double>(total), pfree = 0;
    for (std::size_t h = 0; h < H; ++h) {
      if (fixed[h]) left -= q[h];
      else pfree += p[h];
    }
    for (std::size_t h = 0; h < H; ++h)
      if (!fixed[h]) q[h] = pfree > 0 ? left * p[h] / pfree : 0.0;
  };
  for (bool changed = true; changed;) {  // caps first: fixing a cap only raises the others
    share();
    changed = false;
    for (std::size_t h = 0; h < H; ++h)
      if (!fixed[h] && q[h] > cap[h]) {
        q[h] = cap[h];
        fixed[h] = 1;
        changed = true;
      }
  }
  for (bool changed = true; changed;) {  // then the one-key minimum: only lowers the others
    changed = false;
    for (std::size_t h = 0; h < H; ++h)
      if (!fixed[h] && q[h] < 1.0) {
        q[h] = 1.0;
        fixed[h] = 1;
        changed = true;
      }
    if (changed) share();
  }
  // Largest remainder rounding.
  std::vector<int> keys(H, 0);
  long long assigned = 0;
  std::vector<std::pair<double, std::size_t>> rem;
  for (std::size_t h = 0; h < H; ++h) {
    const double fl = std::floor(q[h] + 1e-9);
    keys[h] = std::min(cap[h], static_cast<int>(fl));
    if (p[h] > 0) keys[h] = std::max(keys[h], 1);
    assigned += keys[h];
    if (p[h] > 0 && keys[h] < cap[h]) rem.emplace_back(q[h] - keys[h], h);
  }
  std::stable_sort(rem.begin(), rem.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  for (std::size_t i = 0; assigned < total && i < rem.size(); ++i, ++assigned) ++keys[rem[i].second];
  // Guard (cannot trigger when the arithmetic above is exact): adjust to the exact total.
  for (std::size_t h = 0; assigned < total && h < H; ++h)
    while (p[h] > 0 && keys[h] < cap[h] && assigned < total) ++keys[h], ++assigned;
  for (std::size_t h = H; assigned > total && h-- > 0;)
    while (keys[h] > 1 && assigned > total) --keys[h], --assigned;
  // Spill-over to the zero-proportion heads: one key at a time, round robin in head order, to the
  // heads with room (equal shares, capped at T_h).
  for (long long spill = wanted - total; spill > 0;)
    for (std::size_t h = 0; h < H && spill > 0; ++h)
      if (p[h] == 0 && keys[h] < cap[h]) ++keys[h], --spill;
  return keys;
}

}  // namespace kvcompact
