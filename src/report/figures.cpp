#include "report/figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>

#include "studies/compact_eval.h"
#include "core/error.h"
#include "report/svg_plot.h"

namespace kvcompact {

BandKind parse_band_kind(const std::string& text) {
  if (text == "sem") return BandKind::Sem;
  if (text == "std") return BandKind::Std;
  if (text == "none") return BandKind::None;
  throw Error(fmt::format("--band '{}': expected sem, std or none", text));
}

std::string influence_figure(const InfluenceCurves& curves, const std::vector<HeadId>& heads, BandKind band) {
  validate_influence_curves(curves, "influence curves");
  std::vector<const HeadCurve*> shown;
  if (heads.empty()) {
    for (const auto& h : curves.heads) shown.push_back(&h);
  } else {
    for (const auto& id : heads) {
      const HeadCurve* c = curves.find(id.layer, id.kv_head);
      if (!c) throw Error(fmt::format("influence figure: head {} has no curve", head_name(id.layer, id.kv_head)));
      shown.push_back(c);
    }
  }
  if (shown.empty()) throw Error("influence figure: no heads to show");
  LinePlot p;
  p.title = "Head influence curves";
  p.x.title = "head ratio (fraction of original keys)";
  p.y.title = "delta log(perplexity) from baseline";
  p.zero_line = true;
  if (shown.size() > 10) p.layout.height = 520;
  if (shown.size() > 6) p.band_opacity = 0.07;  // many overlapping bands: keep the lines visible
  for (const HeadCurve* c : shown) {
    PlotSeries s;
    s.label = fmt::format("Layer {} Head {}", c->layer, c->kv_head);
    s.x = c->ratios;
    s.y = c->mean;
    if (band != BandKind::None) {
      const auto& spread = band == BandKind::Sem ? c->sem : c->std;
      for (std::size_t k = 0; k < c->ratios.size(); ++k) {
        s.band_lo.push_back(c->mean[k] - spread[k]);
        s.band_hi.push_back(c->mean[k] + spread[k]);
      }
    }
    s.markers = c->ratios.size() <= 12;
    p.series.push_back(std::move(s));
  }
  p.vlines.push_back({curves.baseline_ratio, fmt::format("baseline r = {}", curves.baseline_ratio), LineStyle::Dashed,
                      "#555555"});
  return render_line_plot(p);
}

std::string influence_area_heatmap(const InfluenceCurves& curves) {
  if (curves.heads.empty() || curves.n_layers < 1 || curves.n_kv_heads < 1)
    throw Error("influence area heatmap: no curves");
  Heatmap m;
  m.title = fmt::format("Influence area per KV head ({} document{}, baseline {})", curves.heads[0].documents,
                        curves.heads[0].documents == 1 ? "" : "s",
                        curves.baseline_ratio);
  m.x_title = "KV head";
  m.y_title = "layer";
  m.colorbar_title = "area under delta NLL (nats/token x ratio)";
  std::vector<std::vector<double>> v(static_cast<std::size_t>(curves.n_layers),
                                     std::vector<double>(static_cast<std::size_t>(curves.n_kv_heads), 0.0));
  std::vector<bool> swept(static_cast<std::size_t>(curves.n_layers), false);
  double lo = 0, hi = 0;
  for (const HeadCurve& h : curves.heads) {
    if (h.layer < 0 || h.layer >= curves.n_layers || h.kv_head < 0 || h.kv_head >= curves.n_kv_heads)
      throw Error(fmt::format("influence area heatmap: head {} is outside {} layers x {} KV heads", h.name(),
                              curves.n_layers, curves.n_kv_heads));
    const double a = h.area();
    v[static_cast<std::size_t>(h.layer)][static_cast<std::size_t>(h.kv_head)] = a;
    swept[static_cast<std::size_t>(h.layer)] = true;
    lo = std::min(lo, a);
    hi = std::max(hi, a);
  }
  for (int l = 0; l < curves.n_layers; ++l)
    m.row_labels.push_back(swept[static_cast<std::size_t>(l)] ? fmt::format("L{}", l) : fmt::format("L{} (not swept)", l));
  for (int h = 0; h < curves.n_kv_heads; ++h) m.col_labels.push_back(fmt::format("H{}", h));
  m.values = std::move(v);
  m.vmin = lo;
  m.vmax = hi > lo ? hi : lo + 1e-12;
  m.value_format = "{:.4f}";
  m.layout.width = std::clamp(80 + 150 + 70 * curves.n_kv_heads, 460, 1400);
  m.layout.height = std::clamp(44 + 62 + 24 * curves.n_layers, 300, 1400);
  return render_heatmap(m);
}

void write_influence_figures(const std::string& dir, const InfluenceCurves& curves, BandKind band, bool png) {
  const std::string svg = influence_figure(curves, {}, band);
  write_figure(dir + "/influence.svg", svg);
  if (png) write_figure(dir + "/influence.png", svg);
  write_figure(dir + "/influence_areas.svg", influence_area_heatmap(curves));
}

std::string budget_heatmap(const BudgetSchedule& schedule) {
  validate_budget_schedule(schedule, "budget schedule");
  const auto p = schedule.proportions();
  Heatmap m;
  m.title = fmt::format("Per-head KV budget ({})", schedule.schedule);
  m.x_title = "KV head";
  m.y_title = "layer";
  m.colorbar_title = "proportion of total keys";
  double mx = 0;
  for (int l = 0; l < schedule.n_layers; ++l) {
    // A sliding-window layer keeps its window and is never compacted: labelled, its cells 0.
    m.row_labels.push_back(schedule.sliding(l) ? fmt::format("L{} window", l) : fmt::format("L{}", l));
    std::vector<double> row;
    for (int h = 0; h < schedule.n_kv_heads; ++h) {
      row.push_back(p[static_cast<std::size_t>(l * schedule.n_kv_heads + h)]);
      mx = std::max(mx, row.back());
    }
    m.values.push_back(std::move(row));
  }
  for (int h = 0; h < schedule.n_kv_heads; ++h) m.col_labels.push_back(fmt::format("H{}", h));
  m.vmin = 0.0;
  m.vmax = mx > 0 ? mx : 1.0;
  m.value_format = mx >= 0.1 ? "{:.3f}" : "{:.4f}";
  // Cells of at least ~52 x 26 px, up to a reasonable size.
  m.layout.width = std::clamp(80 + 110 + 58 * schedule.n_kv_heads, 420, 1400);
  m.layout.height = std::clamp(44 + 62 + 30 * schedule.n_layers, 300, 1400);
  return render_heatmap(m);
}

namespace {

/// Log10 keep-ratio x axis over [min ratio / 1.25, max ratio * 1.25] (a margin so that the end
/// markers are not cut by the frame). ratios: non-empty, each in (0, 1].
void set_ratio_axis(LinePlot& p, const std::vector<double>& ratios, const std::string& x_title) {
  p.x.title = x_title;
  p.x.scale = AxisScale::Log10;
  const auto [lo, hi] = std::minmax_element(ratios.begin(), ratios.end());
  p.x.min = *lo / 1.25;
  p.x.max = *hi * 1.25;
}

/// A line with markers through (ratio, mean) sorted by ratio, with a mean -/+ sem band.
/// pts: (ratio, mean, sem) triples.
PlotSeries banded_ratio_series(const std::string& label, std::vector<std::array<double, 3>> pts) {
  std::sort(pts.begin(), pts.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  PlotSeries s;
  s.label = label;
  s.markers = true;
  for (const auto& [r, m, e] : pts) {
    s.x.push_back(r);
    s.y.push_back(m);
    s.band_lo.push_back(m - e);
    s.band_hi.push_back(m + e);
  }
  return s;
}

std::string frontier_plot(const std::vector<FrontierPoint>& points, const std::string& title,
                          const std::string& x_title) {
  if (points.empty()) throw Error(fmt::format("{}: no points", title));
  std::vector<std::string> order;
  std::set<std::pair<std::string, double>> seen;
  for (const auto& q : points) {
    const std::string what = fmt::format("{}: {} at ratio {}", title, q.series, q.ratio);
    if (!std::isfinite(q.ratio) || q.ratio <= 0 || q.ratio > 1)
      throw Error(fmt::format("{}: ratio must be in (0, 1]", what));
    if (!std::isfinite(q.delta_mean)) throw Error(fmt::format("{}: delta mean is not finite", what));
    if (!std::isfinite(q.delta_sem) || q.delta_sem < 0)
      throw Error(fmt::format("{}: SEM must be finite and >= 0", what));
    if (!seen.insert({q.series, q.ratio}).second) throw Error(fmt::format("{}: listed twice", what));
    if (std::find(order.begin(), order.end(), q.series) == order.end()) order.push_back(q.series);
  }
  LinePlot p;
  p.title = title;
  std::vector<double> ratios;
  for (const auto& q : points) ratios.push_back(q.ratio);
  set_ratio_axis(p, ratios, x_title);
  p.y.title = "delta log(perplexity) (nats/token)";
  p.zero_line = true;
  for (const auto& name : order) {
    std::vector<std::array<double, 3>> pts;
    for (const auto& q : points)
      if (q.series == name) pts.push_back({q.ratio, q.delta_mean, q.delta_sem});
    p.series.push_back(banded_ratio_series(name, std::move(pts)));
  }
  return render_line_plot(p);
}

}  // namespace

std::string frontier_figure(const std::vector<FrontierPoint>& points) {
  return frontier_plot(points, "Budget schedules: quality vs cache size", "total keep ratio (fraction of original keys)");
}

std::string method_frontier_figure(const std::vector<FrontierPoint>& points) {
  return frontier_plot(points, "Compaction methods: quality vs cache size", "keep ratio (fraction of original keys)");
}

std::string comparison_figure(const std::vector<ComparisonPoint>& points, const std::string& title,
                              const std::string& y_title, const std::string& peer_name) {
  if (points.empty()) throw Error(fmt::format("{}: no points", title));
  std::vector<std::string> methods;  // colour order: first appearance
  std::vector<std::pair<std::string, bool>> lines;
  std::set<std::tuple<std::string, bool, double>> seen;
  for (const auto& q : points) {
    const std::string what = fmt::format("{}: {} ({}) at ratio {}", title, q.method, q.peer ? peer_name : "kvcompact", q.ratio);
    if (!std::isfinite(q.ratio) || q.ratio <= 0 || q.ratio > 1)
      throw Error(fmt::format("{}: ratio must be in (0, 1]", what));
    if (!std::isfinite(q.mean)) throw Error(fmt::format("{}: mean is not finite", what));
    if (!std::isfinite(q.sem) || q.sem < 0) throw Error(fmt::format("{}: SEM must be finite and >= 0", what));
    if (!seen.insert({q.method, q.peer, q.ratio}).second) throw Error(fmt::format("{}: listed twice", what));
    if (std::find(methods.begin(), methods.end(), q.method) == methods.end()) methods.push_back(q.method);
    if (std::find(lines.begin(), lines.end(), std::pair{q.method, q.peer}) == lines.end()) lines.push_back({q.method, q.peer});
  }
  LinePlot p;
  p.title = title;
  std::vector<double> ratios;
  for (const auto& q : points) ratios.push_back(q.ratio);
  set_ratio_axis(p, ratios, "keep ratio (fraction of original keys)");
  p.y.title = y_title;
  p.zero_line = true;
  p.layout.width = 900;
  for (const auto& [method, peer] : lines) {
    std::vector<std::array<double, 3>> pts;
    for (const auto& q : points)
      if (q.method == method && q.peer == peer) pts.push_back({q.ratio, q.mean, q.sem});
    PlotSeries s = banded_ratio_series(fmt::format("{} ({})", method, peer ? peer_name : "kvcompact"), std::move(pts));
    s.style = peer ? LineStyle::Dashed : LineStyle::Solid;
    const auto idx = static_cast<std::size_t>(std::find(methods.begin(), methods.end(), method) - methods.begin());
    s.color = palette_color(idx);
    p.series.push_back(std::move(s));
  }
  return render_line_plot(p);
}

std::vector<FrontierPoint> frontier_points(const std::vector<CompactEvalRow>& rows) {
  std::vector<FrontierPoint> out;
  for (const auto& r : rows) out.push_back({r.method, r.ratio, r.delta_nll_mean, r.delta_nll_sem});
  return out;
}

}  // namespace kvcompact
