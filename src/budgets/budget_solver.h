// Per-head KV budgets from head influence curves (issue #4): an exact discretised optimiser,
// the uniform schedule and the PyramidKV schedule, prediction of the loss of a schedule, JSON I/O,
// and rounding of proportions to whole keys per head.
//
// Model. Head h (of H = n_layers * n_kv_heads, layer-major order h = layer * n_kv_heads + kv_head)
// gets a proportion p_h >= 0 of the total key budget, sum_h p_h = 1. With every head holding T
// keys and a total ratio R, the head keeps p_h * R * H * T keys, i.e. its ratio is
// r_h = min(1, p_h * H * R). Assuming head effects add, the predicted change in NLL
// (nats/token; = delta log(perplexity)) at total ratio R is
//   D(p, R) = sum_h delta_h(r_h),
// with delta_h the head's influence curve (budgets/influence_curves.h) interpolated linearly
// between its ratios and held constant beyond its first and last ratio.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "budgets/influence_curves.h"

namespace kvcompact {

/// delta_h(r): linear interpolation of curve.mean over curve.ratios; for r beyond the last ratio
/// the last value, for r below the first ratio the first value. Throws Error for an empty curve
/// or a non-finite r.
double interpolate_curve(const HeadCurve& curve, double r);

/// Options of the optimiser.
struct BudgetSolverOptions {
  std::vector<double> targets{0.01, 0.02, 0.05, 0.1};  ///< total ratios R_k, each in (0, 1]
  /// F: every head gets p_h >= F / H (F is a fraction of the uniform share 1/H), F in [0, 1];
  /// F = 0 allows empty heads, F = 1 forces the uniform schedule.
  double floor = 0.1;
  /// U: proportions are multiples of 1 / (H * U); U >= 1.
  int units = 200;
};

/// One head's share of the budget.
struct HeadBudget {
  int layer = 0;
  int kv_head = 0;
  double proportion = 0;  ///< p_h
  std::string name() const { return head_name(layer, kv_head); }
};

/// A per-head budget schedule.
///
/// JSON form (budget_schedule_to_json):
///   {"schedule": "optimized" | "uniform" | "pyramid" | other name,
///    "targets": [R_k ...],           total ratios the schedule was made for / evaluated at
///    "floor": F,                     every head has p_h >= F / H (optimized: the option; uniform:
///                                    1; pyramid: min_h p_h * H)
///    "n_layers": L, "n_kv_heads": K,
///    "sliding_layers": [l ...],      only when non-empty: layers never compacted (Gemma 3's local
///                                    layers); their heads are not listed and H counts the others
///    "heads": [{"name": "L0H0", "layer": 0, "kv_head": 0, "proportion": p}, ...]  (every head of
///             the other layers, each once, any order; proportions >= 0 summing to 1 within 1e-6),
///    "predicted_delta": {"0.01": D, ...}  D(p, R) in nats/token per target, keys are the
///                                    targets printed shortest-exact; {} when no curves were given}
struct BudgetSchedule {
  std::string schedule;
  std::vector<double> targets;
  double floor = 0;
  int n_layers = 0;
  int n_kv_heads = 0;
  /// Sliding-window layers (ascending), never compacted: `heads` lists the other layers' heads
  /// only. Empty for models without such layers.
  std::vector<int> sliding_layers;
  std::vector<HeadBudget> heads;  ///< layer-major from the functions below
  /// (R, D(p, R)) pairs, in the order of `targets`; empty when not predicted.
  std::vector<std::pair<double, double>> predicted_delta;

  /// Proportions in layer-major order [n_layers * n_kv_heads], whatever the order of `heads`;
  /// 0 for the heads of sliding layers. Throws Error when a head is missing (call validate first
  /// for a full check).
  std::vector<double> proportions() const;
  /// True when layer l is one of sliding_layers.
  bool sliding(int layer) const;
};

/// Exact minimiser of a separable allocation: choose integer units u_h in [min_units, total_units]
/// with sum_h u_h = total_units minimising sum_h cost[h][u_h]. cost: [H][total_units + 1].
/// Dynamic programming over heads: O(H * total_units^2) time, O(H * total_units) memory.
/// Ties are broken deterministically (strict comparison, units tried in increasing order).
/// Returns u [H]; *best_cost (if given) receives the minimum. Throws Error when H == 0, a cost row
/// has the wrong length or a non-finite entry, or H * min_units > total_units.
std::vector<int> solve_separable_allocation(const std::vector<std::vector<double>>& cost, int total_units,
                                            int min_units, double* best_cost = nullptr);

/// D(p, R) for each target (see the file comment). proportions: [n_layers * n_kv_heads],
/// layer-major. Throws Error when `curves` lacks a head or sizes disagree.
std::vector<double> predict_delta(const std::vector<double>& proportions, const InfluenceCurves& curves,
                                  const std::vector<double>& targets);
// (With curves.sliding_layers, H counts the compacted heads only and the sliding heads'
// proportions are not read.)

/// The optimised schedule: minimises L(p) = mean_k D(p, R_k) over proportions that are multiples
/// of 1 / (H * U) with p_h >= F / H (rounded up to whole units), exactly, by
/// solve_separable_allocation with cost[h][u] = mean_k delta_h(min(1, u * R_k / U)):
/// O(H * (H*U)^2) time (H = 20, U = 200: ~1.6e8 steps). Fills predicted_delta.
/// Throws Error when curves does not cover every head, were swept around per-head budgets
/// (influence --budgets), or for a bad option.
BudgetSchedule optimize_budgets(const InfluenceCurves& curves, const BudgetSolverOptions& options);

/// Uniform schedule: p_h = 1 / H for every head of the layers not in sliding_layers (floor 1).
/// Throws Error for n_layers or n_kv_heads < 1, a target outside (0, 1] or a bad sliding list.
BudgetSchedule uniform_schedule(int n_layers, int n_kv_heads, const std::vector<double>& targets,
                                const std::vector<int>& sliding_layers = {});

/// PyramidKV schedule (Cai et al., arXiv 2406.02069, Sec. 3.3): per-layer shares decreasing
/// linearly from the bottom layer 0 to the top layer L-1, top share 1 / (beta * L), bottom share
/// 2 / L - 1 / (beta * L), so the shares sum to 1 (the paper's k^{m-1} = k^total / (beta m),
/// k^0 = 2 k^total / m - k^{m-1}; its default beta = 20). Every KV head of a layer gets an equal
/// part of the layer's share. One layer: share 1. With sliding_layers the pyramid runs over the
/// other layers, bottom to top. Throws Error for beta < 1 (the shares would increase with layer)
/// or bad sizes/targets.
BudgetSchedule pyramid_schedule(int n_layers, int n_kv_heads, const std::vector<double>& targets,
                                double beta = 20.0, const std::vector<int>& sliding_layers = {});

/// Sets schedule.predicted_delta from curves (D(p, R) at each of schedule.targets).
void set_predicted_delta(BudgetSchedule& schedule, const InfluenceCurves& curves);

/// Checks the invariants listed on BudgetSchedule: non-empty name, targets in (0, 1], floor in
/// [0, 1], sizes >= 1, every head in range exactly once and all present, name matching
/// layer/kv_head, proportions finite, >= 0, summing to 1 within 1e-6, predicted_delta empty or one
/// finite value per target. Throws Error "<source>: <problem>".
void validate_budget_schedule(const BudgetSchedule& schedule, const std::string& source);

/// The JSON form documented on BudgetSchedule (validated first).
nlohmann::json budget_schedule_to_json(const BudgetSchedule& schedule);

/// Parses and validates the JSON form, or the paper's flat form (no "schedule" key); errors start
/// with `source` and name the field.
BudgetSchedule budget_schedule_from_json(const nlohmann::json& j, const std::string& source);

/// The paper's flat form (adamzweiger/compaction, compaction_methods/base.py load_head_budgets,
/// read by its precomputed_budget_path): {"L{l}H{h}": p, ...} over the compacted heads, the
/// proportions summing to 1 (validated first).
nlohmann::json budget_schedule_to_paper_json(const BudgetSchedule& schedule);

/// The flat form back: every key "L{l}H{h}" with a number; n_layers / n_kv_heads are the largest
/// indices + 1, schedule "paper", targets [1] (the form carries none), floor min_h p_h * H. A head
/// missing from the grid, a negative or non-finite proportion, or a key that is not "L<l>H<h>" is an
/// Error naming it. Called by budget_schedule_from_json for an object without a "schedule" key.
BudgetSchedule budget_schedule_from_paper_json(const nlohmann::json& j, const std::string& source);

/// Writes the JSON form atomically. Throws Error naming the path.
void write_budget_schedule(const std::string& path, const BudgetSchedule& schedule);

/// Reads and validates a schedule file. Throws Error naming the file and the problem.
BudgetSchedule read_budget_schedule(const std::string& path);

/// read_budget_schedule, then refuses a schedule for another shape: throws Error("<path>: budgets
/// are for L layers x H KV heads, the model has L' x H'") unless it has n_layers x n_kv_heads, and
/// one whose sliding_layers (when it lists any) are not the model's `sliding_layers`. A schedule
/// without sliding layers serves a model with them through compacted_head_budgets.
BudgetSchedule read_budget_schedule_for(const std::string& path, int n_layers, int n_kv_heads,
                                        const std::vector<int>& sliding_layers = {});

/// The built schedules, by name: "optimized" (optimize_budgets over `curves` with `solver`),
/// "uniform" (uniform_schedule) and "pyramid" (pyramid_schedule with pyramid_beta), for
/// n_layers x n_kv_heads with `sliding_layers` never compacted, made for solver.targets. Throws
/// Error for another name ("unknown schedule", listing the valid ones), for "optimized" without
/// curves, and as those functions.
BudgetSchedule named_schedule(const std::string& name, int n_layers, int n_kv_heads,
                              const std::vector<int>& sliding_layers, const BudgetSolverOptions& solver,
                              const InfluenceCurves* curves = nullptr, double pyramid_beta = 20.0);

/// A schedule by name or file: "uniform" or "pyramid" (named_schedule), anything else a budgets
/// file (read_budget_schedule_for). `targets` are the total
/// ratios the built schedules record. Throws as those.
BudgetSchedule schedule_by_name_or_file(const std::string& spec, int n_layers, int n_kv_heads,
                                        const std::vector<int>& sliding_layers, const std::vector<double>& targets,
                                        double pyramid_beta = 20.0);

/// per_head_budgets over the compacted heads only: the heads of the layers in sliding_layers are
/// never compacted and get their whole length T_h (compact_cache copies those layers); the other
/// heads share round(R * sum of their T_h) keys by their proportions, renormalised to sum 1 when
/// p also gives the sliding heads a share (a schedule made for every head). p, T: [n_layers *
/// n_kv_heads], layer-major. Returns [n_layers * n_kv_heads]. Throws Error as per_head_budgets, for
/// sizes that disagree, every layer sliding, or compacted heads whose proportions sum to 0.
std::vector<int> compacted_head_budgets(const std::vector<double>& p, const std::vector<int>& T, int n_kv_heads,
                                        const std::vector<int>& sliding_layers, double R,
                                        double max_head_ratio = 1.0);

/// Whole keys per head for a total ratio R in (0, 1]: total = round(R * sum_h T_h), raised to the
/// number of heads with p_h > 0 when smaller (each of them keeps >= 1 key, like AM's
/// max(1, floor(r T))). Heads with p_h = 0 get 0 keys unless the heads with p_h > 0 cannot hold
/// the total (all full): the excess then spills over to them one key at a time, round robin in
/// head order, capped at T_h, so sum_h keys_h == total always. The real quotas
/// q_h = p_h * total are water-filled: a head whose quota exceeds T_h is fixed at T_h and its
/// excess shared among the other positive heads in proportion to p_h; then a quota below 1 is
/// fixed at 1 and the rest re-shared. Quotas are rounded by largest remainder, so
/// sum_h keys_h == total exactly and 1 <= keys_h <= T_h for p_h > 0.
/// proportions, tokens_per_head: [H]. Throws Error for size mismatch, R outside (0, 1], T_h < 1,
/// or proportions that are negative, non-finite or do not sum to 1 within 1e-6.
///
/// max_head_ratio c in (0, 1] (the paper's max_ratio_per_head, adamzweiger/compaction
/// apply_max_ratio_cap): every head keeps at most cap_h = max(1, floor(c * T_h)) keys; the caps
/// replace T_h in the water-filling above, so a capped head's excess goes to the others in
/// proportion to p_h. c = 1 is the plain rule. Throws Error for c outside (0, 1] or when
/// round(R * sum T_h) > sum_h cap_h (the caps cannot hold the total).
std::vector<int> per_head_budgets(const std::vector<double>& proportions, const std::vector<int>& tokens_per_head,
                                  double R, double max_head_ratio = 1.0);

}  // namespace kvcompact
