// The KV cache: an explicit, per-layer, per-KV-head store whose entries can be compacted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvcompact {

/// The cache of one KV head in one layer. Entry i has key keys[i*head_dim ...] (after RoPE),
/// value values[i*head_dim ...], an additive attention-logit bias beta[i] (0 for ordinary
/// entries; log-weights for Attention-Matching entries) and its original token position.
/// A query q attends with logits q.k_i / sqrt(head_dim) + beta_i.
struct HeadCache {
  std::vector<float> keys;         ///< [length, head_dim], after RoPE
  std::vector<float> values;       ///< [length, head_dim]
  std::vector<float> beta;         ///< [length], additive logit bias (nats)
  std::vector<int32_t> positions;  ///< [length], original RoPE position of each entry

  std::size_t length() const { return beta.size(); }
  /// Appends one entry; k and v point at head_dim floats.
  void append(const float* k, const float* v, int head_dim, float b, int32_t position);
  /// True when any beta is non-zero (the entry set then needs its bias stored).
  bool has_bias() const;
  /// Drops the entries after the first `length` (a rollback of tokens fed after them; keeps the
  /// storage). Throws Error when length > length().
  void truncate(std::size_t length);
  /// Makes room for n more entries of head_dim floats: exactly n for the first append (a
  /// prefill), then 25% + 16 entries more than needed, so that token-by-token decoding does not
  /// copy the whole head every step (std::vector::reserve allocates exactly what it is asked for).
  void reserve_more(std::size_t n, int head_dim);
  /// True when keys and values hold length() * head_dim floats and positions length() entries.
  bool consistent(int head_dim) const;
};

/// A point to roll a KVCache back to: every head's length and next_position (KVCache::mark).
struct CacheMark {
  std::vector<std::size_t> lengths;  ///< [n_layers * n_kv_heads], layer-major
  int next_position = 0;
};

/// KV cache of a whole model: n_layers x n_kv_heads HeadCaches. Heads may hold different numbers
/// of entries (non-uniform compaction). Both kinds of layers are stored the same way: a
/// sliding-window layer (layer_window(l) > 0, set by Transformer::make_cache) keeps every entry,
/// in position order, and the forward masks the ones older than the window; such layers are
/// never compacted (compaction/compact_cache.h). New tokens are fed at RoPE positions next_position,
/// next_position+1, ... : after compaction of a T-token context next_position stays T, whatever
/// the compacted length.
class KVCache {
 public:
  KVCache() = default;
  KVCache(int n_layers, int n_kv_heads, int head_dim);

  HeadCache& head(int layer, int kv_head) { return heads_[index(layer, kv_head)]; }
  const HeadCache& head(int layer, int kv_head) const { return heads_[index(layer, kv_head)]; }

  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  int head_dim() const { return head_dim_; }
  /// Attention window of layer l in tokens (0: global attention).
  int layer_window(int layer) const;
  /// Sets layer l's window (0: global). Throws Error for a bad layer or a negative window.
  void set_layer_window(int layer, int window);
  /// True when layer l is a sliding-window layer.
  bool sliding(int layer) const { return layer_window(layer) > 0; }

  /// RoPE position of the next token fed to the model.
  int next_position = 0;

  /// Entries summed over all heads.
  std::size_t total_entries() const;
  /// The first of the longest heads of the global-attention layers (sliding-window layers are
  /// bounded by their window instead); nullptr when every layer slides or the cache has no heads.
  const HeadCache* longest_global_head() const;
  /// Its length in entries (0 when there is none): the measure a context limit is checked against.
  std::size_t longest_global_length() const;
  /// Storage in bytes of keys and values (float32), plus beta for heads that carry a bias.
  std::size_t bytes() const;
  /// The bytes() this cache would take with per-head lengths `lengths` [n_layers * n_kv_heads,
  /// layer-major] and the same heads carrying a bias (e.g. a uniform budget of the same total,
  /// without compacting twice). Throws Error when lengths has another size or a negative entry.
  std::size_t bytes_with_lengths(const std::vector<int>& lengths) const;
  /// Drops every entry and resets next_position to 0.
  void clear();
  /// The current lengths and next_position, for rollback(). Together they are the cheap fork of
  /// this cache: feeding tokens only appends entries (Transformer::forward), so a forward after
  /// mark() followed by rollback() leaves the cache bit-identical to the one marked, without the
  /// deep copy a fork by value costs (n_layers * n_kv_heads * length * head_dim * 8 bytes).
  CacheMark mark() const;
  /// Drops every entry appended since `m` (HeadCache::truncate; storage is kept) and restores its
  /// next_position. Throws Error when `m` is from a cache of another shape or a head is now
  /// shorter than it was at the mark (entries were removed or replaced, e.g. by compaction).
  void rollback(const CacheMark& m);

 private:
  std::size_t index(int layer, int kv_head) const;
  int n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  std::vector<HeadCache> heads_;  // [n_layers * n_kv_heads]
  std::vector<int> windows_;      // [n_layers], 0 = global
};

}  // namespace kvcompact
