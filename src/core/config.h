// Model hyper-parameters shared by every loader and the forward pass: model-wide sizes plus a
// per-layer description (LayerSpec) that the forward reads, so that model families differ in
// data rather than in branches of the forward.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kvcompact {

/// How RoPE pairs the dimensions of a head.
/// Interleaved: pairs (2i, 2i+1), as in Meta's Llama code, llama2.c and GGUF `llama`.
/// HalfSplit:   pairs (i, i + head_dim/2), the "rotate_half" of Hugging Face transformers.
enum class RopeStyle { Interleaved, HalfSplit };

/// RoPE frequency scaling (Hugging Face config.json `rope_scaling` / `rope_parameters`, GGUF
/// `<arch>.rope.scaling.*`). inv_freq_j = theta^(-2j/head_dim) before scaling.
/// None:   unchanged.
/// Linear: inv_freq / factor (positions divided by factor).
/// Llama3: Llama 3.1 (transformers `_compute_llama3_parameters`): with wavelen = 2 pi / inv_freq,
///   low = original_max_position_embeddings / low_freq_factor, high = original / high_freq_factor:
///   wavelen < high keeps inv_freq; wavelen > low uses inv_freq / factor; otherwise
///   s = (original / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor) and
///   inv_freq' = (1 - s) inv_freq / factor + s inv_freq.
/// Yarn:   YaRN (transformers `_compute_yarn_parameters`, ggml rope_yarn): correction range
///   [low, high] = find_correction_range(beta_fast, beta_slow, head_dim, theta,
///   original_max_position_embeddings) (floor/ceil when truncate), ramp_j = clamp((j - low) /
///   (high - low), 0, 1), inv_freq' = inv_freq / factor * ramp + inv_freq * (1 - ramp); cos and
///   sin are multiplied by attention_factor (0 means 0.1 ln(factor) + 1, 1 when factor <= 1).
enum class RopeScalingType { None, Linear, Llama3, Yarn };
struct RopeScaling {
  RopeScalingType type = RopeScalingType::None;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
  float beta_fast = 32.0f;         ///< Yarn
  float beta_slow = 1.0f;          ///< Yarn
  bool truncate = true;            ///< Yarn: floor/ceil the correction range
  float attention_factor = 0.0f;   ///< Yarn: cos/sin multiplier; 0 = derived from factor
  /// Per-frequency divisors [head_dim/2] (GGUF `rope_freqs.weight`, Llama 3.1/3.2 GGUF files):
  /// inv_freq_j is divided by freq_factors[j] as llama.cpp's ggml_rope_ext does; empty = none.
  std::vector<float> freq_factors;
};

/// RoPE of one layer.
struct RopeSpec {
  float theta = 10000.0f;
  RopeScaling scaling;
};

/// Attention span of a layer. Global: a query sees every earlier cache entry. Sliding: a query at
/// RoPE position p sees only entries at positions q with p - window < q <= p (transformers'
/// sliding_window_overlay, llama.cpp LLAMA_SWA_TYPE_STANDARD).
enum class AttentionKind { Global, Sliding };

/// Where a layer's RMSNorms sit. Pre (Llama): x += attn(norm(x)); x += mlp(norm(x)).
/// PrePost (Gemma 2/3): x += post_attn_norm(attn(norm(x))); x += post_ffn_norm(mlp(ffn_norm(x))).
enum class NormPlacement { Pre, PrePost };

/// Gated MLP: down(act(gate(x)) * up(x)) with act = SiLU (SwiGLU) or tanh-approximated GELU
/// (GeGLU, transformers `gelu_pytorch_tanh`, ggml_gelu).
enum class MlpKind { SwiGLU, GeGLUTanh };

/// What one layer computes (beyond the model-wide sizes).
struct LayerSpec {
  AttentionKind attention = AttentionKind::Global;
  int window = 0;                 ///< Sliding: window length in tokens (> 0); Global: 0
  std::optional<RopeSpec> rope;   ///< absent: the model-wide rope_theta / rope_scaling
  NormPlacement norm = NormPlacement::Pre;
  MlpKind mlp = MlpKind::SwiGLU;
  float attention_scale = 0.0f;   ///< attention logit scale; 0 = 1/sqrt(head_dim)

  bool sliding() const { return attention == AttentionKind::Sliding; }
};

/// Decoder-only transformer configuration (Llama family: RMSNorm, RoPE, GQA, gated MLP).
struct ModelConfig {
  std::string architecture = "llama";
  int dim = 0;          ///< residual width (hidden_size)
  int hidden_dim = 0;   ///< gated-MLP inner width (intermediate_size)
  int n_layers = 0;
  int n_heads = 0;      ///< query heads
  int n_kv_heads = 0;   ///< KV heads (GQA groups); n_heads % n_kv_heads == 0
  int head_dim = 0;     ///< per-head width; usually dim / n_heads
  int vocab_size = 0;
  int max_seq_len = 0;  ///< training context length (informational; not enforced)
  float rope_theta = 10000.0f;  ///< RoPE base of layers whose LayerSpec has no rope
  float norm_eps = 1e-5f;  ///< RMSNorm epsilon
  RopeStyle rope_style = RopeStyle::Interleaved;
  bool tied_classifier = true;  ///< classifier shares the token embedding matrix
  RopeScaling rope_scaling;     ///< RoPE scaling of layers whose LayerSpec has no rope
  bool attention_qkv_bias = false;  ///< q/k/v projections have biases (Qwen2, Llama attention_bias)
  bool attention_out_bias = false;  ///< o projection has a bias (Llama/Qwen3 attention_bias)
  bool qk_norm = false;  ///< per-head RMSNorm of q and k (weights [head_dim]) before RoPE (Qwen3, Gemma3)
  float embedding_scale = 1.0f;     ///< token embeddings are multiplied by this (Gemma: sqrt(dim))
  float final_logit_softcap = 0.0f; ///< > 0: logits = cap * tanh(logits / cap) (Gemma); 0 = off
  /// Hugging Face checkpoints store RMSNorm weights as multiplier - norm_weight_shift (Gemma: 1,
  /// y = normed * (1 + w)); the HF loader adds it, so ModelWeights hold the multipliers.
  float norm_weight_shift = 0.0f;
  int bos_token_id = -1;            ///< from the checkpoint config; -1 when unknown
  std::vector<int> eos_token_ids;   ///< from the checkpoint config; empty when unknown
  /// Per-layer descriptions [n_layers]; empty means every layer is LayerSpec{} (global attention,
  /// model-wide RoPE, pre-norm SwiGLU).
  std::vector<LayerSpec> layers;

  int group_size() const { return n_heads / n_kv_heads; }  ///< query heads per KV head
  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  /// Layer l's spec (LayerSpec{} when `layers` is empty).
  const LayerSpec& layer(int l) const;
  /// Layer l's RoPE: its own, else {rope_theta, rope_scaling}.
  RopeSpec layer_rope(int l) const;
  /// True when layer l uses sliding-window attention.
  bool sliding(int l) const { return layer(l).sliding(); }
  /// True when any layer uses sliding-window attention.
  bool has_sliding_layers() const;
  /// The sliding-window layers, ascending (never compacted; budgets and influence curves cover the
  /// other layers only). Empty for models without them.
  std::vector<int> sliding_layers() const;
};

/// Total parameter count (embedding, layers, final norm, separate classifier if any).
long long parameter_count(const ModelConfig& config);

}  // namespace kvcompact
