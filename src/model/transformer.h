// The forward pass of a Llama-family decoder over an explicit KV cache.
#pragma once

#include <span>
#include <vector>

#include "model/config.h"
#include "model/kv_cache.h"
#include "model/weights.h"

namespace kvcompact {

/// Which rows of logits a forward pass returns.
enum class LogitsMode { None, Last, All };

/// Receives intermediate tensors during a forward pass (reference-query capture, analyses).
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  /// Queries of layer `layer` after RoPE: q [n_tokens, n_heads * head_dim], row i at RoPE
  /// position `first_position + i`.
  virtual void on_queries(int layer, const float* q, int n_tokens, int first_position) {
    (void)layer, (void)q, (void)n_tokens, (void)first_position;
  }
};

/// Options of one forward call.
struct ForwardOptions {
  LogitsMode logits = LogitsMode::Last;
  ForwardObserver* observer = nullptr;
};

/// Runs a decoder on token sequences. Holds references to config and weights (must outlive it).
///
/// forward(tokens, cache): the tokens are placed at RoPE positions cache.next_position, ... ;
/// in every layer each query head h attends over its KV head's cached entries (logits
/// q.k/sqrt(head_dim) + beta) plus, causally, the new tokens; the new tokens' keys (after RoPE)
/// and values are appended to the cache with beta 0 and next_position advances by tokens.size().
class Transformer {
 public:
  Transformer(const ModelConfig& config, const ModelWeights& weights);

  /// Returns logits: [tokens.size(), vocab] for All, [vocab] for Last, empty for None.
  /// Throws Error for a token id outside the vocabulary or a cache of another shape.
  std::vector<float> forward(std::span<const int> tokens, KVCache& cache,
                             const ForwardOptions& options = {}) const;

  /// An empty cache shaped for this model.
  KVCache make_cache() const;

  const ModelConfig& config() const { return config_; }

 private:
  const ModelConfig& config_;
  const ModelWeights& weights_;
};

}  // namespace kvcompact
