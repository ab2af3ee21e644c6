#include "report/svg_plot.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string_view>

#include "io/atomic_file.h"
#include "core/error.h"

extern char** environ;

namespace kvcompact {
namespace {

std::string num(double v) {
  std::string s = fmt::format("{:.2f}", v);
  if (s == "-0.00") s = "0.00";
  return s;
}

double text_width(const std::string& s, double font_size) { return 0.6 * font_size * static_cast<double>(s.size()); }

double log_b(double v, AxisScale s) { return s == AxisScale::Log2 ? std::log2(v) : std::log10(v); }
double base_of(AxisScale s) { return s == AxisScale::Log2 ? 2.0 : 10.0; }
bool is_log(AxisScale s) { return s != AxisScale::Linear; }

// The 1, 2 or 5 x 10^k step nearest to raw (in ratio).
double nice_step(double raw) {
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / p;
  const double m = f < 1.5 ? 1.0 : f < 3.0 ? 2.0 : f < 7.0 ? 5.0 : 10.0;
  return m * p;
}

std::string dash_attr(LineStyle s, double width) {
  if (s == LineStyle::Solid) return "";
  return fmt::format(" stroke-dasharray=\"{},{}\"", num(3.5 * width), num(2.5 * width));
}

std::string label_for(const PlotSeries& s, std::size_t i) {
  return s.label.empty() ? fmt::format("series {}", i + 1) : fmt::format("'{}'", s.label);
}

std::string svg_header(int w, int h, int font_size) {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\" font-size=\"{2}\">\n"
      "<rect class=\"background\" x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      w, h, font_size);
}

std::string text_el(double x, double y, const std::string& s, const std::string& cls, const std::string& anchor,
                    const std::string& extra = "") {
  return fmt::format("<text class=\"{}\" x=\"{}\" y=\"{}\" text-anchor=\"{}\"{}>{}</text>\n", cls, num(x), num(y),
                     anchor, extra, xml_escape(s));
}

std::string tick_label(double v, double step_hint, AxisScale scale) {
  if (scale == AxisScale::Log2) {  // exact powers of two: "1/128", "1", "64"
    if (v >= 1.0) return fmt::format("{:.0f}", v);
    return fmt::format("1/{:.0f}", 1.0 / v);
  }
  if (scale == AxisScale::Log10) return fmt::format("{:.3g}", v);
  int decimals = std::max(0, -static_cast<int>(std::floor(std::log10(step_hint) + 1e-9)));
  if (std::fabs(v) < step_hint * 1e-6) v = 0.0;
  std::string s = fmt::format("{:.{}f}", v, decimals);
  if (s.size() > 1 && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s = s.substr(1);
  return s;
}

}  // namespace

double AxisMap::operator()(double v) const {
  if (is_log(scale)) {
    const double a = log_b(lo, scale), b = log_b(hi, scale);
    return px0 + (log_b(v, scale) - a) / (b - a) * (px1 - px0);
  }
  return px0 + (v - lo) / (hi - lo) * (px1 - px0);
}

Ticks axis_ticks(double lo, double hi, AxisScale scale, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi) || !(lo < hi))
    throw Error(fmt::format("axis ticks: bad range [{}, {}]", lo, hi));
  if (is_log(scale) && lo <= 0) throw Error(fmt::format("axis ticks: log axis range [{}, {}] must be > 0", lo, hi));
  Ticks t;
  const double eps = 1e-9;
  if (scale == AxisScale::Linear) {
    const double step = nice_step((hi - lo) / std::max(1, target));
    for (double k = std::ceil(lo / step - eps); k * step <= hi + step * eps; k += 1.0) {
      const double v = k * step;
      t.values.push_back(v);
      t.labels.push_back(tick_label(v, step, scale));
    }
    return t;
  }
  const double a = log_b(lo, scale), b = log_b(hi, scale);
  const int e0 = static_cast<int>(std::ceil(a - eps)), e1 = static_cast<int>(std::floor(b + eps));
  const double base = base_of(scale);
  if (scale == AxisScale::Log10 && b - a < 2.0) {
    for (int e = static_cast<int>(std::floor(a)) - 1; e <= e1 + 1; ++e)
      for (double m : {1.0, 2.0, 5.0}) {
        const double v = m * std::pow(10.0, e);
        if (v >= lo * (1 - eps) && v <= hi * (1 + eps)) {
          t.values.push_back(v);
          t.labels.push_back(tick_label(v, 0, scale));
        }
      }
    return t;
  }
  const int count = e1 - e0 + 1;
  const int every = count > 10 ? (count + 7) / 8 : 1;
  for (int e = e0; e <= e1; e += every) {
    const double v = std::pow(base, e);
    t.values.push_back(v);
    t.labels.push_back(tick_label(v, 0, scale));
  }
  return t;
}

std::pair<double, double> axis_range(const PlotAxis& axis, const std::vector<double>& values, const std::string& what) {
  double mn = INFINITY, mx = -INFINITY;
  for (double v : values) {
    if (!std::isfinite(v)) throw Error(fmt::format("{}: non-finite value", what));
    if (is_log(axis.scale) && v <= 0) throw Error(fmt::format("{}: value {} <= 0 on a log axis", what, v));
    mn = std::min(mn, v);
    mx = std::max(mx, v);
  }
  if (axis.min) mn = *axis.min;
  if (axis.max) mx = *axis.max;
  if (!std::isfinite(mn) || !std::isfinite(mx)) throw Error(fmt::format("{}: no data", what));
  if (is_log(axis.scale) && (mn <= 0 || mx <= 0))
    throw Error(fmt::format("{}: log axis range [{}, {}] must be > 0", what, mn, mx));
  if (axis.min && axis.max && !(mn < mx))
    throw Error(fmt::format("{}: axis min {} must be below max {}", what, mn, mx));
  if (is_log(axis.scale)) {
    const double base = base_of(axis.scale);
    if (!axis.min) mn = std::pow(base, std::floor(log_b(mn, axis.scale) + 1e-9));
    if (!axis.max) mx = std::pow(base, std::ceil(log_b(mx, axis.scale) - 1e-9));
    if (!(mn < mx)) {
      if (!axis.max) mx = mn * base;
      else mn = mx / base;
    }
    return {mn, mx};
  }
  if (!(mn < mx)) {
    const double pad = std::max(std::fabs(mn) * 0.1, 1e-9);
    if (!axis.min) mn -= pad;
    if (!axis.max) mx += pad;
  }
  const double step = nice_step((mx - mn) / 6.0);
  if (!axis.min) mn = std::floor(mn / step + 1e-9) * step;
  if (!axis.max) mx = std::ceil(mx / step - 1e-9) * step;
  if (!(mn < mx)) mx = mn + step;
  return {mn, mx};
}

std::string xml_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string palette_color(std::size_t i) {
  static const std::array<const char*, 20> kPalette = {
      "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
      "#393b79", "#ad494a", "#637939", "#e6550d", "#7b4173", "#843c39", "#3182bd", "#31a354", "#b5cf6b", "#000000"};
  return kPalette[i % kPalette.size()];
}

std::string viridis(double t) {
  // Viridis (matplotlib) sampled at 9 points, linearly interpolated.
  static const std::array<std::array<double, 3>, 9> kV = {{{68, 1, 84},
                                                           {71, 44, 122},
                                                           {59, 81, 139},
                                                           {44, 113, 142},
                                                           {33, 144, 141},
                                                           {39, 173, 129},
                                                           {92, 200, 99},
                                                           {170, 220, 50},
                                                           {253, 231, 37}}};
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0);
  const double x = t * 8.0;
  const int i = std::min(7, static_cast<int>(x));
  const double f = x - i;
  std::array<int, 3> c{};
  for (int k = 0; k < 3; ++k)
    c[static_cast<std::size_t>(k)] = static_cast<int>(std::lround(kV[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)] * (1 - f) +
                                                                  kV[static_cast<std::size_t>(i) + 1][static_cast<std::size_t>(k)] * f));
  return fmt::format("#{:02x}{:02x}{:02x}", c[0], c[1], c[2]);
}

namespace {

struct LegendEntry {
  std::string label, color;
  LineStyle style;
  double width;
  bool band, marker;
};

std::vector<LegendEntry> legend_entries(const LinePlot& p) {
  std::vector<LegendEntry> out;
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    if (s.label.empty()) continue;
    out.push_back({s.label, s.color.empty() ? palette_color(i) : s.color, s.style, s.width, !s.band_lo.empty(),
                   s.markers});
  }
  for (const auto& v : p.vlines)
    if (!v.label.empty()) out.push_back({v.label, v.color, v.style, 1.3, false, false});
  return out;
}

double legend_width(const LinePlot& p) {
  if (!p.legend) return 0;
  const auto entries = legend_entries(p);
  if (entries.empty()) return 0;
  double w = 0;
  for (const auto& e : entries) w = std::max(w, text_width(e.label, p.layout.font_size - 1));
  return 12 + 28 + 6 + w + 8;
}

void check_series(const LinePlot& p) {
  const std::string plot = p.title.empty() ? std::string("plot") : fmt::format("plot '{}'", p.title);
  if (p.layout.width < 100 || p.layout.height < 100)
    throw Error(fmt::format("{}: size {}x{} px is too small", plot, p.layout.width, p.layout.height));
  if (!(p.band_opacity > 0 && p.band_opacity <= 1))
    throw Error(fmt::format("{}: band opacity {} is outside (0, 1]", plot, p.band_opacity));
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    const std::string what = fmt::format("{}: series {}", plot, label_for(s, i));
    if (s.x.size() != s.y.size())
      throw Error(fmt::format("{}: {} x values and {} y values", what, s.x.size(), s.y.size()));
    if (s.x.empty()) throw Error(fmt::format("{}: no points", what));
    if (!s.band_lo.empty() || !s.band_hi.empty())
      if (s.band_lo.size() != s.x.size() || s.band_hi.size() != s.x.size())
        throw Error(fmt::format("{}: band has {} low and {} high values for {} points", what, s.band_lo.size(),
                                s.band_hi.size(), s.x.size()));
    if (!(s.width > 0) || !std::isfinite(s.width)) throw Error(fmt::format("{}: bad line width", what));
    auto check = [&](const std::vector<double>& v, const char* name, bool log) {
      for (std::size_t k = 0; k < v.size(); ++k) {
        if (!std::isfinite(v[k])) throw Error(fmt::format("{}: {}[{}] is not finite", what, name, k));
        if (log && v[k] <= 0) throw Error(fmt::format("{}: {}[{}] = {} is <= 0 on a log axis", what, name, k, v[k]));
      }
    };
    check(s.x, "x", is_log(p.x.scale));
    check(s.y, "y", is_log(p.y.scale));
    check(s.band_lo, "band_lo", is_log(p.y.scale));
    check(s.band_hi, "band_hi", is_log(p.y.scale));
  }
}

}  // namespace

std::pair<AxisMap, AxisMap> line_plot_maps(const LinePlot& p) {
  check_series(p);
  const std::string plot = p.title.empty() ? std::string("plot") : fmt::format("plot '{}'", p.title);
  std::vector<double> xs, ys;
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    xs.insert(xs.end(), s.x.begin(), s.x.end());
    ys.insert(ys.end(), s.y.begin(), s.y.end());
    ys.insert(ys.end(), s.band_lo.begin(), s.band_lo.end());
    ys.insert(ys.end(), s.band_hi.begin(), s.band_hi.end());
  }
  for (const auto& v : p.vlines) xs.push_back(v.x);
  if (p.series.empty()) throw Error(fmt::format("{}: no series", plot));
  const auto [x0, x1] = axis_range(p.x, xs, fmt::format("{}: x axis '{}'", plot, p.x.title));
  const auto [y0, y1] = axis_range(p.y, ys, fmt::format("{}: y axis '{}'", plot, p.y.title));
  const PlotLayout& L = p.layout;
  const double plot_right = L.width - L.right - legend_width(p);
  if (plot_right - L.left < 40 || L.height - L.bottom - L.top < 40)
    throw Error(fmt::format("{}: no room for the plot area (legend labels too long?)", plot));
  AxisMap mx{x0, x1, static_cast<double>(L.left), plot_right, p.x.scale};
  AxisMap my{y0, y1, static_cast<double>(L.height - L.bottom), static_cast<double>(L.top), p.y.scale};
  return {mx, my};
}

std::string render_line_plot(const LinePlot& p) {
  const auto [mx, my] = line_plot_maps(p);
  const PlotLayout& L = p.layout;
  const double fs = L.font_size;
  const double pl = mx.px0, pr = mx.px1, pt = my.px1, pb = my.px0;
  std::string out = svg_header(L.width, L.height, L.font_size);
  out += fmt::format("<defs><clipPath id=\"plotarea\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>\n",
                     num(pl), num(pt), num(pr - pl), num(pb - pt));
  if (!p.title.empty())
    out += text_el((pl + pr) / 2, L.top / 2.0 + fs * 0.45, p.title, "title", "middle",
                   fmt::format(" font-size=\"{}\" font-weight=\"bold\"", L.font_size + 2));
  // Grid and tick labels.
  const Ticks xt = axis_ticks(mx.lo, mx.hi, mx.scale, 7);
  const Ticks yt = axis_ticks(my.lo, my.hi, my.scale, 6);
  for (std::size_t i = 0; i < xt.values.size(); ++i) {
    const double x = mx(xt.values[i]);
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>\n",
                       num(x), num(pt), num(pb));
    out += text_el(x, pb + fs + 4, xt.labels[i], "tick", "middle");
  }
  for (std::size_t i = 0; i < yt.values.size(); ++i) {
    const double y = my(yt.values[i]);
    out += fmt::format("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#e3e3e3\" stroke-width=\"1\"/>\n",
                       num(pl), num(y), num(pr));
    out += text_el(pl - 6, y + fs * 0.35, yt.labels[i], "tick", "end");
  }
  if (p.zero_line && !is_log(my.scale) && my.lo < 0 && my.hi > 0)
    out += fmt::format("<line class=\"zero\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#999999\" stroke-width=\"1\"/>\n",
                       num(pl), num(my(0.0)), num(pr));
  // Data, clipped to the plot area.
  out += "<g clip-path=\"url(#plotarea)\">\n";
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    if (s.band_lo.empty()) continue;
    const std::string color = s.color.empty() ? palette_color(i) : s.color;
    std::string d;
    for (std::size_t k = 0; k < s.x.size(); ++k)
      d += fmt::format("{}{},{} ", k == 0 ? "M" : "L", num(mx(s.x[k])), num(my(s.band_hi[k])));
    for (std::size_t k = s.x.size(); k-- > 0;) d += fmt::format("L{},{} ", num(mx(s.x[k])), num(my(s.band_lo[k])));
    d += "Z";
    out += fmt::format("<path class=\"band\" d=\"{}\" fill=\"{}\" fill-opacity=\"{}\" stroke=\"none\"/>\n", d, color,
                       num(p.band_opacity));
  }
  for (const auto& v : p.vlines) {
    const double x = mx(v.x);
    out += fmt::format("<line class=\"vline\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"1.3\"{4}/>\n",
                       num(x), num(pt), num(pb), v.color, dash_attr(v.style, 1.3));
  }
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& s = p.series[i];
    const std::string color = s.color.empty() ? palette_color(i) : s.color;
    std::string d;
    for (std::size_t k = 0; k < s.x.size(); ++k)
      d += fmt::format("{}{},{}", k == 0 ? "M" : " L", num(mx(s.x[k])), num(my(s.y[k])));
    out += fmt::format("<path class=\"series\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" "
                       "stroke-linejoin=\"round\"{}/>\n",
                       d, color, num(s.width), dash_attr(s.style, s.width));
    if (s.markers)
      for (std::size_t k = 0; k < s.x.size(); ++k)
        out += fmt::format("<circle class=\"marker\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n", num(mx(s.x[k])),
                           num(my(s.y[k])), num(s.width + 1.6), color);
  }
  out += "</g>\n";
  out += fmt::format("<rect class=\"frame\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n",
                     num(pl), num(pt), num(pr - pl), num(pb - pt));
  // Axis titles.
  if (!p.x.title.empty()) out += text_el((pl + pr) / 2, L.height - 14, p.x.title, "axis-title", "middle");
  if (!p.y.title.empty()) {
    const double x = 18, y = (pt + pb) / 2;
    out += text_el(x, y, p.y.title, "axis-title", "middle", fmt::format(" transform=\"rotate(-90 {} {})\"", num(x), num(y)));
  }
  // Legend.
  if (p.legend) {
    const auto entries = legend_entries(p);
    const double lfs = fs - 1;
    const double row = lfs + 6;
    double y = pt + 8;
    const double x0 = pr + 12;
    for (const auto& e : entries) {
      const double cy = y + row / 2;
      if (e.band)
        out += fmt::format("<rect class=\"legend-band\" x=\"{}\" y=\"{}\" width=\"28\" height=\"{}\" fill=\"{}\" fill-opacity=\"{}\"/>\n",
                           num(x0), num(cy - row / 2 + 2), num(row - 4), e.color, num(std::max(p.band_opacity, 0.18)));
      out += fmt::format("<line class=\"legend-line\" x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\" stroke=\"{3}\" stroke-width=\"{4}\"{5}/>\n",
                         num(x0), num(x0 + 28), num(cy), e.color, num(e.width), dash_attr(e.style, e.width));
      if (e.marker)
        out += fmt::format("<circle class=\"legend-marker\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n", num(x0 + 14),
                           num(cy), num(e.width + 1.6), e.color);
      out += text_el(x0 + 34, cy + lfs * 0.35, e.label, "legend", "start", fmt::format(" font-size=\"{}\"", lfs));
      y += row;
    }
  }
  out += "</svg>\n";
  return out;
}

std::string render_heatmap(const Heatmap& m) {
  const std::string plot = m.title.empty() ? std::string("heatmap") : fmt::format("heatmap '{}'", m.title);
  const std::size_t rows = m.values.size();
  if (rows == 0) throw Error(fmt::format("{}: no rows", plot));
  const std::size_t cols = m.values[0].size();
  if (cols == 0) throw Error(fmt::format("{}: no columns", plot));
  double lo = INFINITY, hi = -INFINITY;
  for (std::size_t r = 0; r < rows; ++r) {
    if (m.values[r].size() != cols)
      throw Error(fmt::format("{}: row {} has {} values, row 0 has {}", plot, r, m.values[r].size(), cols));
    for (double v : m.values[r]) {
      if (!std::isfinite(v)) throw Error(fmt::format("{}: row {} has a non-finite value", plot, r));
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  if (m.row_labels.size() != rows || m.col_labels.size() != cols)
    throw Error(fmt::format("{}: {} row and {} column labels for a {} x {} matrix", plot, m.row_labels.size(),
                            m.col_labels.size(), rows, cols));
  if (m.vmin) lo = *m.vmin;
  if (m.vmax) hi = *m.vmax;
  if (!std::isfinite(lo) || !std::isfinite(hi) || lo > hi)
    throw Error(fmt::format("{}: bad colour range [{}, {}]", plot, lo, hi));
  if (lo == hi) {
    const double pad = std::max(std::fabs(lo) * 0.05, 1e-12);
    lo -= pad;
    hi += pad;
  }
  const PlotLayout& L = m.layout;
  const double fs = L.font_size;
  const double x0 = L.left, x1 = L.width - L.right, y0 = L.top, y1 = L.height - L.bottom;
  if (x1 - x0 < 20 || y1 - y0 < 20) throw Error(fmt::format("{}: size too small", plot));
  const double cw = (x1 - x0) / static_cast<double>(cols), ch = (y1 - y0) / static_cast<double>(rows);
  std::string out = svg_header(L.width, L.height, L.font_size);
  if (!m.title.empty())
    out += text_el((x0 + x1) / 2, L.top / 2.0 + fs * 0.45, m.title, "title", "middle",
                   fmt::format(" font-size=\"{}\" font-weight=\"bold\"", L.font_size + 2));
  const double cell_fs = std::min(fs, std::max(6.0, std::min(ch * 0.4, cw / 5.5)));
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) {
      const double v = m.values[r][c];
      const double t = (v - lo) / (hi - lo);
      const double x = x0 + cw * static_cast<double>(c), y = y0 + ch * static_cast<double>(r);
      out += fmt::format("<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"white\" stroke-width=\"1\"/>\n",
                         num(x), num(y), num(cw), num(ch), viridis(t));
      if (m.annotate)
        out += text_el(x + cw / 2, y + ch / 2 + cell_fs * 0.35, fmt::format(fmt::runtime(m.value_format), v), "value",
                       "middle", fmt::format(" font-size=\"{}\" fill=\"{}\"", num(cell_fs), t < 0.55 ? "white" : "black"));
    }
  for (std::size_t r = 0; r < rows; ++r)
    out += text_el(x0 - 6, y0 + ch * (static_cast<double>(r) + 0.5) + fs * 0.35, m.row_labels[r], "row-label", "end");
  for (std::size_t c = 0; c < cols; ++c)
    out += text_el(x0 + cw * (static_cast<double>(c) + 0.5), y1 + fs + 4, m.col_labels[c], "col-label", "middle");
  if (!m.x_title.empty()) out += text_el((x0 + x1) / 2, L.height - 14, m.x_title, "axis-title", "middle");
  if (!m.y_title.empty()) {
    const double x = 18, y = (y0 + y1) / 2;
    out += text_el(x, y, m.y_title, "axis-title", "middle", fmt::format(" transform=\"rotate(-90 {} {})\"", num(x), num(y)));
  }
  // Colour bar: a vertical gradient, vmax at the top.
  const double bx = x1 + 18, bw = 16;
  out += "<defs><linearGradient id=\"colorbar\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\">";
  for (int k = 0; k <= 16; ++k)
    out += fmt::format("<stop offset=\"{}\" stop-color=\"{}\"/>", num(k / 16.0), viridis(k / 16.0));
  out += "</linearGradient></defs>\n";
  out += fmt::format("<rect class=\"colorbar\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"url(#colorbar)\" stroke=\"#333333\" stroke-width=\"0.8\"/>\n",
                     num(bx), num(y0), num(bw), num(y1 - y0));
  const Ticks t = axis_ticks(lo, hi, AxisScale::Linear, 5);
  AxisMap bm{lo, hi, y1, y0, AxisScale::Linear};
  for (std::size_t i = 0; i < t.values.size(); ++i) {
    const double y = bm(t.values[i]);
    out += fmt::format("<line class=\"colorbar-tick\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\" stroke=\"#333333\" stroke-width=\"1\"/>\n",
                       num(bx + bw), num(y), num(bx + bw + 4));
    out += text_el(bx + bw + 7, y + fs * 0.35, t.labels[i], "tick", "start", fmt::format(" font-size=\"{}\"", fs - 2));
  }
  if (!m.colorbar_title.empty()) {
    const double x = L.width - 12, y = (y0 + y1) / 2;
    out += text_el(x, y, m.colorbar_title, "colorbar-title", "middle",
                   fmt::format(" transform=\"rotate(-90 {} {})\"", num(x), num(y)));
  }
  out += "</svg>\n";
  return out;
}

std::string png_converter() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  const std::string_view dirs(path);
  for (const char* name : {"rsvg-convert", "convert"}) {
    std::size_t start = 0;
    while (start <= dirs.size()) {
      std::size_t end = dirs.find(':', start);
      if (end == std::string_view::npos) end = dirs.size();
      const std::filesystem::path dir(end > start ? dirs.substr(start, end - start) : std::string_view("."));
      const std::string file = (dir / name).string();
      struct stat st {};
      if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(file.c_str(), X_OK) == 0) return name;
      start = end + 1;
    }
  }
  return "";
}

void write_figure(const std::string& path, const std::string& svg) {
  namespace fs = std::filesystem;
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".svg") {
    write_file_atomic(path, svg);
    return;
  }
  if (ext != ".png") throw Error(fmt::format("{}: figure files must end in .svg or .png", path));
  const std::string tool = png_converter();
  if (tool.empty())
    throw Error(fmt::format("{}: cannot write PNG: neither rsvg-convert (Debian package librsvg2-bin) nor "
                            "ImageMagick convert is on PATH (write .svg instead)",
                            path));
  const std::string stem = fmt::format("{}.tmp.{}", path, static_cast<long>(getpid()));
  const std::string tmp_svg = stem + ".svg", tmp_png = stem + ".png";
  write_file_atomic(tmp_svg, svg);
  std::vector<std::string> args;
  if (tool == "rsvg-convert") args = {tool, "-f", "png", "-o", tmp_png, tmp_svg};
  else args = {tool, tmp_svg, tmp_png};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, tool.c_str(), nullptr, nullptr, argv.data(), environ);
  int status = 0;
  if (rc == 0) {
    while (waitpid(pid, &status, 0) < 0) {
      if (errno != EINTR) {
        rc = errno;
        break;
      }
    }
  }
  std::remove(tmp_svg.c_str());
  std::error_code ec;
  if (rc != 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 || !fs::exists(tmp_png, ec) ||
      fs::file_size(tmp_png, ec) == 0) {
    std::remove(tmp_png.c_str());
    throw Error(fmt::format("{}: {} failed to convert the SVG to PNG ({})", path, tool,
                            rc != 0 ? fmt::format("cannot run: error {}", rc)
                            : WIFEXITED(status) ? fmt::format("exit status {}", WEXITSTATUS(status))
                                                : std::string("killed by a signal")));
  }
  fs::rename(tmp_png, path, ec);
  if (ec) {
    std::remove(tmp_png.c_str());
    throw Error(fmt::format("{}: cannot move the PNG into place: {}", path, ec.message()));
  }
}

}  // namespace kvcompact
