// compact-eval: the quality cost of KV-cache compaction on plain-text documents.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compaction/compact_cache.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {

/// Options of a compaction evaluation.
struct CompactEvalOptions {
  std::vector<double> ratios{0.05, 0.1, 0.2, 0.5, 1.0};  ///< keep ratios r in [0, 1]
  std::vector<MethodSpec> methods{MethodSpec{}};        ///< default: am
  double context_frac = 0.6;  ///< T = floor(context_frac * N) of a document's N tokens (BOS included)
  /// When > 0: T = context_tokens instead of context_frac (documents need T + 1 tokens).
  int context_tokens = 0;
  /// When > 0: at most this many continuation tokens are scored (the first ones after T).
  int continuation_tokens = 0;
  uint64_t seed = 0;          ///< seed of `random`, query subsampling and self-study
  /// Non-uniform budgets: per-head proportions [n_layers * n_kv_heads] layer-major (summing to 1,
  /// budget_solver.h); each ratio r is then the total ratio: head budgets per_head_budgets(p, T, r).
  std::vector<double> budget_proportions;
  /// With budget_proportions: no head keeps more than max(1, floor(max_head_ratio * T)) keys
  /// (per_head_budgets' cap, the paper's max_ratio_per_head); in (0, 1], 1 = no cap.
  double max_head_ratio = 1.0;
  /// > 0: chunked compaction in KV space (compaction/chunked.h), chunks of this many tokens.
  int chunk_size = 0;
  bool progress = true;       ///< one line per document on stderr
};

/// One (method, ratio) result, aggregated over documents.
struct CompactEvalRow {
  std::string method;
  double ratio = 0;
  double delta_nll_mean = 0;      ///< mean over documents of (NLL compacted - NLL full), nats/token
  double delta_nll_sem = 0;       ///< standard error of that mean across documents (0 for 1 doc)
  double nll_mean = 0;            ///< mean over documents of the compacted-cache NLL, nats/token
  double cache_bytes = 0;         ///< mean over documents of the compacted cache's bytes (KVCache::bytes)
  double full_cache_bytes = 0;    ///< mean over documents of the full context cache's bytes
  double compaction_seconds = 0;  ///< mean over documents of the wall time to compact the whole cache
  double compaction_seconds_per_head = 0;  ///< compaction_seconds / (n_layers * n_kv_heads)
  double kept_entries = 0;        ///< mean over documents of the entries kept, summed over heads
  std::vector<double> delta_nll_per_document;  ///< [documents] the deltas averaged above
  std::vector<double> seconds_per_document;    ///< [documents] compaction wall time (whole cache)
};

/// One evaluated document: its tokens and the full-cache NLL (for peers that score the same tokens).
struct CompactEvalDocument {
  std::vector<int> tokens;  ///< [N]: context (first context_tokens, BOS included) then continuation
  int context_tokens = 0;   ///< T
  double full_nll = 0;      ///< full-cache continuation NLL, nats/token
  double reference_seconds = 0;  ///< wall time of its prefill(s) with reference queries
};

/// The evaluation's result.
struct CompactEvalResult {
  std::vector<CompactEvalRow> rows;  ///< methods x ratios, in the order given
  int documents = 0;
  double full_nll_mean = 0;          ///< mean over documents of the full-cache continuation NLL
  double mean_context_tokens = 0;    ///< mean T
  double mean_continuation_tokens = 0;
  double reference_seconds = 0;      ///< total time of the repeat-prefills (reference queries)
  std::vector<CompactEvalDocument> per_document;  ///< [documents], in order
};

/// One (method, ratio) result of one document.
struct CompactEvalCell {
  double nll = 0;         ///< compacted-cache continuation NLL, nats/token
  double bytes = 0;       ///< compacted cache bytes (KVCache::bytes)
  double full_bytes = 0;  ///< full context cache bytes
  double heads = 1;       ///< n_layers * n_kv_heads of the cache
  double seconds = 0;     ///< wall time of compact_cache
  double entries = 0;     ///< entries kept, summed over heads
};

/// One document's whole evaluation: the work unit of a sharded compact-eval.
struct CompactEvalUnit {
  int document = 0;                    ///< 0-based index in the document list
  CompactEvalDocument doc;             ///< tokens, T, full-cache NLL, reference seconds
  std::vector<CompactEvalCell> cells;  ///< [methods x ratios], methods outer, in the options' order
};

/// Checks the options against the model (throws Error as run_compact_eval).
void validate_compact_eval_options(const Model& model, const CompactEvalOptions& options);

/// Evaluates document `d` (0-based; text `document`) as run_compact_eval does. `warned_seq_len`
/// carries the once-per-run max_seq_len warning. Throws as run_compact_eval.
CompactEvalUnit evaluate_compact_eval_document(const Model& model, const Transformer& transformer,
                                               const std::string& document, std::size_t d,
                                               const CompactEvalOptions& options, bool& warned_seq_len);

/// The result of run_compact_eval from its per-document units (in document order; the sums run in
/// that order, so a sharded study merges to the same numbers as one process). Throws Error when
/// `units` is empty or a unit's cells do not match the options.
CompactEvalResult aggregate_compact_eval(const CompactEvalOptions& options, const std::vector<CompactEvalUnit>& units);

/// For each document: encode with BOS (N tokens), context = the first T = floor(context_frac*N)
/// tokens, continuation = the rest. Prefill the context with repeat-prefill to get its cache and
/// reference queries; score the continuation teacher-forced over the full cache and over each
/// compacted cache (continuation tokens at RoPE positions T..N-1). The NLL of a cache is the
/// mean over all N-T continuation tokens; the first one is predicted from the context's last
/// logits, which compaction does not change.
/// Reference queries are collected once per document for each distinct `queries=` setting.
/// Throws Error naming the document (1-based) when T < 2 or N - T < 1, and on a bad option.
CompactEvalResult run_compact_eval(const Model& model, const std::vector<std::string>& documents,
                                   const CompactEvalOptions& options);

}  // namespace kvcompact
