// AdaKV (Feng et al. 2024, arXiv 2407.11550), as kvpress's AdaKVPress: a budget policy over a
// scorer. Within a layer, each KV head first keeps its floor(alpha * t) best entries (at least one),
// then the layer's remaining budget goes to the highest scores of all its heads together, so heads
// end up with different lengths (the layer's total stays n_kv_heads * t).
#pragma once

#include <utility>
#include <vector>

#include "compaction/expected_attention.h"
#include "compaction/head_compaction.h"
#include "compaction/token_eviction.h"

namespace kvcompact {

/// The per-head scorer AdaKV redistributes over (kvpress wraps a ScorerPress): SnapKV
/// (kvpress's "adakv_snapkv") or ExpectedAttention (kvpress's registry entry "expected_attention"
/// is AdaKV(ExpectedAttention(epsilon=1e-2))).
enum class AdaKvScorer { SnapKv, Expected };

/// Options: the safeguard fraction, the scorer and its settings (kvpress defaults: alpha 0.2;
/// SnapKV window 64, avg pool 5; ExpectedAttention as ExpectedAttentionOptions).
struct AdaKvOptions {
  double alpha = 0.2;                                     ///< safeguard fraction, [0, 1]
  AdaKvScorer scorer = AdaKvScorer::SnapKv;
  SnapKvOptions snapkv{64, ScorePooling{PoolKind::Avg, 5}};
  ExpectedAttentionOptions expected{};
  bool operator==(const AdaKvOptions&) const = default;
};

/// Entries a scorer always keeps in a head of T entries, as [first, last): SnapKV's observation
/// window (the last min(window, T - 1)), ExpectedAttention's sinks (the first min(n_sink, T)).
std::pair<int, int> adakv_forced_range(const AdaKvOptions& options, int T);

/// Sets the forced entries (adakv_forced_range) of every head of head_scores [H][T_h] to the
/// layer's largest score. kvpress pads them with max + 1 over the whole layer's scores, while the
/// per-head scorers here use the head's own max + 1; across heads only the layer-wide value keeps
/// them ahead of every other head's entries, as kvpress does.
void adakv_raise_forced(std::vector<std::vector<double>>& head_scores, const AdaKvOptions& options);

/// kvpress's SnapKV scores [T]: snapkv_scores (window w' = min(window, T - 1)) divided by
/// w' * group_size (the mean over the window's queries and the group), and the window keys set to
/// max + 1 over this head. Throws as snapkv_scores.
std::vector<double> snapkv_press_scores(const HeadCompactionInput& in, const SnapKvOptions& options);

/// AdaKV's selections for one layer: head_scores [H][T_h], budgets [H] (entries per head before
/// redistribution). Each head keeps its n_safe = floor(alpha * b_h) (>= 1 when alpha > 0 and
/// b_h > 0) top entries; then the sum_h (b_h - n_safe_h) highest remaining scores over all heads
/// (ties: lower head, then lower index). Returns sorted indices per head. Throws Error unless
/// 0 <= b_h <= T_h, 0 <= alpha <= 1, or when a score is NaN.
std::vector<std::vector<int>> adakv_select(const std::vector<std::vector<double>>& head_scores,
                                           const std::vector<int>& budgets, double alpha);

}  // namespace kvcompact
