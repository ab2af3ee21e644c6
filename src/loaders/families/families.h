// Per-family configuration mappings: how each model family's Hugging Face config.json fields and
// GGUF metadata become ModelConfig (including the per-layer LayerSpecs the forward reads).
// One file per family: llama.cpp (Llama, Mistral), qwen.cpp (Qwen2, Qwen3), gemma3.cpp (Gemma 3
// text). Shared RoPE readers: rope_config.cpp.
#pragma once

#include <string>

#include "io/gguf.h"
#include "loaders/hf_config_reader.h"
#include "core/config.h"

namespace kvcompact {

// ---- Hugging Face config.json. Called by parse_hf_config after the common sizes (hidden_size,
// intermediate_size, layers, heads, head_dim, vocab, max_position_embeddings, rms_norm_eps,
// bos/eos) are in `c`; each sets RoPE, biases, norms, MLP, tying and the attention windows, and
// throws Error("<file>: ...") naming the field for anything it does not implement.

/// Model-wide RoPE of Llama-like configs: rope_theta (10000) at top level or in rope_parameters,
/// scaling from rope_scaling (or rope_parameters) via hf_rope_scaling.
void hf_uniform_rope(const HfConfigReader& r, ModelConfig& c);
/// Refuses hidden_act / hidden_activation other than `expected` (naming the field).
void hf_check_activation(const HfConfigReader& r, const std::string& expected);
/// Marks layer l sliding with `window` (creating c.layers when empty).
void set_sliding(ModelConfig& c, int layer, int window);
/// Reads the positive int `sliding_window`; throws Error naming the file and field when it is
/// missing or not a positive int32.
int hf_sliding_window(const HfConfigReader& r);

/// Llama, Mistral: hidden_act silu; rope_theta + rope_scaling / rope_parameters (one object);
/// attention_bias (q/k/v/o); Mistral sliding_window (every layer, when not null).
void hf_llama_family(const HfConfigReader& r, ModelConfig& c);
/// Qwen2 (q/k/v biases), Qwen3 (qk_norm, attention_bias): RoPE as Llama; use_sliding_window with
/// sliding_window and layer_types, else max_window_layers (layers >= it slide, transformers 5.2).
void hf_qwen_family(const HfConfigReader& r, ModelConfig& c);
/// Gemma 3 text (Gemma3ForCausalLM, model_type gemma3_text): see gemma3.cpp.
void hf_gemma3_family(const HfConfigReader& r, ModelConfig& c);

// ---- GGUF metadata (keys prefixed by the architecture). Called by the GGUF loader after the
// common sizes are in `c`.

/// Model-wide RoPE scaling from `<arch>.rope.scaling.type` (none | linear | yarn; absent = linear
/// as llama.cpp) and `.factor` (or the old `<arch>.rope.scale_linear`; absent or 0 = no scaling),
/// yarn's `.original_context_length` (default context_length), `.yarn_beta_fast` (32),
/// `.yarn_beta_slow` (1), `.attn_factor` (multiplies the yarn factor). Throws Error naming the
/// file and key for longrope or another type, yarn_log_multiplier, or a negative factor.
RopeScaling gguf_rope_scaling(const GgufFile& f, const std::string& arch, int context_length);
/// llama: rope.freq_base, rope scaling (gguf_rope_scaling); Interleaved RoPE.
void gguf_llama_family(const GgufFile& f, ModelConfig& c);
/// qwen2 / qwen3: rope.freq_base, rope scaling; HalfSplit RoPE; qwen2 q/k/v biases, qwen3 qk_norm.
void gguf_qwen_family(const GgufFile& f, ModelConfig& c);
/// gemma3: see gemma3.cpp.
void gguf_gemma3_family(const GgufFile& f, ModelConfig& c);

}  // namespace kvcompact
