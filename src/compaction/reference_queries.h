// Reference queries for Attention Matching: repeat-prefill, the context's own queries,
// self-study generations and random vectors, combinable with caps.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compaction/method_spec.h"
#include "io/tokenizer.h"
#include "core/kv_cache.h"
#include "model/transformer.h"

namespace kvcompact {

/// Reference queries per layer and KV head: rows [n, head_dim] (after RoPE) of every query head
/// in the KV head's GQA group.
class ReferenceQueries {
 public:
  ReferenceQueries() = default;
  ReferenceQueries(int n_layers, int n_kv_heads, int head_dim);

  /// Q: [count(layer, kv_head), head_dim], row-major.
  const std::vector<float>& at(int layer, int kv_head) const;
  std::vector<float>& at(int layer, int kv_head);
  int count(int layer, int kv_head) const;
  int head_dim() const { return head_dim_; }
  int n_layers() const { return n_layers_; }
  int n_kv_heads() const { return n_kv_heads_; }
  /// Appends every head's rows of `other` (same shape) after this one's.
  void append(const ReferenceQueries& other);
  /// Keeps at most `cap` rows per head, chosen uniformly without replacement with
  /// std::mt19937_64(seed + head index), kept in their original order. cap <= 0 keeps all.
  void subsample(int cap, uint64_t seed);

 private:
  std::size_t index(int layer, int kv_head) const;
  int n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  std::vector<std::vector<float>> rows_;  // [n_layers * n_kv_heads][n * head_dim]
};

/// A forward observer that appends the queries (after RoPE) of rows [skip, n) of every forward
/// call to `out`, per layer and KV head: for each row, every query head of the KV head's group
/// (position-major, then query head), the layout of ReferenceQueries.
class QueryCollector : public ForwardObserver {
 public:
  QueryCollector(const ModelConfig& c, int skip, ReferenceQueries& out) : c_(c), skip_(skip), out_(out) {}
  void on_queries(const QueryView& v) override;

 private:
  const ModelConfig& c_;
  int skip_;
  ReferenceQueries& out_;
};

/// The prompt placed between the two copies of the context in repeat-prefill.
inline constexpr const char* kRepeatPrompt = "Repeat the previous context.";

/// Self-study generation settings. Each of `count` samples continues the context cache: for
/// base models with no prompt, a plain continuation; otherwise prompt i % prompts.size() is fed
/// (encoded without BOS) and the model continues it. Queries of the prompt and generated tokens
/// are collected. Sampling is seeded (Sampler, llama2.c xorshift).
struct SelfStudyOptions {
  int count = 4;              ///< number of generations
  int length = 64;            ///< generated tokens per generation
  float temperature = 1.0f;
  float top_p = 0.9f;
  std::vector<std::string> prompts;  ///< empty: plain continuations
};

/// Which sources to use (QuerySpec of a method spec: sources with per-source caps, and a total
/// cap per KV head after combining, subsampled with `seed`), plus how to run them.
struct QueryPlan {
  QuerySpec spec;         ///< default: repeat, uncapped, total cap 50,000
  uint64_t seed = 0;
  SelfStudyOptions self_study;
  int random_count = 0;   ///< rows per KV head of the Random source (0 = group_size * T)
};

/// A token sequence fed after the context cache whose queries (rows >= skip) were reference
/// queries: what on-policy compaction (compaction/on_policy.h) feeds again.
struct QuerySequence {
  int source = 0;           ///< index into QueryPlan::spec.sources
  std::vector<int> tokens;  ///< fed at positions T, T+1, ...
  int skip = 0;             ///< leading rows whose queries are not kept (the repeat prompt)
};

/// Result of prefilling a context and collecting its reference queries.
struct ContextPrefill {
  KVCache cache;                    ///< the context's full cache (T entries per head, positions 0..T-1)
  std::vector<float> last_logits;   ///< [vocab] logits after the last context token (predict token T)
  ReferenceQueries queries;         ///< per layer and KV head, as the plan asks
  ReferenceQueries context_queries; ///< per layer and KV head: [T * group_size, head_dim], the
                                    ///< context prefill's own queries, row (position i, query head
                                    ///< g) at i * group_size + g (SnapKV, H2O use them)
  /// The repeat and self-study sequences run after the context, in source order.
  std::vector<QuerySequence> sequences;
  /// The context's token ids (BOS first), [T].
  std::vector<int> context;
};

/// Repeat-prefill (Attention Matching, arXiv 2602.16284): runs the context tokens (BOS included),
/// then the tokens of kRepeatPrompt (encoded without BOS), then the context again without its
/// first token, and keeps the queries (after RoPE) of that second copy's T-1 positions, for every
/// query head of each KV head's group (rows ordered position-major, then query head).
/// The cache returned is the one after the first copy only. Throws Error when T < 2.
ContextPrefill repeat_prefill(const Transformer& model, const Tokenizer& tokenizer,
                              std::span<const int> context);

/// Repeat-prefill queries over an existing cache: kRepeatPrompt (no BOS), then context[1:], fed
/// after `cache` (which holds the context, possibly compacted) and rolled back afterwards
/// (KVCache::mark), so `cache` is returned unchanged; the queries of the context copy's positions,
/// every query head of each KV head's group, position-major. Used to compact a cache again during
/// generation (compaction/online_compaction.h). Throws Error when the context has fewer than 2 tokens.
ReferenceQueries repeat_queries_over(const Transformer& model, const Tokenizer& tokenizer, KVCache& cache,
                                     std::span<const int> context);

/// Prefills the context once and collects reference queries from every source of `plan`
/// (each capped, then combined and capped to plan.spec.total_cap; a cap of 0 means none).
/// Throws Error when T < 2, the plan has no source, or a cap is negative.
ContextPrefill collect_reference_queries(const Transformer& model, const Tokenizer& tokenizer,
                                         std::span<const int> context, const QueryPlan& plan);

/// "repeat", "context", "self-study" or "random".
std::string query_source_name(QuerySourceKind source);

}  // namespace kvcompact
