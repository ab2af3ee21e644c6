// Token-eviction baselines that Attention Matching (arXiv 2602.16284) is compared with: SnapKV,
// StreamingLLM, H2O and PyramidKV. Each keeps t original entries (beta 0, original values), chosen
// by a rule that uses the context's own (causal) attention, not the reference queries.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/key_selection.h"

namespace kvcompact {

/// SnapKV options (arXiv 2404.14469; defaults as the authors' code: window 32, avg pool 5).
struct SnapKvOptions {
  int window = 32;                                 ///< observation window w (last w positions), >= 1
  ScorePooling pool{PoolKind::Avg, 5};             ///< pooling of the votes along the key axis
  bool operator==(const SnapKvOptions&) const = default;
};

/// Causal softmax attention of the context queries: for every position i and query head h of the
/// group, A_(i,h) = softmax_j<=i (s q_(i,h) . k_j), s = 1/sqrt(d) (double precision). Returns
/// sum over the rows with position in [first_pos, T) of A restricted to keys [0, key_count):
/// [key_count]. Needs in.context_queries ([T * group_size, d], row i * group_size + h) and
/// group_size >= 1. Throws Error when they are missing or non-finite, or the ranges are bad.
std::vector<double> causal_attention_votes(const HeadCompactionInput& in, int first_pos, int key_count);

/// SnapKV votes [T - w'] (w' = min(window, T)): causal_attention_votes(in, T - w', T - w') — the
/// observation window's queries' attention on the prefix keys, summed over the window's positions
/// and the group's query heads — then pooled (options.pool). Throws as causal_attention_votes.
std::vector<double> snapkv_scores(const HeadCompactionInput& in, const SnapKvOptions& options);

/// SnapKV: keeps the top t - w' prefix keys by snapkv_scores (ties: lower index) plus the w' window
/// keys; when t <= w' it keeps the last t keys. Throws Error unless 0 <= t <= T or on bad input
/// (context queries missing, window < 1, even pool kernel).
CompactedHead compact_snapkv(const HeadCompactionInput& in, int t, const SnapKvOptions& options = {});

/// StreamingLLM (arXiv 2309.17453): the first min(sink, t) keys ("attention sinks") plus the most
/// recent t - min(sink, t) keys. Needs no queries. Throws Error unless 0 <= t <= T and sink >= 0.
CompactedHead compact_streaming(const HeadCompactionInput& in, int t, int sink = 4);

/// H2O accumulated attention [T]: score_j = sum over every context position i >= j and query head of
/// the causal softmax attention A_(i,h),j (arXiv 2306.14048, "heavy hitters"), i.e.
/// causal_attention_votes(in, 0, T).
std::vector<double> h2o_scores(const HeadCompactionInput& in);

/// H2O, one-shot on the prefill (the paper evicts greedily during decoding; compacting a finished
/// context its accumulated scores are those of all context queries): r = floor(recent * t) most
/// recent keys plus the t - r keys with the highest h2o_scores among keys 0..T-r-1 (ties: lower
/// index). recent = 0.5 is the paper's equal heavy-hitter / recent split. Throws Error unless
/// 0 <= t <= T, 0 <= recent <= 1, or on bad input (context queries missing when t - r > 0).
CompactedHead compact_h2o(const HeadCompactionInput& in, int t, double recent = 0.5);

/// PyramidKV's per-layer amounts (arXiv 2406.02069) with mean `mean`: s_l decreasing linearly from
/// mean * (2 - 1/beta) (layer 0, bottom) to mean / beta (top); [mean] for one layer. The one place
/// the pyramid's shape is written (pyramid_budgets_for with mean = t, analysis' pyramid_schedule
/// with mean = 1). Throws Error unless n_layers >= 1 and beta >= 1 is finite.
std::vector<double> pyramid_layer_shares(int n_layers, double beta, double mean = 1.0);

/// PyramidKV per-layer budgets (arXiv 2406.02069): for a uniform budget t per head, layer l of L
/// keeps b_l, decreasing linearly from b_0 = 2t - t/beta (bottom) to b_{L-1} = t/beta (top), so the
/// mean is t (as the authors' code: min = t/beta, max = 2t - min, step (max - min)/(L - 1)).
/// Rounded to integers by largest remainder so that sum_l b_l = L * t exactly; then capped at T
/// (the excess goes to the lowest layers with room) and raised to >= 1 when t >= 1 (taken from the
/// largest budget). Throws Error unless L >= 1, 0 <= t <= T, beta >= 1 and finite.
std::vector<int> pyramid_budgets_for(int n_layers, int T, int t, double beta);

/// pyramid_budgets_for(n_layers, T, kept_entries(ratio, T), beta). Throws as that and kept_entries.
std::vector<int> pyramid_budgets(int n_layers, int T, double ratio, double beta);

}  // namespace kvcompact
