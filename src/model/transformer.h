// The forward pass of a Llama-family decoder over an explicit KV cache.
#pragma once

#include <span>
#include <vector>

#include "core/config.h"
#include "core/kv_cache.h"
#include "core/weights.h"
#include "model/backend.h"
#include "model/forward_views.h"
#include "ops/attention.h"

namespace kvcompact {

/// Which rows' logits forward() returns: none, the last token's, every token's, or the rows
/// listed in ForwardOptions::logit_rows (in that order).
enum class LogitsMode { None, Last, All, Rows };

/// Receives intermediate tensors during a forward pass (reference-query capture, analyses), as
/// named views (model/forward_views.h) valid only during the call.
class ForwardObserver {
 public:
  virtual ~ForwardObserver() = default;
  /// Queries of layer `v.layer` after RoPE: v.q [n_tokens, n_heads * head_dim], row i at RoPE
  /// position v.first_position + i.
  virtual void on_queries(const QueryView& v) { (void)v; }
  /// Hidden states entering layer `v.layer` (the residual stream before its attention RMSNorm):
  /// v.x [n_tokens, dim]. Lets a caller resume a later forward at that layer (ForwardOptions).
  virtual void on_layer_input(const LayerInputView& v) { (void)v; }
  /// Attention output of layer `ctx.layer` before the output projection: att [n_tokens, n_heads *
  /// head_dim]. May be modified in place (head interventions: zeroing or replacing a head's
  /// output). `ctx` holds what the attention read (queries and the layer's KV head views) for
  /// analyses that need the attention weights.
  virtual void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) { (void)ctx, (void)att; }
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

/// The rows of an n-token forward whose logits `mode` returns: none, {n - 1}, 0 .. n-1, or `rows`
/// (LogitsMode::Rows). Shared by forward() and callers that build BatchSequence::logit_rows.
std::vector<int> logit_rows_for(LogitsMode mode, int n, const std::vector<int>& rows = {});

/// One sequence of a batched forward (Transformer::forward_batch): its tokens, the cache they
/// attend over and extend, and the rows whose logits are returned.
struct BatchSequence {
  std::span<const int> tokens;         ///< fed at RoPE positions cache->next_position, ...
  KVCache* cache = nullptr;            ///< this sequence's own cache (no two sequences may share one)
  const float* layer_input = nullptr;  ///< [tokens.size(), dim] entering first_layer, when first_layer > 0
  std::vector<int> logit_rows{};       ///< rows 0 .. tokens.size()-1 whose logits are returned, in order
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
///
/// The kernels run on `backend` (model/backend.h; default cpu_backend()), which also owns the
/// activation workspaces: concurrent forward calls on one Transformer are safe as long as they use
/// different caches.
class Transformer {
 public:
  /// Throws Error for an inconsistent config or weights of the wrong shapes (naming the layer).
  Transformer(const ModelConfig& config, const ModelWeights& weights, const Backend& backend = cpu_backend());

  /// Returns logits: [tokens.size(), vocab] for All, [vocab] for Last, empty for None.
  /// Throws Error for a token id outside the vocabulary or a cache of another shape.
  std::vector<float> forward(std::span<const int> tokens, KVCache& cache,
                             const ForwardOptions& options = {}) const;

  /// Several independent sequences in one pass: the rows of every sequence go through each
  /// projection, norm and MLP together (one GEMM instead of one per sequence), and each sequence
  /// attends only over its own cache plus, causally, its own new tokens, exactly as forward()
  /// would run it alone (values equal up to float32 summation order in the matmuls).
  /// first_layer > 0 resumes every sequence at that layer from its layer_input.
  /// Returns the listed logit rows of every sequence, sequence by sequence: [sum of
  /// logit_rows.size(), vocab]. Throws Error for an empty batch, a sequence without tokens or cache,
  /// two sequences on one cache, a missing layer_input, a bad token id or a logit row out of range.
  std::vector<float> forward_batch(std::span<const BatchSequence> sequences, int first_layer = 0) const;

  /// An empty cache shaped for this model.
  KVCache make_cache() const;

  const ModelConfig& config() const { return config_; }
  const Backend& backend() const { return backend_; }

 private:
  /// The pass behind forward() and forward_batch(): options.logits and logit_rows are ignored
  /// (each sequence lists its rows); observers, end_layer and hidden_out need a single sequence.
  std::vector<float> run(std::span<const BatchSequence> sequences, const ForwardOptions& options) const;

  /// A checked batch: the sequences, their row offsets in the stacked activations (row0 [S + 1],
  /// n = row0[S] rows in all), the logit rows they ask for and the layers to run.
  struct Batch {
    std::span<const BatchSequence> seqs;
    std::vector<int> row0;
    int n = 0;
    std::size_t n_logit_rows = 0;
    int first_layer = 0, end_layer = 0;
  };
  /// Validates sequences, tokens, logit rows, caches and layer range; throws Error naming the
  /// sequence and the problem.
  Batch check_batch(std::span<const BatchSequence> sequences, const ForwardOptions& options) const;
  /// Grows the workspace's buffers to n rows.
  void size_workspace(ForwardWorkspace& ws, std::size_t n) const;
  /// x [n, dim]: the token embeddings (times embedding_scale), or each sequence's layer_input
  /// when the batch resumes at first_layer > 0.
  void embed(const Batch& b, float* x) const;
  /// ws.cos/sin of every distinct RoPE at each row's position.
  void rope_angles(const Batch& b, ForwardWorkspace& ws) const;
  /// Layer l's attention block on ws.x: norm, q/k/v, RoPE, append to each sequence's cache,
  /// attention over it, output projection (+ post-norm) and the residual add.
  void attention_block(int l, const Batch& b, const ForwardOptions& options, ForwardWorkspace& ws) const;
  /// Layer l's MLP block on ws.x: norm, gate/up, activation, down (+ post-norm), residual add.
  void mlp_block(int l, int n, ForwardWorkspace& ws) const;
  /// The listed rows' logits [n_logit_rows, vocab]: final norm, classifier, soft-cap.
  std::vector<float> logits_of(const Batch& b, ForwardWorkspace& ws) const;

  const ModelConfig& config_;
  const ModelWeights& weights_;
  const Backend& backend_;
  std::vector<std::vector<float>> rope_inv_freq_;  ///< per distinct layer RoPE: inv_freq [head_dim/2]
  std::vector<float> rope_factor_;                 ///< per distinct layer RoPE: cos/sin multiplier
  std::vector<int> layer_rope_;                    ///< [n_layers] index into rope_inv_freq_
};

}  // namespace kvcompact
