// Chunked compaction in KV space (the paper's KV-based chunking, adamzweiger/compaction
// compaction/compaction_methods/chunked.py): the context is prefilled once; each chunk of its
// KV cache is compacted on its own, with reference queries made against that chunk alone, and
// the compacted chunks are put back in order. The keys keep the RoPE of their original
// positions, so nothing is re-rotated.
#pragma once

#include <cstdint>

#include "compaction/compact_cache.h"
#include "compaction/reference_queries.h"
#include "io/tokenizer.h"
#include "model/transformer.h"

namespace kvcompact {

/// Checks a chunk size as CompactionOptions::chunk_size takes it: 0 (the whole context at once) or
/// at least 2 tokens. Throws Error otherwise (front ends call it before any work).
void check_chunk_size(int chunk_size);

/// Compacts prefill.cache (the context prefill.context, T tokens) in chunks of
/// options.chunk_size tokens: chunk c = positions [c C, min((c + 1) C, T)). For each chunk, a
/// cache holding only that chunk's entries in the global layers (original positions and RoPE,
/// next_position = T; sliding-window layers whole, as the paper keeps them) is
/// given repeat-prefill queries (repeat_queries_over: kRepeatPrompt, then the chunk's tokens, at
/// positions T, T + 1, ...; the BOS of chunk 0 is not repeated), capped at the method's total cap
/// (options.seed + chunk, the query plan's seed as collect_reference_queries used it), and the chunk's context queries are its rows of prefill.context_queries; every
/// head of the chunk is then compacted by compact_cache to max(1, floor(ratio * chunk length))
/// entries. A head's result is its compacted chunks in order, so it keeps sum_c max(1,
/// floor(ratio C_c)) entries. Sliding-window layers are kept whole (never compacted). With
/// chunk_size >= T the chunk's queries are the off-policy repeat queries and the result equals
/// compact_cache's for a plain `queries=repeat` plan. Cost: each AM fit sees C keys instead of T.
/// Throws Error for chunk_size < 2, per-head budgets (not supported with chunks), query sources
/// other than repeat, or a prefill without its context tokens; and as compact_cache.
KVCache compact_cache_chunked(const Transformer& model, const Tokenizer& tokenizer, const ContextPrefill& prefill,
                              const CompactionOptions& options);

}  // namespace kvcompact
