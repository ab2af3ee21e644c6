// A small dependency-free SVG 1.1 writer for line plots (with shaded bands, markers, dashed lines,
// vertical reference lines, linear/log2/log10 axes, legend) and heatmaps (with a colour bar),
// plus atomic writing of .svg files and conversion to .png with rsvg-convert or ImageMagick.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace kvcompact {

enum class AxisScale { Linear, Log2, Log10 };
enum class LineStyle { Solid, Dashed };

/// One axis. min/max fix the data range shown; when absent the range covers the data (for linear
/// axes widened to the enclosing "nice" ticks, for log axes to the enclosing powers of the base).
struct PlotAxis {
  std::string title;
  AxisScale scale = AxisScale::Linear;
  std::optional<double> min;
  std::optional<double> max;
};

/// A line through points (x[i], y[i]); x, y: [n]. band_lo/band_hi: empty or [n], a shaded band
/// drawn under the line (e.g. mean -/+ sem). color: any SVG colour, empty = next palette colour.
struct PlotSeries {
  std::string label;  ///< legend text; empty = not in the legend
  std::vector<double> x;
  std::vector<double> y;
  std::vector<double> band_lo;
  std::vector<double> band_hi;
  LineStyle style = LineStyle::Solid;
  std::string color;
  bool markers = false;  ///< a small circle at each point
  double width = 1.8;    ///< stroke width in px
};

/// A vertical reference line across the plot area at data coordinate x (label in the legend when
/// non-empty).
struct PlotVLine {
  double x = 0;
  std::string label;
  LineStyle style = LineStyle::Dashed;
  std::string color = "#555555";
};

/// Layout of a figure in px. The plot area is the rectangle [left, width - right - legend width]
/// x [top, height - bottom]; data x maps linearly (in the axis' scale) from the x range onto
/// [plot left, plot right], data y from the y range onto [plot bottom, plot top].
struct PlotLayout {
  int width = 760;
  int height = 460;
  int left = 78;
  int right = 20;
  int top = 44;
  int bottom = 58;
  int font_size = 13;
};

/// A line plot.
struct LinePlot {
  std::string title;
  PlotAxis x;
  PlotAxis y;
  std::vector<PlotSeries> series;
  std::vector<PlotVLine> vlines;
  bool legend = true;  ///< legend to the right of the plot area (takes width from it)
  bool zero_line = false;  ///< a thin horizontal line at y = 0 when inside the y range
  double band_opacity = 0.18;  ///< fill opacity of the shaded bands, in (0, 1]
  PlotLayout layout;
};

/// Maps data values on one axis to px: for linear, px0 + (v - lo) / (hi - lo) * (px1 - px0); for
/// log scales the same on log_b(v). lo < hi (and > 0 for log scales).
struct AxisMap {
  double lo = 0, hi = 1;   ///< data range
  double px0 = 0, px1 = 1; ///< px at lo and at hi (px1 < px0 for a y axis)
  AxisScale scale = AxisScale::Linear;
  double operator()(double v) const;
};

/// Tick positions (data values inside [lo, hi]) and their labels: linear 1-2-5 x 10^k steps
/// (about `target` ticks); log10 powers of 10 (with 2 and 5 multiples when the range spans less
/// than two decades; labels "{:.3g}"); log2 powers of 2 (every k-th power when there would be more
/// than ~10; labels "1/128", "1", "64").
/// Throws Error for lo >= hi, non-finite ends or lo <= 0 on a log scale.
struct Ticks {
  std::vector<double> values;
  std::vector<std::string> labels;
};
Ticks axis_ticks(double lo, double hi, AxisScale scale, int target = 6);

/// The data range an axis shows for the given data values (see PlotAxis). Throws Error naming
/// `what` when there are no values, a value is non-finite, or a log axis gets a value <= 0.
std::pair<double, double> axis_range(const PlotAxis& axis, const std::vector<double>& values, const std::string& what);

/// The plot as a standalone SVG document (UTF-8 text). Series with mismatched sizes, non-finite
/// values, or values <= 0 on a log axis throw Error naming the plot title and the series label.
std::string render_line_plot(const LinePlot& plot);

/// The x and y maps render_line_plot uses for `plot` (for tests and annotations).
std::pair<AxisMap, AxisMap> line_plot_maps(const LinePlot& plot);

/// A heatmap: values [rows][cols] drawn as cells coloured by a sequential colour scale (viridis)
/// from vmin (or the smallest value) to vmax (or the largest), row labels on the left (row 0 at
/// the top), column labels below, a colour bar with ticks on the right, optional value text in
/// the cells (printed with `value_format`, a fmt format string such as "{:.3f}").
struct Heatmap {
  std::string title;
  std::string x_title;
  std::string y_title;
  std::string colorbar_title;
  std::vector<std::string> row_labels;  ///< [rows]
  std::vector<std::string> col_labels;  ///< [cols]
  std::vector<std::vector<double>> values;
  std::optional<double> vmin;
  std::optional<double> vmax;
  bool annotate = true;
  std::string value_format = "{:.3f}";
  PlotLayout layout{.width = 640, .height = 460, .left = 80, .right = 110, .top = 44, .bottom = 62, .font_size = 13};
};

/// The heatmap as a standalone SVG document. Throws Error (naming the title) for no rows or
/// columns, ragged rows, label counts that differ from the matrix, or a non-finite value.
std::string render_heatmap(const Heatmap& map);

/// Viridis colour at t in [0, 1] (clamped) as "#rrggbb".
std::string viridis(double t);

/// The i-th colour of the default palette (20 distinct colours, cycling).
std::string palette_color(std::size_t i);

/// Escapes &, <, >, " and ' for SVG text and attribute values.
std::string xml_escape(const std::string& text);

/// Name of the first SVG-to-PNG converter on PATH: "rsvg-convert" (Debian librsvg2-bin), else
/// "convert" (ImageMagick); "" when neither is found.
std::string png_converter();

/// Writes `svg` to `path`: ".svg" -> the text, atomically (io/atomic_file.h); ".png" -> rendered
/// by png_converter() into a temporary file beside `path` that is then renamed over it. Throws
/// Error naming the path: for another extension, when neither rsvg-convert (Debian librsvg2-bin)
/// nor ImageMagick convert is on PATH, or when the converter fails.
void write_figure(const std::string& path, const std::string& svg);

}  // namespace kvcompact
