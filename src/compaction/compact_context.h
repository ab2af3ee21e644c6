// The `compact` pipeline as a library call: one context's KV cache prefilled (with the reference
// queries its method needs) and compacted into the contents of a .kvc file. Used by
// `kvcompact compact` and by Python's Model.compact.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
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

/// Attention diagnostics of a compacted context (`compact --diagnostics`, Model.compact(diagnostics=
/// True)): for every KV head of every global layer, diagnose_head (compaction/head_diagnostics.h)
/// of the compacted head against the full one on two query sets: "fit", the reference queries
/// the method was given (prefill.queries; for on-policy methods the off-policy ones), and
/// "heldout", the context's own queries (prefill.context_queries: every query head of the group
/// at every context position, attending to the whole context), which the fit never saw unless
/// the method's queries include `context`. JSON: {"heads": [{"name": "L0H1", "layer", "kv_head",
/// "T", "t", "fit": {...}, "heldout": {...}}], "mean": {"fit": {...}, "heldout": {...}}} with the
/// HeadDiagnostics fields (n_queries, rel_l2_mean, rel_l2_max, cosine_mean, cosine_min,
/// mass_err_mean, mass_err_max); "mean" averages each field over the heads. Heads in parallel.
/// Throws Error when the caches' shapes differ or a compacted head is empty while queries exist.
nlohmann::json compaction_diagnostics(const ContextPrefill& prefill, const KVCache& compacted);

}  // namespace kvcompact
