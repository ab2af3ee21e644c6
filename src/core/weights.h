// Model weights. The big matrices (embedding, projections, classifier) are WeightMatrix
// (float32, float16, bfloat16, Q8_0 or Q4_0, owned or viewing a memory-mapped file); norms and
// biases are float32 vectors. RMSNorm weights are the multipliers actually applied (Gemma's
// stored `w` becomes 1 + w at load time, as llama.cpp's GGUF conversion folds it). Row-major, W[out, in] means y = W x.
#pragma once

#include <vector>

#include "core/config.h"
#include "core/weight_matrix.h"

namespace kvcompact {

/// One transformer block's weights. Shapes use ModelConfig names.
struct LayerWeights {
  std::vector<float> attn_norm;  ///< [dim]
  WeightMatrix wq;               ///< [n_heads * head_dim, dim]
  WeightMatrix wk;               ///< [n_kv_heads * head_dim, dim]
  WeightMatrix wv;               ///< [n_kv_heads * head_dim, dim]
  WeightMatrix wo;               ///< [dim, n_heads * head_dim]
  std::vector<float> ffn_norm;   ///< [dim]
  WeightMatrix w_gate;           ///< [hidden_dim, dim]  (llama2.c w1)
  WeightMatrix w_down;           ///< [dim, hidden_dim]  (llama2.c w2)
  WeightMatrix w_up;             ///< [hidden_dim, dim]  (llama2.c w3)
  // Optional (ModelConfig flags say which are present; empty otherwise).
  std::vector<float> bq;      ///< [n_heads * head_dim]     when attention_qkv_bias (Qwen2)
  std::vector<float> bk;      ///< [n_kv_heads * head_dim]  when attention_qkv_bias
  std::vector<float> bv;      ///< [n_kv_heads * head_dim]  when attention_qkv_bias
  std::vector<float> bo;      ///< [dim]                    when attention_out_bias
  std::vector<float> q_norm;  ///< [head_dim]  per-head RMSNorm of q before RoPE (Qwen3 qk_norm)
  std::vector<float> k_norm;  ///< [head_dim]  per-head RMSNorm of k before RoPE (Qwen3 qk_norm)
  std::vector<float> attn_post_norm;  ///< [dim]  RMSNorm of the attention output (NormPlacement::PrePost)
  std::vector<float> ffn_post_norm;   ///< [dim]  RMSNorm of the MLP output (NormPlacement::PrePost)
};

/// All weights of a Llama-family decoder.
struct ModelWeights {
  WeightMatrix token_embedding;      ///< [vocab_size, dim]
  std::vector<LayerWeights> layers;  ///< [n_layers]
  std::vector<float> final_norm;     ///< [dim]
  WeightMatrix classifier;           ///< [vocab_size, dim]; empty when tied to token_embedding

  /// The classifier matrix [vocab_size, dim] (the embedding when tied).
  const WeightMatrix& classifier_matrix() const {
    return classifier.empty() ? token_embedding : classifier;
  }
  /// float32 data of the classifier (throws Error when it is not float32).
  const float* classifier_data() const { return classifier_matrix().data(); }
};

}  // namespace kvcompact
