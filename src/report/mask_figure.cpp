#include "report/mask_figure.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"
#include "report/svg_panels.h"
#include "report/svg_plot.h"

namespace kvcompact {

namespace {

std::string metric_label(const std::string& m) {
  if (m == "accuracy") return "accuracy (exact match)";
  if (m == "cm_accuracy") return "accuracy (CM rule)";
  if (m == "cosine") return "cosine (MiniLM)";
  if (m == "rouge1") return "ROUGE-1 F";
  if (m == "bleu") return "BLEU";
  if (m == "chrf") return "chrF / 100";
  if (m == "comet") return "COMET";
  return m;
}

double metric_scale(const std::string& m) { return m == "chrf" ? 0.01 : 1.0; }

// A panel holding only the legend: one colour per metric, then the three line styles.
std::string legend_panel(const std::vector<std::string>& metrics, int width, int height) {
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
      "width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" font-family=\"DejaVu Sans, Helvetica, "
      "Arial, sans-serif\" font-size=\"13\">\n",
      width, height);
  int y = 50;
  for (std::size_t mi = 0; mi < metrics.size(); ++mi) {
    out += fmt::format("<line x1=\"30\" y1=\"{0}\" x2=\"70\" y2=\"{0}\" stroke=\"{1}\" stroke-width=\"3\"/>\n", y,
                       palette_color(mi));
    out += fmt::format("<text x=\"80\" y=\"{}\">{}</text>\n", y + 4, xml_escape(metric_label(metrics[mi])));
    y += 22;
  }
  y += 10;
  const struct {
    const char* what;
    const char* dash;
    double w;
  } kinds[] = {{"TopK", "", 1.8}, {"RandomK (mean -/+ SEM)", " stroke-dasharray=\"6,4\"", 1.8},
               {"no mask", " stroke-dasharray=\"6,4\"", 0.8}};
  for (const auto& k : kinds) {
    out += fmt::format("<line x1=\"30\" y1=\"{0}\" x2=\"70\" y2=\"{0}\" stroke=\"#444444\" stroke-width=\"{1}\"{2}/>\n",
                       y, k.w, k.dash);
    out += fmt::format("<text x=\"80\" y=\"{}\">{}</text>\n", y + 4, k.what);
    y += 22;
  }
  out += "</svg>\n";
  return out;
}

}  // namespace

std::string mask_eval_figure(const MaskEvalResult& result) {
  // answer NLL (nats/token, lower is better) is not a 0..1 score: it stays in the tables
  MaskEvalResult r = result;
  r.metrics.erase(std::remove(r.metrics.begin(), r.metrics.end(), "nll"), r.metrics.end());
  std::erase_if(r.rows, [](const MaskEvalRow& row) { return row.metric == "nll"; });
  if (r.ks.empty() || r.rows.empty()) throw Error("mask-eval figure: no K values or no rows to plot");
  const PlotLayout layout{.width = 430, .height = 330, .left = 62, .right = 12, .top = 40, .bottom = 52,
                          .font_size = 12};
  std::vector<std::string> panels;
  const double kmin = *std::min_element(r.ks.begin(), r.ks.end());
  const double kmax = *std::max_element(r.ks.begin(), r.ks.end());
  // one y range for every panel: 0 .. 1.1 x the largest value (0 .. 1 when everything is 0)
  double ymax = 0.0;
  for (const MaskEvalRow& row : r.rows) ymax = std::max(ymax, (row.mean + row.sem) * metric_scale(row.metric));
  ymax = ymax > 0 ? ymax * 1.1 : 1.0;
  const std::vector<std::string> zero = zero_accuracy_families(result);
  for (std::size_t fi = 0; fi < r.families.size(); ++fi) {
    const std::string& f = r.families[fi];
    LinePlot plot;
    plot.title = f;
    if (std::find(zero.begin(), zero.end(), f) != zero.end())
      plot.title = fmt::format("{}: UNMASKED ACCURACY 0", f);
    plot.x = {"# masked heads", AxisScale::Log2, kmin == kmax ? kmin / 2 : kmin, kmin == kmax ? kmax * 2 : kmax};
    plot.y = {"score", AxisScale::Linear, 0.0, ymax};
    plot.layout = layout;
    plot.legend = false;
    for (std::size_t mi = 0; mi < r.metrics.size(); ++mi) {
      const std::string& m = r.metrics[mi];
      const double s = metric_scale(m);
      const std::string color = palette_color(mi);
      PlotSeries top, rnd, none;
      top.label = metric_label(m) + ", TopK";
      top.color = color;
      top.markers = true;
      rnd.label = metric_label(m) + ", RandomK";
      rnd.color = color;
      rnd.style = LineStyle::Dashed;
      none.label = metric_label(m) + ", no mask";
      none.color = color;
      none.width = 0.8;
      none.style = LineStyle::Dashed;
      for (const MaskEvalRow& row : r.rows) {
        if (row.family != f || row.metric != m) continue;
        if (row.condition == "topk") {
          top.x.push_back(row.k);
          top.y.push_back(row.mean * s);
        } else if (row.condition == "randomk") {
          rnd.x.push_back(row.k);
          rnd.y.push_back(row.mean * s);
          rnd.band_lo.push_back((row.mean - row.sem) * s);
          rnd.band_hi.push_back((row.mean + row.sem) * s);
        } else if (row.condition == "none") {
          none.x = {plot.x.min.value(), plot.x.max.value()};
          none.y = {row.mean * s, row.mean * s};
        }
      }
      for (PlotSeries* p : {&none, &top, &rnd})
        if (!p->x.empty()) plot.series.push_back(*p);
    }
    panels.push_back(render_line_plot(plot));
  }
  panels.push_back(legend_panel(r.metrics, layout.width, layout.height));
  const int cols = std::min<int>(3, static_cast<int>(panels.size()));
  return compose_panels(panels, cols, layout.width, layout.height,
                        fmt::format("TopK (solid) vs RandomK (dashed, -/+ SEM, {} draws{}); {} at {} positions, "
                                    "{} ranking; similarity vs {}",
                                    r.random_seeds, r.random_from == "rest" ? " outside TopK" : "", r.ablation,
                                    r.mask_positions, r.score_method, r.reference == "model" ? "unmasked" : "gold"));
}

}  // namespace kvcompact
