// Model hyper-parameters shared by every loader and the forward pass.
#pragma once

#include <cstdint>
#include <string>

namespace kvcompact {

/// How RoPE pairs the dimensions of a head.
/// Interleaved: pairs (2i, 2i+1), as in Meta's Llama code, llama2.c and GGUF `llama`.
/// HalfSplit:   pairs (i, i + head_dim/2), the "rotate_half" of Hugging Face transformers.
enum class RopeStyle { Interleaved, HalfSplit };

/// Decoder-only transformer configuration (Llama family: RMSNorm, RoPE, GQA, SwiGLU).
struct ModelConfig {
  std::string architecture = "llama";
  int dim = 0;          ///< residual width (hidden_size)
  int hidden_dim = 0;   ///< SwiGLU inner width (intermediate_size)
  int n_layers = 0;
  int n_heads = 0;      ///< query heads
  int n_kv_heads = 0;   ///< KV heads (GQA groups); n_heads % n_kv_heads == 0
  int head_dim = 0;     ///< per-head width; usually dim / n_heads
  int vocab_size = 0;
  int max_seq_len = 0;  ///< training context length (informational; not enforced)
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;  ///< RMSNorm epsilon
  RopeStyle rope_style = RopeStyle::Interleaved;
  bool tied_classifier = true;  ///< classifier shares the token embedding matrix

  int group_size() const { return n_heads / n_kv_heads; }  ///< query heads per KV head
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace kvcompact
