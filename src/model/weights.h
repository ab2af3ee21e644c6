// Model weights as plain float32 arrays, row-major. W[out, in] means y = W x.
#pragma once

#include <vector>

#include "model/config.h"

namespace kvcompact {

/// One transformer block's weights. Shapes use ModelConfig names.
struct LayerWeights {
  std::vector<float> attn_norm;  ///< [dim]
  std::vector<float> wq;         ///< [n_heads * head_dim, dim]
  std::vector<float> wk;         ///< [n_kv_heads * head_dim, dim]
  std::vector<float> wv;         ///< [n_kv_heads * head_dim, dim]
  std::vector<float> wo;         ///< [dim, n_heads * head_dim]
  std::vector<float> ffn_norm;   ///< [dim]
  std::vector<float> w_gate;     ///< [hidden_dim, dim]  (llama2.c w1)
  std::vector<float> w_down;     ///< [dim, hidden_dim]  (llama2.c w2)
  std::vector<float> w_up;       ///< [hidden_dim, dim]  (llama2.c w3)
};

/// All weights of a Llama-family decoder.
struct ModelWeights {
  std::vector<float> token_embedding;  ///< [vocab_size, dim]
  std::vector<LayerWeights> layers;    ///< [n_layers]
  std::vector<float> final_norm;       ///< [dim]
  std::vector<float> classifier;       ///< [vocab_size, dim]; empty when tied to token_embedding

  /// The classifier matrix [vocab_size, dim] (the embedding when tied).
  const float* classifier_data() const {
    return classifier.empty() ? token_embedding.data() : classifier.data();
  }
};

}  // namespace kvcompact
