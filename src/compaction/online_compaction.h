// Compaction during generation (the paper's online / mid-generation compaction,
// adamzweiger/compaction evaluation/run_reasoning_evaluation.py): when the cache reaches a limit,
// every head's entries but the newest keep_recent are compacted and generation continues;
// repeatable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "compaction/method_spec.h"
#include "compaction/reference_queries.h"
#include "core/kv_cache.h"
#include "io/tokenizer.h"
#include "model/generate.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {

/// Settings of compaction during generation.
struct OnlineCompactionOptions {
  int limit = 0;            ///< compact when a head of a global layer holds >= limit entries (> keep_recent)
  int keep_recent = 64;     ///< the newest entries of every head, kept verbatim (the paper's protected tokens)
  int keep_prefix = 0;      ///< the oldest entries of every head (a chat template's system prefix), kept verbatim
  double ratio = 0.1;       ///< the older n entries of a head keep max(1, floor(ratio * n)), ratio in (0, 1]
  MethodSpec method;        ///< default am; its reference queries must be `repeat` (the only source here)
  int max_compactions = 0;  ///< at most this many compactions (0: no limit)
  uint64_t seed = 0;        ///< seeds of per-head methods (random), mixed with the compaction index
};

/// One compaction: when it happened and what it did.
struct OnlineCompactionEvent {
  int tokens_fed = 0;             ///< tokens fed when it ran (= the cache's next_position)
  std::size_t entries_before = 0; ///< cache entries (all heads) before and after
  std::size_t entries_after = 0;
  double seconds = 0;             ///< wall time of the compaction, reference queries included
};

/// Compacts, in place, every head of every global layer of `cache` except its first keep_prefix
/// and its newest keep_recent entries, which stay as they are (sliding-window layers are never
/// compacted). The n entries between them become max(1, floor(ratio n)) by options.method, fitted to the attention of
/// reference queries from repeat-prefill of `history` (every token fed so far, BOS first) over
/// the current cache (repeat_queries_over). Entries compacted before carry their beta into the
/// fit (HeadCompactionInput::key_bias); for methods that only select entries (beta 0, values
/// unchanged), the kept entries keep their old beta. next_position is unchanged. A head with at
/// most keep_prefix + keep_recent entries is left alone. Returns the event (tokens_fed = history size).
/// Throws Error for options out of range, a method needing the context's own queries (snapkv,
/// h2o, ...: none exist mid-generation), query sources other than repeat, or a layer-scoped
/// method (tova, adakv).
/// `recent_queries` (optional): the queries of the newest keep_recent tokens, every query head of
/// each KV head's group, position-major ([keep_recent * group, head_dim] per head, e.g. from a
/// QueryCollector while they were fed). With them SnapKV (`snapkv:window=W`, W = keep_recent)
/// works mid-conversation: its context is the compacted range plus the recent entries, these are
/// its observation window, and it keeps the window and the range's entries they attend to most.
OnlineCompactionEvent compact_all_but_recent(const Transformer& model, const Tokenizer& tokenizer, KVCache& cache,
                                             std::span<const int> history, const OnlineCompactionOptions& options,
                                             int compaction_index = 0,
                                             const ReferenceQueries* recent_queries = nullptr);

/// generate() (model/generate.h: same prompt, steps, sampling and stopping) that runs
/// compact_all_but_recent whenever a global head reaches options.limit entries, at most
/// options.max_compactions times; `events` (optional) receives each compaction. With a ratio-1
/// method that keeps every entry (e.g. recent) the text equals plain generate()'s.
GenerationResult generate_with_online_compaction(const Transformer& model, const Tokenizer& tokenizer,
                                                 std::string_view prompt, int steps, Sampler& sampler,
                                                 const OnlineCompactionOptions& options,
                                                 std::vector<OnlineCompactionEvent>* events = nullptr,
                                                 const std::function<void(std::string_view)>& on_text = {});

}  // namespace kvcompact
