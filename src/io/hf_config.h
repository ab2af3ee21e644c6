// Hugging Face transformers `config.json` of decoder-only Llama-family checkpoints:
// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM.
#pragma once

#include <string>

#include "model/config.h"

namespace kvcompact {

/// Maps config.json text onto ModelConfig. `name` is the file name used in errors.
/// Read (defaults as in transformers when absent): architectures[0] (else model_type),
/// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, vocab_size (required);
/// num_key_value_heads (= heads), head_dim (= hidden / heads), rms_norm_eps (1e-6), rope_theta
/// (10000; also from rope_parameters), rope_scaling (null, {"rope_type"|"type": "default" |
/// "linear" | "llama3", factor, low_freq_factor, high_freq_factor,
/// original_max_position_embeddings}), tie_word_embeddings (false), attention_bias (false;
/// q/k/v/o biases for Llama, Mistral, Qwen3; Qwen2 always has q/k/v biases and no o bias),
/// max_position_embeddings (2048), bos_token_id, eos_token_id (int or list).
/// Sets architecture = model_type ("llama", "mistral", "qwen2", "qwen3"), RopeStyle::HalfSplit
/// (transformers' rotate_half), qk_norm for Qwen3.
/// Throws Error("<name>: ...") naming the field for invalid JSON, a missing or non-positive size,
/// heads not dividing, an unknown architecture or rope scaling type (named), hidden_act other
/// than silu, mlp_bias, Qwen2 use_sliding_window, or partial rotary embeddings.
/// (Mistral's sliding_window is not applied: exact for sequences up to the window.)
ModelConfig parse_hf_config(const std::string& json_text, const std::string& name);

/// Reads and parses a config.json file (parse_hf_config); throws Error naming the file.
ModelConfig read_hf_config(const std::string& path);

}  // namespace kvcompact
