// The project's named figures (issue #4 and compact-eval), built on report/svg_plot.h. Each
// returns a standalone SVG document; write it with write_figure (".svg" or ".png").
#pragma once

#include <string>
#include <vector>

#include "budgets/budget_solver.h"
#include "budgets/influence_curves.h"

namespace kvcompact {

struct CompactEvalRow;  // studies/compact_eval.h

/// Which spread to shade around a mean curve.
enum class BandKind { None, Sem, Std };

/// Parses "sem", "std" or "none". Throws Error naming the text otherwise.
BandKind parse_band_kind(const std::string& text);

/// Head influence curves: title "Head influence curves", x "head ratio (fraction of original
/// keys)" (linear), y "delta log(perplexity) from baseline" (nats/token), one line per head in
/// `heads` order (empty = every curve, in stored order) with a shaded band mean -/+ sem or std,
/// a dashed vertical line at the baseline ratio, legend "Layer L Head H" (H = KV head).
/// Throws Error when a requested head has no curve, or for invalid curves.
std::string influence_figure(const InfluenceCurves& curves, const std::vector<HeadId>& heads = {},
                             BandKind band = BandKind::Sem);

/// Heatmap of the influence areas (HeadCurve::area, nats/token x ratio; more negative = more keys
/// help the head more): rows = layers ("L0" at the top), columns = KV heads; a head without a
/// curve (not swept, or a sliding-window layer) is drawn as 0 and its row labelled "(not swept)"
/// when the whole layer is missing. Throws Error for curves with no head.
std::string influence_area_heatmap(const InfluenceCurves& curves);

/// Writes an influence study's figures into `dir`: influence.svg (influence_figure of every head with
/// `band`), influence.png as well when `png`, and influence_areas.svg (influence_area_heatmap).
/// Throws Error as those and write_figure do.
void write_influence_figures(const std::string& dir, const InfluenceCurves& curves, BandKind band, bool png);

/// Heatmap of a schedule's proportions p_h: rows = layers (layer 0 at the top, labelled "L0"...),
/// columns = KV heads ("H0"...), colour from 0 to the largest proportion, values printed in the
/// cells. Title "Per-head KV budget (<schedule>)". Throws Error for an invalid schedule.
std::string budget_heatmap(const BudgetSchedule& schedule);

/// One point of a quality/size frontier: `series` (a schedule or a compaction method), a total
/// keep ratio in (0, 1], and the mean and SEM over documents of delta NLL (nats/token).
struct FrontierPoint {
  std::string series;
  double ratio = 0;
  double delta_mean = 0;
  double delta_sem = 0;
};

/// Delta log-ppl vs total ratio for several schedules (e.g. optimized/uniform/pyramid): one line
/// with markers per series (series in order of first appearance, points sorted by ratio), shaded
/// mean -/+ SEM band, log10 x axis (1-2-5 ticks within two decades, range padded by 1.25x) "total
/// keep ratio (fraction of original keys)", y "delta log(perplexity) (nats/token)", title
/// "Budget schedules: quality vs cache size". Throws Error for no points, a ratio outside (0, 1],
/// a non-finite value, a negative SEM or a repeated (series, ratio) pair.
std::string frontier_figure(const std::vector<FrontierPoint>& points);

/// The same plot per compaction method, as made by compact-eval: title "Compaction methods:
/// quality vs cache size", log10 x "keep ratio (fraction of original keys)". Same errors.
std::string method_frontier_figure(const std::vector<FrontierPoint>& points);

/// One point of a side-by-side comparison: `method` (the colour), `peer` (false = kvcompact's
/// own run, drawn solid; true = the peer's, e.g. kvpress, drawn dashed), a keep ratio in (0, 1]
/// and the mean and SEM over contexts of the score (any unit; y_title names it).
struct ComparisonPoint {
  std::string method;
  bool peer = false;
  double ratio = 0;
  double mean = 0;
  double sem = 0;
};

/// Score vs keep ratio, one line per (method, side): kvcompact solid, the peer dashed in the same
/// colour, labels "<method> (kvcompact)" / "<method> (<peer_name>)", shaded mean -/+ SEM bands,
/// log10 x axis "keep ratio (fraction of original keys)". Used by bench/peers/compare_kvpress*.py
/// through `kvcompact plot` (JSON kind "comparison"). Same errors as frontier_figure.
std::string comparison_figure(const std::vector<ComparisonPoint>& points, const std::string& title,
                              const std::string& y_title, const std::string& peer_name);

/// Converts compact-eval rows (method, ratio, delta_nll_mean, delta_nll_sem) to frontier points.
std::vector<FrontierPoint> frontier_points(const std::vector<CompactEvalRow>& rows);

}  // namespace kvcompact
