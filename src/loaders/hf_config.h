// Hugging Face transformers `config.json` of decoder-only Llama-family checkpoints:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
#pragma once

#include <string>

#include "core/config.h"

namespace kvcompact {

/// Maps config.json text onto ModelConfig. `name` is the file name used in errors.
/// Common fields (defaults as in transformers when absent): architectures[0] (else model_type),
/// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size (required);
/// num_key_value_heads (= heads), head_dim (= hidden / heads), rms_norm_eps (1e-6),
/// max_position_embeddings (2048), bos_token_id, eos_token_id (int or list); RopeStyle::HalfSplit
/// (transformers' rotate_half). The family mappings in loaders/families/ read the rest: RoPE
/// (rope_theta, rope_scaling / rope_parameters: default, linear, llama3, yarn; dynamic and
/// longrope are refused as not implemented), biases, QK norm, tying, and the attention windows
/// (Mistral sliding_window, Qwen2/3 use_sliding_window + layer_types / max_window_layers, Gemma 3
/// sliding_window + layer_types / sliding_window_pattern) as per-layer LayerSpecs.
/// Architectures: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM,
/// Gemma3ForCausalLM (model_type gemma3_text). architecture = "llama", "mistral", "qwen2",
/// "qwen3" or "gemma3".
/// Throws Error("<name>: ...") naming the field for invalid JSON, a missing or non-positive size,
/// heads not dividing, an unknown architecture or rope scaling type (named), an activation the
/// family does not use, mlp_bias, partial rotary embeddings, or a missing window / layer pattern.
ModelConfig parse_hf_config(const std::string& json_text, const std::string& name);

/// Reads and parses a config.json file (parse_hf_config); throws Error naming the file.
ModelConfig read_hf_config(const std::string& path);

}  // namespace kvcompact
