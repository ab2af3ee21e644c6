// One conversation's state on the server: the original token history and the (possibly
// compacted) KV cache that stands for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/kv_cache.h"

namespace kvcompact::serve {

/// A conversation the server can continue. `tokens` are the original ids fed so far, BOS first:
/// token i was fed at RoPE position i, so tokens.size() == cache.next_position. After a
/// compaction the cache holds fewer entries than tokens (compacted entries keep their original
/// positions); entries fed since the last compaction are verbatim and sit at the tail of every head.
struct Session {
  std::string id;              ///< "s<number>", or the name a slot was restored under
  std::vector<int> tokens;     ///< [T] original token history (prompt and generated tokens fed)
  KVCache cache;               ///< next_position == tokens.size()
  std::vector<float> last_logits;  ///< [vocab] logits after the last token fed (empty before any)
  int protected_prefix = 0;    ///< leading tokens never compacted (chat template + system messages)
  /// Tokens before this position are (partly) held in compacted entries, whose fitted values may
  /// summarise any token before it: a rollback must not go below it (0 = never compacted).
  int compacted_until = 0;
  int compactions = 0;         ///< compactions run on this cache so far
  double compaction_seconds = 0;  ///< their wall time in all
  uint64_t last_used = 0;      ///< logical clock of the store (LRU order)
  bool dirty = true;           ///< changed since it was last written to the save folder
};

/// Bytes the cache's heads have allocated (vector capacities: keys, values, beta, positions),
/// which is what the process holds for it; KVCache::bytes() counts the entries in use.
std::size_t allocated_bytes(const KVCache& cache);

/// Releases every head's spare capacity (after a turn, so that the bytes held equal the bytes used).
void shrink_to_fit(KVCache& cache);

/// The smallest token position p such that every head's entries at positions >= p are verbatim:
/// a contiguous tail of consecutive positions p .. next_position-1 with beta 0 (and, for a
/// sliding layer, its window before p is still held), and p >= compacted_until (the end of the
/// last compacted range, whose fitted entries may stand for any token before it).
/// rollback_to(cache, q, compacted_until) is possible exactly for q >= p.
int earliest_rollback(const KVCache& cache, int compacted_until = 0);

/// Drops every entry at a position >= p and sets next_position = p, so that the tokens from p on
/// can be fed again. Throws Error when p < earliest_rollback(cache, compacted_until) or
/// p > next_position.
void rollback_to(KVCache& cache, int p, int compacted_until = 0);

/// Drops the entries of sliding-window layers that no future query can see (position <=
/// next_position - window - slack); `slack` keeps that many more so that a rollback by up to
/// `slack` tokens stays possible. Returns the entries dropped.
std::size_t trim_sliding_layers(KVCache& cache, int slack);

/// Length of the longest common prefix of a and b.
std::size_t common_prefix(std::span<const int> a, std::span<const int> b);

}  // namespace kvcompact::serve
