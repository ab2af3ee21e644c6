// Model hyper-parameters shared by every loader and the forward pass.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvcompact {

/// How RoPE pairs the dimensions of a head.
/// Interleaved: pairs (2i, 2i+1), as in Meta's Llama code, llama2.c and GGUF `llama`.
/// HalfSplit:   pairs (i, i + head_dim/2), the "rotate_half" of Hugging Face transformers.
enum class RopeStyle { Interleaved, HalfSplit };

/// RoPE frequency scaling (Hugging Face config.json `rope_scaling`).
/// None:   inv_freq_j = theta^(-2j/head_dim).
/// Linear: positions divided by `factor` (same as inv_freq / factor).
/// Llama3: Llama 3.1 (transformers `_compute_llama3_parameters`): with wavelen = 2 pi / inv_freq,
///   low = original_max_position_embeddings / low_freq_factor, high = original / high_freq_factor:
///   wavelen < high keeps inv_freq; wavelen > low uses inv_freq / factor; otherwise
///   s = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor) and
///   inv_freq' = (1 - s) inv_freq / factor + s inv_freq.
enum class RopeScalingType { None, Linear, Llama3 };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
};

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
  RopeScaling rope_scaling;     ///< RoPE frequency scaling (none by default)
  bool attention_qkv_bias = false;  ///< q/k/v projections have biases (Qwen2, Llama attention_bias)
  bool attention_out_bias = false;  ///< o projection has a bias (Llama/Qwen3 attention_bias)
  bool qk_norm = false;  ///< per-head RMSNorm of q and k (weights [head_dim]) before RoPE (Qwen3)
  int bos_token_id = -1;            ///< from the checkpoint config; -1 when unknown
  std::vector<int> eos_token_ids;   ///< from the checkpoint config; empty when unknown

  int group_size() const { return n_heads / n_kv_heads; }  ///< query heads per KV head
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

}  // namespace kvcompact
