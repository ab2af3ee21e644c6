// Reference queries for Attention Matching, collected by repeat-prefill.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/kv_cache.h"
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

 private:
  std::size_t index(int layer, int kv_head) const;
  int n_layers_ = 0, n_kv_heads_ = 0, head_dim_ = 0;
  std::vector<std::vector<float>> rows_;  // [n_layers * n_kv_heads][n * head_dim]
};

/// The prompt placed between the two copies of the context in repeat-prefill.
inline constexpr const char* kRepeatPrompt = "Repeat the previous context.";

/// Result of prefilling a context and collecting its reference queries.
struct ContextPrefill {
  KVCache cache;                   ///< the context's full cache (T entries per head, positions 0..T-1)
  std::vector<float> last_logits;  ///< [vocab] logits after the last context token (predict token T)
  ReferenceQueries queries;        ///< per layer and KV head: [group_size * (T-1), head_dim]
};

/// Repeat-prefill (Attention Matching, arXiv 2602.16284): runs the context tokens (BOS included),
/// then the tokens of kRepeatPrompt (encoded without BOS), then the context again without its
/// first token, and keeps the queries (after RoPE) of that second copy's T-1 positions, for every
/// query head of each KV head's group (rows ordered position-major, then query head).
/// The cache returned is the one after the first copy only. Throws Error when T < 2.
ContextPrefill repeat_prefill(const Transformer& model, const Tokenizer& tokenizer,
                              std::span<const int> context);

}  // namespace kvcompact
