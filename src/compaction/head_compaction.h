// Per-KV-head compaction: the data every compaction method consumes and produces.
#pragma once

#include <cstdint>
#include <vector>

namespace kvcompact {

/// One KV head's original context cache and its reference queries (row-major, float32).
/// Pointers are borrowed; they must outlive the call that receives this view.
struct HeadCompactionInput {
  const float* keys = nullptr;     ///< K: [T, head_dim], after RoPE
  const float* values = nullptr;   ///< V: [T, head_dim]
  const float* queries = nullptr;  ///< Q: [n_queries, head_dim], after RoPE (reference queries)
  int T = 0;                       ///< context length (entries of this head)
  int n_queries = 0;
  int head_dim = 0;
  /// Context queries for the token-eviction baselines that score keys with the context's own
  /// attention (SnapKV, H2O; token_eviction.h): the queries (after RoPE) of the context prefill at
  /// positions 0..T-1 of every query head of this KV head's group, causal (query at position i
  /// attends keys 0..i). Rows position-major, then query head: row i * group_size + h,
  /// [T * group_size, head_dim]. May be null for methods that do not use it.
  const float* context_queries = nullptr;
  int group_size = 1;  ///< query heads per KV head (GQA group); rows per position above
  /// RoPE of the context queries and keys (ExpectedAttention un-rotates the context queries):
  /// [head_dim / 2] frequencies, pair j at position p rotated by p * rope_inv_freq[j]. May be null.
  const float* rope_inv_freq = nullptr;
  /// Pair j is dims (j, j + head_dim/2) (Hugging Face) instead of (2j, 2j+1) (GGML, llama2.c).
  bool rope_half_split = false;
  /// [T] additive logit bias of the entries (nats; an already-compacted head's beta, e.g. when a
  /// cache is compacted again during generation), nullptr = 0. The attention statistics
  /// (head_attention.h), and so Attention Matching's key scores, mass and output targets, include
  /// it: the compacted head then matches the biased attention and its new beta replaces the old
  /// one. Methods that score keys otherwise ignore it.
  const float* key_bias = nullptr;
};

/// A compacted head: t entries (C1, beta, C2) plus the context indices of the selected keys.
struct CompactedHead {
  std::vector<int> selected;  ///< [t] indices into the context (0..T-1), in context order
  std::vector<float> keys;    ///< C1: [t, head_dim] (the selected original keys)
  std::vector<float> beta;    ///< [t] additive logit bias in nats (0 = none)
  std::vector<float> values;  ///< C2: [t, head_dim] (fitted, or the original values)
  int size() const { return static_cast<int>(selected.size()); }
};

/// Number of entries kept for keep ratio r over T context entries: t = max(1, floor(r*T)),
/// except r == 0 which keeps none. Throws Error when r is outside [0, 1] or NaN.
int kept_entries(double ratio, int T);

}  // namespace kvcompact
