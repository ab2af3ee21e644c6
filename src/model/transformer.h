// The forward pass of a Llama-family decoder over an explicit KV cache.
#pragma once

#include <span>
#include <vector>

#include "core/config.h"
#include "core/kv_cache.h"
#include "core/weights.h"
#include "ops/attention.h"

namespace kvcompact {

/// Which rows of logits a forward pass returns.
/// Which rows' logits forward() returns: none, the last token's, every token's, or the rows
/// listed in ForwardOptions::logit_rows (in that order).
enum class LogitsMode { None, Last, All, Rows };

/// What the attention of one layer read in a forward call. Query head h attends its KV head
/// g = h / (n_heads / n_kv_heads) through heads[g], whose last n_tokens entries are the new
/// tokens' own keys/values; row i sees entries 0 .. heads[g].length - n_tokens + i. Scores are
/// q.k / sqrt(head_dim) + beta (ops/attention.h).
/// Query row i sees entries first_visible(heads[g], n_tokens, i) .. (ops/attention.h): 0 except
/// in sliding-window layers.
struct AttentionContext {
  int layer = 0;
  int n_tokens = 0;
  int first_position = 0;  ///< RoPE position of row 0
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  const float* q = nullptr;  ///< [n_tokens, n_heads * head_dim], after RoPE
  const AttentionHeadView* heads = nullptr;  ///< [n_kv_heads]
};

/// Receives intermediate tensors during a forward pass (reference-query capture, analyses).
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  /// Queries of layer `layer` after RoPE: q [n_tokens, n_heads * head_dim], row i at RoPE
  /// position `first_position + i`.
  virtual void on_queries(int layer, const float* q, int n_tokens, int first_position) {
    (void)layer, (void)q, (void)n_tokens, (void)first_position;
  }
  /// Hidden states entering layer `layer` (the residual stream before its attention RMSNorm):
  /// x [n_tokens, dim]. Lets a caller resume a later forward at that layer (ForwardOptions).
  virtual void on_layer_input(int layer, const float* x, int n_tokens) {
    (void)layer, (void)x, (void)n_tokens;
  }
  /// Attention output of layer `ctx.layer` before the output projection: att [n_tokens, n_heads *
  /// head_dim], query head h in columns [h*head_dim, (h+1)*head_dim). May be modified in place
  /// (head interventions: zeroing or replacing a head's output). `ctx` holds what the attention
  /// read (queries and the layer's KV head views) for analyses that need the attention weights.
  virtual void on_attention_output(const AttentionContext& ctx, float* att) { (void)ctx, (void)att; }
};

/// Options of one forward call.
struct ForwardOptions {
  LogitsMode logits = LogitsMode::Last;
  ForwardObserver* observer = nullptr;
  /// Resume at this layer: with layer_input set, the embedding and layers < first_layer are
  /// skipped (their caches are neither read nor extended); layer_input [n, dim] holds the hidden
  /// states entering first_layer, e.g. captured by ForwardObserver::on_layer_input in a forward
  /// over the same tokens and positions. Layers >= first_layer then compute exactly as in a full
  /// forward.
  int first_layer = 0;
  const float* layer_input = nullptr;
  /// Stop after layer end_layer - 1 (-1 = run every layer): layers >= end_layer are skipped and
  /// their caches neither read nor extended; logits must then be LogitsMode::None (else Error).
  /// With first_layer = l and end_layer = l + 1 a call runs exactly one layer.
  int end_layer = -1;
  /// When set: receives the hidden states after the last layer run (before the final norm),
  /// [n, dim]; with end_layer = first_layer, the input (embeddings or layer_input) itself.
  std::vector<float>* hidden_out = nullptr;
  /// With LogitsMode::Rows: the rows (0 .. tokens.size()-1, any order, repeats allowed) whose
  /// logits are returned, [logit_rows.size(), vocab]. Throws Error for a row out of range.
  std::vector<int> logit_rows{};
};

/// Runs a decoder on token sequences. Holds references to config and weights (must outlive it).
///
/// forward(tokens, cache): the tokens are placed at RoPE positions cache.next_position, ... ;
/// in every layer each query head h attends over its KV head's cached entries (logits
/// q.k/sqrt(head_dim) + beta) plus, causally, the new tokens; the new tokens' keys (after RoPE)
/// and values are appended to the cache with beta 0 and next_position advances by tokens.size().
/// Each layer follows its LayerSpec (core/config.h): its RoPE (theta, scaling; Yarn's factor
/// multiplies cos/sin, so keys are stored scaled), its attention span (a sliding layer's query at
/// position p ignores entries at positions <= p - window; the cache keeps every entry and masks),
/// its logit scale (folded into q, so observers and compaction see q.k/sqrt(head_dim) scores),
/// its norm placement and MLP kind. Embeddings are multiplied by embedding_scale; logits are
/// soft-capped when final_logit_softcap > 0.
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
  std::vector<std::vector<float>> rope_inv_freq_;  ///< per distinct layer RoPE: inv_freq [head_dim/2]
  std::vector<float> rope_factor_;                 ///< per distinct layer RoPE: cos/sin multiplier
  std::vector<int> layer_rope_;                    ///< [n_layers] index into rope_inv_freq_
};

}  // namespace kvcompact
