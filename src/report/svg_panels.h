// Several standalone SVG figures side by side in one SVG document (multi-panel figures).
#pragma once

#include <string>
#include <vector>

namespace kvcompact {

/// Places `panels` (standalone SVG documents as render_line_plot returns them, each
/// panel_width x panel_height px) on a grid of `columns` columns, row by row, under an optional
/// title line; returns one SVG document. Throws Error for no panels, columns < 1, non-positive
/// panel sizes, or a panel that is not an SVG document.
std::string compose_panels(const std::vector<std::string>& panels, int columns, int panel_width,
                           int panel_height, const std::string& title = "");

}  // namespace kvcompact
