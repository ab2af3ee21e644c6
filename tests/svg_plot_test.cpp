#include "report/svg_plot.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "budgets/budget_solver.h"
#include "budgets/influence_curves.h"
#include "core/error.h"
#include "report/figures.h"
#include "report/mask_figure.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::string tmp_dir(const std::string& sub) {
  std::string d = std::string(KVC_TEST_TMP) + "/" + sub;
  std::filesystem::create_directories(d);
  return d;
}

std::size_t count(const std::string& s, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

// Well-formedness: every element is closed in order (self-closing or </name>), the root is <svg>,
// no stray '<' or '&' outside tags/entities.
::testing::AssertionResult well_formed(const std::string& s) {
  std::vector<std::string> stack;
  std::size_t i = 0;
  bool root_seen = false;
  while (i < s.size()) {
    if (s[i] == '&') {
      std::size_t semi = s.find(';', i);
      const std::string ent = s.substr(i, semi == std::string::npos ? 8 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return ::testing::AssertionFailure() << "bad entity at " << i << ": " << ent;
      i = semi + 1;
      continue;
    }
    if (s[i] != '<') {
      if (s[i] == '>') return ::testing::AssertionFailure() << "stray '>' at " << i;
      ++i;
      continue;
    }
    std::size_t end = s.find('>', i);
    if (end == std::string::npos) return ::testing::AssertionFailure() << "unterminated tag at " << i;
    std::string tag = s.substr(i + 1, end - i - 1);
    if (count(tag, "<")) return ::testing::AssertionFailure() << "'<' inside tag at " << i;
    if (count(tag, "\"") % 2) return ::testing::AssertionFailure() << "unbalanced quotes in <" << tag << ">";
    i = end + 1;
    if (tag.rfind("?xml", 0) == 0) continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name)
        return ::testing::AssertionFailure() << "</" << name << "> closes " << (stack.empty() ? "nothing" : stack.back());
      stack.pop_back();
      continue;
    }
    const std::string name = tag.substr(0, tag.find_first_of(" \n/"));
    if (stack.empty()) {
      if (root_seen || name != "svg") return ::testing::AssertionFailure() << "root element is <" << name << ">";
      root_seen = true;
    }
    if (tag.back() != '/') stack.push_back(name);
  }
  if (!stack.empty()) return ::testing::AssertionFailure() << "<" << stack.back() << "> never closed";
  if (!root_seen) return ::testing::AssertionFailure() << "no <svg> root";
  return ::testing::AssertionSuccess();
}

// The d attribute of the k-th <path class="series">, as (x, y) points.
std::vector<std::pair<double, double>> series_points(const std::string& svg, std::size_t k) {
  std::size_t p = 0;
  for (std::size_t i = 0; i <= k; ++i) {
    p = svg.find("<path class=\"series\"", i == 0 ? 0 : p + 1);
    if (p == std::string::npos) return {};
  }
  const std::size_t d0 = svg.find("d=\"", p) + 3, d1 = svg.find('"', d0);
  const std::string d = svg.substr(d0, d1 - d0);
  std::vector<std::pair<double, double>> out;  // "M x,y L x,y ..."
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (d[i] != 'M' && d[i] != 'L') continue;
    std::size_t used = 0;
    const double x = std::stod(d.substr(i + 1), &used);
    const std::size_t comma = d.find(',', i + 1);
    const double y = std::stod(d.substr(comma + 1));
    out.emplace_back(x, y);
    i = comma;
  }
  return out;
}

LinePlot simple_plot() {
  LinePlot p;
  p.title = "Known points";
  p.x.title = "x title";
  p.y.title = "y title";
  p.x.min = 0;
  p.x.max = 10;
  p.y.min = 0;
  p.y.max = 100;
  p.legend = false;
  PlotSeries s;
  s.label = "line";
  s.x = {0, 5, 10};
  s.y = {0, 50, 100};
  p.series.push_back(s);
  return p;
}

// Default layout without a legend: plot area x in [78, 740], y in [44, 402].
TEST(SvgPlot, LinearAxisMapsKnownPoints) {
  const std::string svg = render_line_plot(simple_plot());
  EXPECT_TRUE(well_formed(svg));
  const auto pts = series_points(svg, 0);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_NEAR(pts[0].first, 78.0, 0.006);
  EXPECT_NEAR(pts[0].second, 402.0, 0.006);
  EXPECT_NEAR(pts[1].first, 409.0, 0.006);  // 78 + 0.5 * 662
  EXPECT_NEAR(pts[1].second, 223.0, 0.006);  // 402 - 0.5 * 358
  EXPECT_NEAR(pts[2].first, 740.0, 0.006);
  EXPECT_NEAR(pts[2].second, 44.0, 0.006);
  EXPECT_EQ(count(svg, "<svg "), 1u);
  EXPECT_NE(svg.find(">x title</text>"), std::string::npos);
  EXPECT_NE(svg.find(">y title</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Known points</text>"), std::string::npos);
  // Ticks 0, 1, ..., 10 on x and 0, 20, ..., 100 on y: one grid line and one label each.
  EXPECT_EQ(count(svg, "<line class=\"grid\""), 17u);
  EXPECT_EQ(count(svg, "<text class=\"tick\""), 17u);
  EXPECT_NE(svg.find(">100</text>"), std::string::npos);
}

TEST(SvgPlot, LogAxesMapKnownPoints) {
  LinePlot p = simple_plot();
  p.x.scale = AxisScale::Log10;
  p.x.min = 1;
  p.x.max = 100;
  p.y.scale = AxisScale::Log2;
  p.y.min = 0.0625;
  p.y.max = 1;
  p.series[0].x = {1, 10, 100};
  p.series[0].y = {0.125, 0.25, 1};
  const std::string svg = render_line_plot(p);
  EXPECT_TRUE(well_formed(svg));
  const auto pts = series_points(svg, 0);
  ASSERT_EQ(pts.size(), 3u);
  EXPECT_NEAR(pts[0].first, 78.0, 0.006);
  EXPECT_NEAR(pts[1].first, 409.0, 0.006);     // log10(10) is halfway between 0 and 2
  EXPECT_NEAR(pts[0].second, 312.5, 0.006);    // log2(1/8) = -3 is 1/4 of the way up from -4
  EXPECT_NEAR(pts[1].second, 223.0, 0.006);    // -2: halfway
  EXPECT_NEAR(pts[2].second, 44.0, 0.006);
  // Power-of-base ticks: 1, 10, 100 with 2 and 5 multiples (2 decades) ... and 1/16 .. 1.
  EXPECT_NE(svg.find(">1/16</text>"), std::string::npos);
  EXPECT_NE(svg.find(">1/2</text>"), std::string::npos);
  EXPECT_NE(svg.find(">10</text>"), std::string::npos);
  AxisMap m{0.01, 1, 0, 200, AxisScale::Log10};
  EXPECT_NEAR(m(0.1), 100.0, 1e-12);
  AxisMap m2{0.25, 1, 300, 100, AxisScale::Log2};
  EXPECT_NEAR(m2(0.5), 200.0, 1e-12);
}

TEST(SvgPlot, Ticks) {
  auto t = axis_ticks(0, 1, AxisScale::Linear, 5);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));
  t = axis_ticks(-0.05, 0.31, AxisScale::Linear, 6);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"-0.05", "0.00", "0.05", "0.10", "0.15", "0.20", "0.25", "0.30"}));
  t = axis_ticks(0.001, 1, AxisScale::Log10);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.001", "0.01", "0.1", "1"}));
  t = axis_ticks(1.0 / 128, 1, AxisScale::Log2);
  ASSERT_EQ(t.values.size(), 8u);
  EXPECT_DOUBLE_EQ(t.values[0], 1.0 / 128);
  EXPECT_EQ(t.labels[0], "1/128");
  EXPECT_EQ(t.labels[7], "1");
  t = axis_ticks(0.01, 0.5, AxisScale::Log10);  // < 2 decades: 1, 2, 5 multiples
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.01", "0.02", "0.05", "0.1", "0.2", "0.5"}));
  EXPECT_THROW(axis_ticks(1, 1, AxisScale::Linear), Error);
  EXPECT_THROW(axis_ticks(0, 1, AxisScale::Log10), Error);
  // Automatic ranges widen to nice ticks / powers of the base.
  PlotAxis a;
  EXPECT_EQ(axis_range(a, {0.13, 0.87}, "t"), (std::pair<double, double>{0.1, 0.9}));
  a.scale = AxisScale::Log2;
  EXPECT_EQ(axis_range(a, {0.01, 0.5}, "t"), (std::pair<double, double>{1.0 / 128, 0.5}));
  EXPECT_THROW(axis_range(a, {0.0, 0.5}, "t"), Error);
}

TEST(SvgPlot, ElementsBandsLegendAndEscaping) {
  LinePlot p;
  p.title = "Bands & <lines>";
  p.x.title = "ratio";
  p.y.title = "delta";
  PlotSeries a;
  a.label = "first <a>";
  a.x = {0.1, 0.2, 0.3};
  a.y = {1, 2, 3};
  a.band_lo = {0.5, 1.5, 2.5};
  a.band_hi = {1.5, 2.5, 3.5};
  a.markers = true;
  p.series.push_back(a);
  PlotSeries b;
  b.label = "second";
  b.x = {0.1, 0.3};
  b.y = {3, 1};
  b.style = LineStyle::Dashed;
  b.color = "#123456";
  p.series.push_back(b);
  p.vlines.push_back({0.2, "baseline", LineStyle::Dashed, "#555555"});
  const std::string svg = render_line_plot(p);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<path "), 3u);  // 2 lines + 1 band
  EXPECT_EQ(count(svg, "<path class=\"series\""), 2u);
  EXPECT_EQ(count(svg, "<path class=\"band\""), 1u);
  EXPECT_EQ(count(svg, "<circle class=\"marker\""), 3u);
  EXPECT_EQ(count(svg, "<line class=\"vline\""), 1u);
  EXPECT_EQ(count(svg, "<line class=\"legend-line\""), 3u);  // 2 series + the vline
  EXPECT_EQ(count(svg, "<rect class=\"legend-band\""), 1u);
  EXPECT_EQ(count(svg, "<text class=\"legend\""), 3u);
  EXPECT_NE(svg.find(">first &lt;a&gt;</text>"), std::string::npos);
  EXPECT_NE(svg.find(">second</text>"), std::string::npos);
  EXPECT_NE(svg.find(">baseline</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Bands &amp; &lt;lines&gt;</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "stroke-dasharray"), 4u);  // dashed series, vline, and their legend samples
  EXPECT_NE(svg.find("stroke=\"#123456\""), std::string::npos);
  // The vertical line sits where the x map puts 0.2.
  const auto [mx, my] = line_plot_maps(p);
  const std::string x = fmt::format("x1=\"{:.2f}\"", mx(0.2));
  EXPECT_NE(svg.find("<line class=\"vline\" " + x), std::string::npos) << x;
}

TEST(SvgPlot, BadSeriesNameThePlotAndSeries) {
  LinePlot p = simple_plot();
  p.series[0].y.pop_back();
  try {
    render_line_plot(p);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'line'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Known points"), std::string::npos) << e.what();
  }
  p = simple_plot();
  p.series[0].y[1] = std::nan("");
  EXPECT_THROW(render_line_plot(p), Error);
  p = simple_plot();
  p.x.scale = AxisScale::Log10;
  p.x.min.reset();
  EXPECT_THROW(render_line_plot(p), Error);  // x = 0 on a log axis
  p = simple_plot();
  p.series[0].band_lo = {0};
  EXPECT_THROW(render_line_plot(p), Error);
  p = simple_plot();
  p.series.clear();
  EXPECT_THROW(render_line_plot(p), Error);
}

TEST(SvgPlot, Heatmap) {
  Heatmap m;
  m.title = "Map";
  m.x_title = "KV head";
  m.y_title = "layer";
  m.colorbar_title = "proportion";
  m.row_labels = {"L0", "L1"};
  m.col_labels = {"H0", "H1", "H2"};
  m.values = {{0.1, 0.2, 0.3}, {0.0, 0.15, 0.25}};
  const std::string svg = render_heatmap(m);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_EQ(count(svg, "<rect class=\"cell\""), 6u);
  EXPECT_EQ(count(svg, "<text class=\"value\""), 6u);
  EXPECT_NE(svg.find(">0.150</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<text class=\"row-label\""), 2u);
  EXPECT_EQ(count(svg, "<text class=\"col-label\""), 3u);
  EXPECT_NE(svg.find(">H2</text>"), std::string::npos);
  EXPECT_NE(svg.find(">proportion</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<rect class=\"colorbar\""), 1u);
  // The smallest value gets the first viridis colour, the largest the last.
  EXPECT_NE(svg.find("fill=\"" + viridis(0) + "\""), std::string::npos);
  EXPECT_NE(svg.find("fill=\"" + viridis(1) + "\""), std::string::npos);
  EXPECT_EQ(viridis(0), "#440154");
  EXPECT_EQ(viridis(1), "#fde725");
  m.values[1].pop_back();
  EXPECT_THROW(render_heatmap(m), Error);
  m.values[1].push_back(INFINITY);
  EXPECT_THROW(render_heatmap(m), Error);
  m.values[1].back() = 0.2;
  m.col_labels.pop_back();
  EXPECT_THROW(render_heatmap(m), Error);
}

bool starts_with_png_signature(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char b[8] = {};
  in.read(b, 8);
  return in.gcount() == 8 && std::string(b, 8) == std::string("\x89PNG\r\n\x1a\n", 8);
}

TEST(SvgPlot, WriteSvgAndPng) {
  const std::string dir = tmp_dir("svg_plot");
  const std::string svg = render_line_plot(simple_plot());
  write_figure(dir + "/plot.svg", svg);
  std::ifstream in(dir + "/plot.svg");
  std::string back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(back, svg);
  ASSERT_NE(png_converter(), "") << "install librsvg2-bin (scripts/setup.sh) for PNG output";
  std::filesystem::remove(dir + "/plot.png");
  write_figure(dir + "/plot.png", svg);
  EXPECT_TRUE(starts_with_png_signature(dir + "/plot.png"));
  EXPECT_THROW(write_figure(dir + "/plot.gif", svg), Error);
}

TEST(SvgPlot, PngWithoutConverterSaysWhatIsMissing) {
  const std::string dir = tmp_dir("svg_plot_nopath");
  const char* old = std::getenv("PATH");
  const std::string saved = old ? old : "";
  setenv("PATH", dir.c_str(), 1);  // an empty folder: no converter
  EXPECT_EQ(png_converter(), "");
  try {
    write_figure(dir + "/x.png", render_line_plot(simple_plot()));
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rsvg-convert"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("x.png"), std::string::npos) << e.what();
  }
  write_figure(dir + "/x.svg", render_line_plot(simple_plot()));  // SVG needs no converter
  setenv("PATH", saved.c_str(), 1);
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.png"));
  EXPECT_TRUE(std::filesystem::exists(dir + "/x.svg"));
}

// --- Named figures -------------------------------------------------------------------------

InfluenceCurves demo_curves() {
  InfluenceCurves c;
  c.model_fingerprint = "0x0";
  c.method = "am";
  c.grid = parse_ratio_grid("0:0.5:26");
  c.baseline_ratio = 0.1;
  c.n_layers = 5;
  c.n_kv_heads = 4;
  for (int l = 0; l < 5; ++l)
    for (int k = 0; k < 4; ++k) {
      HeadCurve h;
      h.layer = l;
      h.kv_head = k;
      h.ratios = c.grid;
      const double a = 0.02 + 0.3 * std::exp(-0.6 * l) * (1 + 0.5 * k);
      for (double r : c.grid) {
        h.mean.push_back(a * (std::exp(-25 * r) - std::exp(-2.5)) + 0.002 * std::sin(40 * r));
        h.sem.push_back(0.01 + 0.2 * a * std::exp(-10 * r));
        h.std.push_back(3 * h.sem.back());
      }
      h.documents = 9;
      c.heads.push_back(h);
    }
  return c;
}

TEST(Figures, InfluenceFigure) {
  const auto c = demo_curves();
  const std::string svg = influence_figure(c, parse_head_names("L0H0,L2H1,L4H3", 5, 4), BandKind::Sem);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_NE(svg.find(">Head influence curves</text>"), std::string::npos);
  EXPECT_NE(svg.find(">head ratio (fraction of original keys)</text>"), std::string::npos);
  EXPECT_NE(svg.find(">delta log(perplexity) from baseline</text>"), std::string::npos);
  EXPECT_NE(svg.find(">Layer 2 Head 1</text>"), std::string::npos);
  EXPECT_EQ(count(svg, "<text class=\"legend\""), 4u);  // 3 heads + baseline
  EXPECT_EQ(count(svg, "<path class=\"series\""), 3u);
  EXPECT_EQ(count(svg, "<path class=\"band\""), 3u);
  EXPECT_EQ(count(svg, "<line class=\"vline\""), 1u);
  // The band of L2H1 spans mean -/+ sem at the baseline: check the series point against the map.
  const auto pts = series_points(svg, 1);
  ASSERT_EQ(pts.size(), 26u);
  EXPECT_EQ(count(influence_figure(c, {}, BandKind::None), "<path class=\"band\""), 0u);
  EXPECT_EQ(count(influence_figure(c), "<path class=\"series\""), 20u);
  EXPECT_THROW(influence_figure(c, {{5, 0}}), Error);
  EXPECT_EQ(parse_band_kind("std"), BandKind::Std);
  EXPECT_THROW(parse_band_kind("var"), Error);
}

// The area heatmap puts each head's trapezoid area (worked out here from its mean curve) in its
// cell, labels a layer without curves "(not swept)", and refuses a head outside the shape.
TEST(Figures, InfluenceAreaHeatmap) {
  auto c = demo_curves();
  std::erase_if(c.heads, [](const HeadCurve& h) { return h.layer == 3; });
  const HeadCurve& h21 = c.heads[2 * 4 + 1];
  ASSERT_EQ(h21.name(), "L2H1");
  double area = 0;
  for (std::size_t i = 1; i < h21.ratios.size(); ++i)
    area += (h21.ratios[i] - h21.ratios[i - 1]) * (h21.mean[i] + h21.mean[i - 1]) / 2;
  const std::string svg = influence_area_heatmap(c);
  EXPECT_TRUE(well_formed(svg));
  EXPECT_NE(svg.find(fmt::format(">{:.4f}<", area)), std::string::npos) << area;
  EXPECT_NE(svg.find(">L3 (not swept)<"), std::string::npos);
  EXPECT_NE(svg.find(">L4<"), std::string::npos);
  c.heads[0].layer = 7;
  EXPECT_THROW(influence_area_heatmap(c), Error);
  c.heads.clear();
  EXPECT_THROW(influence_area_heatmap(c), Error);
}

TEST(Figures, BudgetHeatmapAndFrontiers) {
  const auto pyr = pyramid_schedule(5, 4, {0.1});
  const std::string heat = budget_heatmap(pyr);
  EXPECT_TRUE(well_formed(heat));
  EXPECT_EQ(count(heat, "<rect class=\"cell\""), 20u);
  EXPECT_NE(heat.find(">Per-head KV budget (pyramid)</text>"), std::string::npos);
  EXPECT_NE(heat.find(">L4</text>"), std::string::npos);
  EXPECT_NE(heat.find(">0.0975</text>"), std::string::npos);  // layer 0: 0.39 / 4

  std::vector<FrontierPoint> pts;
  for (const char* s : {"optimized", "uniform", "pyramid"})
    for (double r : {0.01, 0.02, 0.05, 0.1, 0.2})
      pts.push_back({s, r, (s[0] == 'o' ? 0.5 : 1.0) * 0.05 / r, 0.01});
  const std::string f = frontier_figure(pts);
  EXPECT_TRUE(well_formed(f));
  EXPECT_EQ(count(f, "<path class=\"series\""), 3u);
  EXPECT_EQ(count(f, "<circle class=\"marker\""), 15u);
  EXPECT_NE(f.find(">pyramid</text>"), std::string::npos);
  EXPECT_NE(f.find(">total keep ratio (fraction of original keys)</text>"), std::string::npos);
  const std::string mf = method_frontier_figure(pts);
  EXPECT_NE(mf.find(">keep ratio (fraction of original keys)</text>"), std::string::npos);
  auto dup = pts;
  dup.push_back(pts[0]);
  EXPECT_THROW(frontier_figure(dup), Error);
  auto zero = pts;
  zero[0].ratio = 0;
  EXPECT_THROW(frontier_figure(zero), Error);
  EXPECT_THROW(frontier_figure({}), Error);
}

// A side-by-side comparison: each method's kvcompact line solid, the peer's dashed, both in the
// method's colour; bad points are refused.
TEST(Figures, ComparisonSolidOwnDashedPeer) {
  std::vector<ComparisonPoint> pts;
  for (const char* m : {"SnapKV", "Knorm"})
    for (bool peer : {false, true})
      for (double r : {0.1, 0.5}) pts.push_back({m, peer, r, 50 + 10 * r + (peer ? 1 : 0), 3});
  const std::string f = comparison_figure(pts, "RULER", "accuracy (x100)", "kvpress");
  EXPECT_TRUE(well_formed(f));
  EXPECT_EQ(count(f, "<path class=\"series\""), 4u);
  EXPECT_EQ(count(f, "<circle class=\"marker\""), 8u);
  EXPECT_NE(f.find(">SnapKV (kvpress)</text>"), std::string::npos);
  EXPECT_NE(f.find(">Knorm (kvcompact)</text>"), std::string::npos);
  EXPECT_NE(f.find(">accuracy (x100)</text>"), std::string::npos);
  EXPECT_EQ(count(f, "stroke-dasharray"), 4u);  // the two peer lines and their legend entries
  // Each method's colour is used by both of its lines.
  EXPECT_GE(count(f, palette_color(0)), 2u);
  EXPECT_GE(count(f, palette_color(1)), 2u);
  auto dup = pts;
  dup.push_back(pts[0]);
  EXPECT_THROW(comparison_figure(dup, "t", "y", "kvpress"), Error);
  auto bad = pts;
  bad[1].sem = -1;
  EXPECT_THROW(comparison_figure(bad, "t", "y", "kvpress"), Error);
  bad = pts;
  bad[2].ratio = 1.5;
  EXPECT_THROW(comparison_figure(bad, "t", "y", "kvpress"), Error);
  EXPECT_THROW(comparison_figure({}, "t", "y", "kvpress"), Error);
}

// Renders one of each figure to PNG (for a person to look at; not asserted beyond the signature).
TEST(Figures, RenderPngs) {
  const std::string dir = tmp_dir("figures");
  const auto c = demo_curves();
  BudgetSolverOptions o;
  o.units = 50;
  const auto opt = optimize_budgets(c, o);
  std::vector<FrontierPoint> pts;
  for (const auto& s : {opt, uniform_schedule(5, 4, o.targets), pyramid_schedule(5, 4, o.targets)}) {
    auto t = s;
    set_predicted_delta(t, c);
    for (const auto& [r, d] : t.predicted_delta) pts.push_back({t.schedule, r, d, 0.02 * std::fabs(d)});
  }
  std::vector<FrontierPoint> methods;
  for (const char* m : {"am", "random", "recent", "attn-nofit"})
    for (double r : {0.05, 0.1, 0.2, 0.5, 1.0})
      methods.push_back({m, r, r == 1.0 ? 0.0 : (m[0] == 'a' ? 0.2 : 1.0) * (1 - r) * (m[1] == 't' ? 1.5 : 1.0), 0.03});
  const std::vector<std::pair<std::string, std::string>> figs{
      {"influence.png", influence_figure(c, parse_head_names("L0H0,L0H3,L1H2,L2H1,L3H0,L4H3", 5, 4))},
      {"influence_all.png", influence_figure(c, {}, BandKind::Std)},
      {"budget_heatmap.png", budget_heatmap(opt)},
      {"frontier.png", frontier_figure(pts)},
      {"method_frontier.png", method_frontier_figure(methods)}};
  for (const auto& [name, svg] : figs) {
    write_figure(dir + "/" + name, svg);
    EXPECT_TRUE(starts_with_png_signature(dir + "/" + name)) << name;
  }
}

}}  // namespace
}  // namespace kvcompact

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// A family whose unmasked exact-match accuracy is 0 is named by zero_accuracy_families and marked
// in its figure panel, whatever its cm_accuracy (BLEU of the unmasked answer against itself makes
// that 1 for long answers); a family with any correct answer is not.
TEST(Figures, MaskFigureMarksFamiliesWithZeroUnmaskedAccuracy) {
  MaskEvalResult r;
  r.score_method = "patching";
  r.ablation = "scale:0.0001";
  r.reference = "gold";
  r.metrics = {"accuracy", "cm_accuracy"};
  r.families = {"math", "knowledge", "inference"};
  r.ks = {16};
  r.random_seeds = 2;
  auto rows = [&](const std::string& f, double acc, double cm) {
    for (const auto& [m, v] : {std::pair<std::string, double>{"accuracy", acc}, {"cm_accuracy", cm}}) {
      r.rows.push_back({f, 0, "none", m, v, 0, 1, 50});
      r.rows.push_back({f, 16, "topk", m, v / 2, 0, 1, 50});
      r.rows.push_back({f, 16, "randomk", m, v, 0.01, 2, 50});
    }
  };
  rows("math", 0.0, 0.0);       // nothing right: marked
  rows("knowledge", 0.0, 1.0);  // exact match 0; CM's rule counts every unmasked answer: still marked
  rows("inference", 0.4, 0.5);
  EXPECT_EQ(zero_accuracy_families(r), (std::vector<std::string>{"math", "knowledge"}));
  const std::string svg = mask_eval_figure(r);
  EXPECT_NE(svg.find("math: UNMASKED ACCURACY 0"), std::string::npos);
  EXPECT_NE(svg.find("knowledge: UNMASKED ACCURACY 0"), std::string::npos);
  EXPECT_EQ(svg.find("inference: UNMASKED"), std::string::npos);
  // every metric gets one legend entry in its colour (five metrics fit the legend panel)
  r.metrics = {"accuracy", "cm_accuracy", "bleu", "rouge1", "cosine"};
  const std::string five = mask_eval_figure(r);
  for (const char* label : {">accuracy (exact match)<", ">accuracy (CM rule)<", ">BLEU<", ">ROUGE-1 F<", ">cosine (MiniLM)<"})
    EXPECT_NE(five.find(label), std::string::npos) << label;
}

}}  // namespace
}  // namespace kvcompact
