// Whole-cache compaction: applies a per-head compaction method to every layer and KV head.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compaction/attention_matching.h"
#include "compaction/reference_queries.h"
#include "model/kv_cache.h"

namespace kvcompact {

/// The compaction methods of the first slice (arXiv 2602.16284 and its baselines).
enum class CompactionMethod {
  AttentionMatching,  ///< "am": highest-attention keys, NNLS beta, least-squares C2
  Random,             ///< "random": t random keys (seeded), beta 0, original values
  Recent,             ///< "recent": the last t context keys, beta 0, original values
  AttnNoFit,          ///< "attn-nofit": AM's keys, beta 0, original values
};

/// Parses "am", "random", "recent" or "attn-nofit"; throws Error naming the bad name and listing
/// the valid ones.
CompactionMethod parse_compaction_method(std::string_view name);
std::string compaction_method_name(CompactionMethod method);
/// All method names, in the order above.
std::vector<std::string> compaction_method_names();

/// What to do to a cache.
struct CompactionOptions {
  CompactionMethod method = CompactionMethod::AttentionMatching;
  double ratio = 0.1;    ///< keep ratio r in [0, 1]: every head keeps max(1, floor(r*T)) entries
  uint64_t seed = 0;     ///< for `random` (mixed with layer and head)
  AttentionMatchingOptions am;          ///< Attention-Matching fitting options
};

/// The seed a per-head method (e.g. `random`) gets for head (layer, kv_head): the run's seed mixed
/// with the head's index, so heads draw independently and reruns are reproducible.
uint64_t head_seed(uint64_t seed, int layer, int kv_head, int n_kv_heads);

/// A cache head made of a compacted head: keys C1, beta, values C2, and the original positions
/// of the selected context entries (taken from `source`, the uncompacted head).
HeadCache to_head_cache(CompactedHead compacted, const HeadCache& source);

/// Compacts every head of `full` (a context cache of T entries per head, positions 0..T-1) using
/// the reference queries. The result keeps next_position = full.next_position (= T), so tokens
/// fed afterwards continue at RoPE position T. Heads are processed in parallel (OpenMP).
/// Throws Error on a bad ratio or when queries and cache shapes differ.
KVCache compact_cache(const KVCache& full, const ReferenceQueries& queries,
                      const CompactionOptions& options);

}  // namespace kvcompact
