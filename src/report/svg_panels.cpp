#include "report/svg_panels.h"

#include <fmt/format.h>

#include "core/error.h"
#include "report/svg_plot.h"

namespace kvcompact {

std::string compose_panels(const std::vector<std::string>& panels, int columns, int panel_width,
                           int panel_height, const std::string& title) {
  if (panels.empty()) throw Error("panel figure: no panels");
  if (columns < 1 || panel_width < 1 || panel_height < 1)
    throw Error(fmt::format("panel figure: bad layout ({} columns of {} x {} px)", columns, panel_width,
                            panel_height));
  const int n = static_cast<int>(panels.size());
  const int cols = std::min(columns, n), rows = (n + cols - 1) / cols;
  const int top = title.empty() ? 0 : 34;
  const int width = cols * panel_width, height = top + rows * panel_height;
  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      width, height);
  if (!title.empty())
    out += fmt::format(
        "<text x=\"{}\" y=\"24\" text-anchor=\"middle\" font-family=\"sans-serif\" font-size=\"17\" "
        "font-weight=\"bold\">{}</text>\n",
        width / 2, xml_escape(title));
  for (int i = 0; i < n; ++i) {
    const std::string& p = panels[i];
    const std::size_t at = p.find("<svg");
    if (at == std::string::npos) throw Error(fmt::format("panel figure: panel {} is not an SVG document", i));
    const int x = (i % cols) * panel_width, y = top + (i / cols) * panel_height;
    out += fmt::format("<svg x=\"{}\" y=\"{}\"", x, y);
    out += p.substr(at + 4);
    if (out.back() != '\n') out += '\n';
  }
  out += "</svg>\n";
  return out;
}

}  // namespace kvcompact
