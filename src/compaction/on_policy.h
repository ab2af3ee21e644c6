// On-policy reference queries (the paper's `on_policy`, adamzweiger/compaction
// PerLayerHeadOnPolicyCompaction): layer l is compacted with the queries its reference sequences
// produce when every layer below l already reads its compacted cache, instead of the queries of
// the uncompacted model.
#pragma once

#include "compaction/compact_cache.h"
#include "compaction/reference_queries.h"
#include "model/transformer.h"

namespace kvcompact {

/// Compacts `prefill.cache` layer by layer with on-policy queries. The reference sequences are
/// prefill.sequences (the repeat and self-study token sequences collect_reference_queries ran
/// after the context); the sources of options.method.queries must all be repeat or self-study.
///
/// One pass over the layers, each sequence's hidden states carried from layer to layer: for
/// layer l, every sequence runs layer l (ForwardOptions first_layer = l, end_layer = l + 1) over
/// the full layer-l cache to give its queries (rows >= skip, every query head of each KV head's
/// group); these are capped per source and in total exactly as collect_reference_queries caps
/// them (same seeds: options.seed is the query plan's seed), layer l is compacted with them (compact_cache_layer), and the sequences run
/// layer l again over the compacted layer to give the hidden states entering layer l + 1. The
/// sequences' own entries are rolled back after each run (HeadCache::truncate). This equals the
/// paper's procedure of one full forward per layer over a cache whose layers < l are compacted,
/// at the cost of two forwards of the sequences. Sliding-window layers are never compacted.
/// Layer 0 sees the same queries as off-policy compaction. The result keeps next_position = T.
/// Throws Error when the plan has a context or random source, there are no sequences, or as
/// compact_cache.
KVCache compact_cache_on_policy(const Transformer& model, const ContextPrefill& prefill,
                                const CompactionOptions& options);

/// The entry point of every pipeline that compacts a prefilled context: compact_cache_on_policy
/// when options.method.queries.on_policy is set, compact_cache_chunked (compaction/chunked.h)
/// when options.chunk_size > 0, else compact_cache on the prefill's queries. Throws Error for
/// on-policy queries with chunks (not supported together), and as those functions. The prefill
/// must come from a query plan with seed options.seed (prefill_for_compaction makes it so).
KVCache compact_prefill(const Transformer& model, const Tokenizer& tokenizer, const ContextPrefill& prefill,
                        const CompactionOptions& options);

}  // namespace kvcompact
