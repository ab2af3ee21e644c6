// Scaled dot-product attention over an explicit per-head KV store with an additive logit bias
// (beta), the form Attention Matching (arXiv 2602.16284) compacted caches need.
#pragma once

#include <cstdint>

namespace kvcompact {

/// Read-only view of one KV head's entries. keys, values: [length, head_dim]; beta: [length]
/// additive logit bias in nats (0 for ordinary entries). With window > 0 (a sliding-window
/// layer) positions [length] holds each entry's RoPE position, ascending, and a query whose own
/// entry is at position p sees only entries with position > p - window.
struct AttentionHeadView {
  const float* keys = nullptr;
  const float* values = nullptr;
  const float* beta = nullptr;
  int length = 0;
  const int32_t* positions = nullptr;  ///< [length]; needed when window > 0
  int window = 0;                      ///< 0: no window (global attention)
};

/// First entry that new row r (of n new rows, the last n entries of the view) may attend:
/// 0 without a window, else the first j with positions[j] > positions[length - n + r] - window
/// (binary search; positions ascending). Rows see entries first_visible .. length - n + r.
int first_visible(const AttentionHeadView& view, int n, int r);

/// One query row against the first L entries of a head:
///   out = sum_j softmax_j(q.k_j * scale + beta_j) v_j,  j = 0 .. L-1.
/// q, out: [head_dim]; keys, values: [>= L, head_dim]; beta: [>= L]; scratch: [L] floats.
/// L >= 1. Reference twin: attend_row_ref.
void attend_row(const float* q, const float* keys, const float* values, const float* beta, int L,
                int head_dim, float scale, float* scratch, float* out);

/// Causal grouped-query attention for n new tokens whose keys/values are already the last n
/// entries of every head view (heads may hold different numbers of older entries).
/// q: [n, n_heads * head_dim] (after RoPE); heads: [n_kv_heads] views; out: [n, n_heads*head_dim].
/// Query head h uses heads[h / (n_heads / n_kv_heads)]; row i attends entries
/// first_visible(heads[g], n, i) .. heads[g].length - n + i with scale 1/sqrt(head_dim). Every heads[g].length must be >= n.
/// Dispatches to causal_attention_blocked for n >= 8 rows (prefill), else causal_attention_rows
/// (decode). Do not call inside an OpenMP parallel region. Reference twin: causal_attention_ref.
void causal_attention(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                      const AttentionHeadView* heads, float* out);

/// causal_attention by one attend_row per (query head, row), OpenMP-parallel over those pairs.
void causal_attention_rows(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                           const AttentionHeadView* heads, float* out);

/// causal_attention in blocks of up to 128 query rows (fewer for long caches, to keep the logits
/// of all heads within ~32 MiB): per head, logits S = Q K^T and output
/// P V by cblas_sgemm, the masked softmax of S (scale, beta, causality) OpenMP-parallel over rows.
void causal_attention_blocked(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                              const AttentionHeadView* heads, float* out);

}  // namespace kvcompact
