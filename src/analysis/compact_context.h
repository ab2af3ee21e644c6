// The `compact` pipeline as a library call: one context's KV cache prefilled (with the reference
// queries its method needs) and compacted into the contents of a .kvc file. Used by
// `kvcompact compact` and by Python's Model.compact.
#pragma once

#include <cstddef>
#include <span>

#include "compaction/compact_cache.h"
#include "compaction/reference_queries.h"
#include "loaders/kvc_file.h"
#include "model/model.h"

namespace kvcompact {

/// Prefills the context `ids` (BOS first, >= 2 tokens) with the reference queries and context
/// queries `co.method` needs (its `queries=` sources; co.seed seeds their sampling). Warns (log
/// sink) when ids run past max_seq_len. Throws Error for fewer than 2 tokens or a bad id.
ContextPrefill prefill_for_compaction(const Model& model, std::span<const int> ids, const CompactionOptions& co);

/// A compacted context: the .kvc contents and the full cache it came from (sizes in entries and
/// bytes, KVCache::total_entries / bytes).
struct CompactedContext {
  KvcFile file;
  std::size_t full_entries = 0;
  std::size_t full_bytes = 0;
};

/// Compacts `prefill` (of the context `ids`) with `co` (set_rope is applied for the model) into a
/// KvcFile tied to `model` (fingerprint, name, config, method, ratio, tokens, last logits).
/// Throws as compact_cache.
CompactedContext compact_context(const Model& model, std::span<const int> ids, const ContextPrefill& prefill,
                                 CompactionOptions co);

}  // namespace kvcompact
