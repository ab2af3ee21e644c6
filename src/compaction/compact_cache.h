// Whole-cache compaction: applies a per-head compaction method (a MethodSpec) to every global
// layer and KV head of a context's cache, with a uniform keep ratio or per-head budgets.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compaction/method_spec.h"
#include "compaction/reference_queries.h"
#include "core/config.h"
#include "core/kv_cache.h"

namespace kvcompact {

/// Splits a comma-separated list of method specs: a new spec starts at each item that is a family
/// name or a family name followed by ':' ("am,random", "am:select=omp,beta=zero,recent" is two
/// specs: "am:select=omp,beta=zero" and "recent"). Throws Error for an empty list or a bad spec.
std::vector<MethodSpec> parse_method_list(std::string_view text);

/// What to do to a cache.
struct CompactionOptions {
  MethodSpec method;              ///< default: am (attention keys, NNLS beta, least-squares C2)
  double ratio = 0.1;             ///< keep ratio r in [0, 1]: every head keeps max(1, floor(r*T))
  uint64_t seed = 0;              ///< for `random` (mixed with layer and head by head_seed)
  /// Non-uniform budgets: entries per head, [n_layers * n_kv_heads] layer-major; when set they
  /// replace the ratio (each in [0, T_head]). See budgets/budget_solver.h per_head_budgets.
  std::vector<int> head_budgets;
  /// RoPE of the cache (ExpectedAttention needs it): [head_dim / 2] frequencies (rope_inv_freq of
  /// ops/rope.h) and the pair layout; empty when unknown. See set_rope.
  std::vector<float> rope_inv_freq;
  bool rope_half_split = false;
  /// > 0: chunked compaction in KV space (compaction/chunked.h): the context is compacted in
  /// chunks of this many tokens, each with its own reference queries; 0 = the whole context at once.
  int chunk_size = 0;
};

/// Fills options.rope_inv_freq / rope_half_split from the model's RoPE settings.
void set_rope(CompactionOptions& options, const ModelConfig& config);

/// The seed a per-head method (e.g. `random`) gets for head (layer, kv_head): the run's seed mixed
/// with the head's index, so heads draw independently and reruns are reproducible.
uint64_t head_seed(uint64_t seed, int layer, int kv_head, int n_kv_heads);

/// A cache head made of a compacted head: keys C1, beta, values C2, and the original positions
/// of the selected context entries (taken from `source`, the uncompacted head).
HeadCache to_head_cache(CompactedHead compacted, const HeadCache& source);

/// Compacts every head of `full` (a context cache of T entries per head, positions 0..T-1) using
/// the reference queries (and the context's own queries, needed by snapkv/h2o/pyramidkv). Each
/// head keeps kept_entries(ratio, T) entries, or its head_budgets entry (PyramidKV redistributes
/// the uniform budget over layers itself). The result keeps next_position = full.next_position
/// (= T), so tokens fed afterwards continue at RoPE position T. Heads run in parallel (OpenMP);
/// layer-scoped methods (tova, adakv) score every head first, then select layer by layer.
/// Sliding-window layers (full.sliding(l), e.g. Gemma 3's local layers) are copied unchanged and
/// never compacted (the Attention Matching paper's convention: they keep only their window);
/// ratios and budgets apply to global layers only (their head_budgets entries are ignored).
/// Throws Error on a bad ratio or budget, or when queries and cache shapes differ.
KVCache compact_cache(const KVCache& full, const ReferenceQueries& queries, const CompactionOptions& options,
                      const ReferenceQueries* context_queries = nullptr);

/// The heads [n_kv_heads] of one layer of `full`, compacted exactly as compact_cache compacts
/// that layer (same budgets, seeds and sliding-layer rule; only that layer's queries are read).
/// On-policy compaction (on_policy.h) calls it layer by layer. Throws as compact_cache, and for a
/// layer out of range.
std::vector<HeadCache> compact_cache_layer(const KVCache& full, int layer, const ReferenceQueries& queries,
                                           const CompactionOptions& options,
                                           const ReferenceQueries* context_queries = nullptr);

}  // namespace kvcompact
