// Named views of the tensors a forward pass hands to its observers (model/transformer.h): the
// shape travels with the pointer, so an observer indexes rows and heads by name instead of by
// stride arithmetic on a raw float*.
#pragma once

#include <cstddef>
#include <span>

#include "ops/attention.h"

namespace kvcompact {

/// One row per token: data [n_tokens, width], row-major. T is float (writable) or const float.
template <class T>
struct TokenRows {
  T* data = nullptr;
  int n_tokens = 0;
  int width = 0;

  std::size_t size() const { return static_cast<std::size_t>(n_tokens) * static_cast<std::size_t>(width); }
  /// Row i: [width].
  std::span<T> row(int i) const { return {data + static_cast<std::size_t>(i) * width, static_cast<std::size_t>(width)}; }
  /// Every row: [n_tokens * width].
  std::span<T> all() const { return {data, size()}; }
};

/// Per-token rows of per-head vectors: data [n_tokens, n_heads * head_dim], head h of row i in
/// columns [h * head_dim, (h + 1) * head_dim). T is float (writable) or const float.
template <class T>
struct HeadRows {
  T* data = nullptr;
  int n_tokens = 0;
  int n_heads = 0;
  int head_dim = 0;

  std::size_t width() const { return static_cast<std::size_t>(n_heads) * static_cast<std::size_t>(head_dim); }
  std::size_t size() const { return static_cast<std::size_t>(n_tokens) * width(); }
  /// Row i, every head: [n_heads * head_dim].
  std::span<T> row(int i) const { return {data + static_cast<std::size_t>(i) * width(), width()}; }
  /// Head h of row i: [head_dim].
  std::span<T> head(int i, int h) const {
    return {data + static_cast<std::size_t>(i) * width() + static_cast<std::size_t>(h) * head_dim,
            static_cast<std::size_t>(head_dim)};
  }
  /// Every row: [n_tokens * n_heads * head_dim].
  std::span<T> all() const { return {data, size()}; }
};

/// The queries of one layer after RoPE, with the layer's logit scale folded in (scores are
/// q.k / sqrt(head_dim)): q [n_tokens, n_heads * head_dim], row i at RoPE position
/// first_position + i.
struct QueryView {
  int layer = 0;
  int first_position = 0;
  HeadRows<const float> q;
};

/// The hidden states (residual stream) entering a layer, before its attention norm:
/// x [n_tokens, dim]. ForwardOptions::layer_input takes them back to resume at that layer.
struct LayerInputView {
  int layer = 0;
  TokenRows<const float> x;
};

/// What the attention of one layer read in a forward call. Query head h attends KV head
/// g = h / group_size() through heads[g], whose last n_tokens() entries are the new tokens' own
/// keys/values; row i sees entries first_visible(heads[g], n_tokens(), i) .. heads[g].length -
/// n_tokens() + i (ops/attention.h: 0 except in sliding-window layers). Scores are
/// q.k / sqrt(head_dim) + beta.
struct AttentionContext {
  int layer = 0;
  int first_position = 0;                     ///< RoPE position of row 0
  HeadRows<const float> q;                    ///< [n_tokens, n_heads * head_dim], after RoPE
  std::span<const AttentionHeadView> heads;   ///< [n_kv_heads]

  int n_tokens() const { return q.n_tokens; }
  int n_heads() const { return q.n_heads; }
  int head_dim() const { return q.head_dim; }
  int n_kv_heads() const { return static_cast<int>(heads.size()); }
  /// Query heads per KV head.
  int group_size() const { return heads.empty() ? 0 : q.n_heads / static_cast<int>(heads.size()); }
};

}  // namespace kvcompact
