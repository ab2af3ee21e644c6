// Head influence curves (issue #4): for each KV head, the change in log-perplexity when only that
// head's keep ratio r moves over a grid while every other head stays at a baseline ratio.
// Data model, parsing of head/grid options, aggregation over documents, JSON and CSV I/O.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvcompact {

/// One KV head, identified by layer and KV-head index (0-based).
struct HeadId {
  int layer = 0;
  int kv_head = 0;
  bool operator==(const HeadId&) const = default;
};

/// "L<layer>H<kv_head>", e.g. "L3H1".
std::string head_name(int layer, int kv_head);

/// The influence curve of one KV head: delta NLL (nats/token; NLL = log(perplexity)) with this
/// head at ratios[i] and all other heads at the baseline ratio, minus the NLL with every head at
/// the baseline ratio. mean/sem/std are over `documents` documents (sem = std / sqrt(documents),
/// std the sample standard deviation with n-1; both 0 for one document).
/// ratios, mean, sem, std: [n_points], ratios strictly increasing in [0, 1].
struct HeadCurve {
  int layer = 0;
  int kv_head = 0;
  /// "L<layer>H<kv_head>".
  std::string name() const { return head_name(layer, kv_head); }
  std::vector<double> ratios;
  std::vector<double> mean;
  std::vector<double> sem;
  std::vector<double> std;
  int documents = 0;
  /// Area under the mean curve (trapezoid over `ratios`), nats/token x ratio; more negative =
  /// more keys help the head more.
  double area() const {
    double a = 0;
    for (std::size_t i = 1; i < ratios.size() && i < mean.size(); ++i)
      a += 0.5 * (mean[i] + mean[i - 1]) * (ratios[i] - ratios[i - 1]);
    return a;
  }
};

/// All heads' curves of one sweep.
struct InfluenceCurves {
  std::string model_fingerprint;  ///< fingerprint_hex of the model ("0x" + 16 hex digits)
  std::string method;             ///< compaction method name, e.g. "am"
  double baseline_ratio = 0;      ///< the ratio of the heads not being swept; on `grid`
  std::vector<double> grid;       ///< [n_points] swept ratios, strictly increasing in [0, 1]
  int n_layers = 0;
  int n_kv_heads = 0;             ///< KV heads per layer
  std::vector<HeadCurve> heads;   ///< the swept heads (any subset, each at most once)
  /// What was scored: "continuation" (plain text) or "qa-answers" (influence --qa).
  std::string evaluated = "continuation";
  /// Per-head baseline budget proportions (influence --budgets), layer-major; empty = uniform.
  std::vector<double> budget_proportions;
  std::string budgets_source;     ///< the budgets file ("" when uniform)
  /// Sliding-window layers of the model (ascending; Gemma 3's local layers): never compacted, so
  /// their heads have no curve and budgets leave them out. JSON "sliding_layers", written only
  /// when non-empty.
  std::vector<int> sliding_layers;

  /// True when layer l is one of sliding_layers.
  bool sliding(int layer) const;

  /// The curve of (layer, kv_head), or nullptr when that head was not swept.
  const HeadCurve* find(int layer, int kv_head) const;
};

/// Parses a head list: "all" (every head, layer-major: L0H0, L0H1, ..., L1H0, ...) or a comma
/// list of names "L<layer>H<kv_head>" (case-sensitive, whitespace around names ignored), in the
/// order given. Throws Error naming the bad token for a malformed or out-of-range name, a
/// duplicate, or an empty list; also for n_layers or n_kv_heads < 1.
std::vector<HeadId> parse_head_names(const std::string& spec, int n_layers, int n_kv_heads);

/// Parses a ratio grid: "start:stop:count" (count >= 2 evenly spaced points, both ends included;
/// count 1 needs start == stop; count <= 100001) or a comma list "0.01,0.05,0.1". Every value must be finite, in
/// [0, 1], and the list strictly increasing. Throws Error naming the option text otherwise.
std::vector<double> parse_ratio_grid(const std::string& spec);

/// Index of `baseline` in `grid` (|grid[i] - baseline| <= 1e-9). Throws Error when it is not on
/// the grid.
std::size_t baseline_index(double baseline, const std::vector<double>& grid);

/// Per-point statistics over documents.
struct CurveStats {
  std::vector<double> mean;  ///< [n_points]
  std::vector<double> sem;   ///< [n_points] std / sqrt(documents); 0 for one document
  std::vector<double> std;   ///< [n_points] sample standard deviation (n-1); 0 for one document
  int documents = 0;
};

/// Aggregates a per-document table of deltas: per_document [documents][n_points] (nats/token).
/// Throws Error for no documents, rows of different lengths, an empty row, or a non-finite value.
CurveStats aggregate_documents(const std::vector<std::vector<double>>& per_document);

/// Checks the invariants listed on the structs (grid strictly increasing in [0, 1], baseline on
/// the grid, n_layers/n_kv_heads >= 1, each head in range and at most once, ratios strictly
/// increasing in [0, 1], mean/sem/std of the same length as ratios, values finite, sem/std >= 0,
/// documents >= 1). Throws Error "<source>: <field>: <problem>".
void validate_influence_curves(const InfluenceCurves& curves, const std::string& source);

/// Checks a sliding-layer list: every index in [0, n_layers), ascending, distinct, not every
/// layer. Throws Error("<where>: <problem>").
void check_sliding_layers(const std::vector<int>& layers, int n_layers, const std::string& where);

/// JSON form: {"model_fingerprint", "method", "baseline_ratio", "grid": [..], "n_layers",
/// "n_kv_heads", "evaluated" (optional, default "continuation"), "budgets" (optional: null or
/// {"source", "proportions": [..]}), "heads": [{"name", "layer", "kv_head", "ratios", "delta_nll_mean",
/// "delta_nll_sem", "delta_nll_std", "documents"}]}. Validates first (source "influence curves").
nlohmann::json influence_curves_to_json(const InfluenceCurves& curves);

/// Parses and validates the JSON form above; `source` (usually the file name) starts every error
/// message, followed by the field, e.g. "curves.json: heads[2].delta_nll_sem: missing".
InfluenceCurves influence_curves_from_json(const nlohmann::json& j, const std::string& source);

/// Writes the JSON form to `path` atomically (2-space indent). Throws Error naming the path.
void write_influence_curves_json(const std::string& path, const InfluenceCurves& curves);

/// Reads and validates a JSON file written by write_influence_curves_json. Throws Error naming the
/// file (and field) when it is missing, not JSON, or invalid.
InfluenceCurves read_influence_curves_json(const std::string& path);

/// CSV (RFC 4180, header line): head,layer,kv_head,ratio,delta_nll_mean,delta_nll_sem,
/// delta_nll_std,documents; one row per head and ratio, heads in stored order. Numbers are
/// printed to round-trip (shortest exact form).
std::string influence_curves_csv(const InfluenceCurves& curves);

/// Writes influence_curves_csv to `path` atomically.
void write_influence_curves_csv(const std::string& path, const InfluenceCurves& curves);

}  // namespace kvcompact
