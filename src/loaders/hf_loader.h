// Hugging Face checkpoint folders (config.json + safetensors, single or sharded) -> Model.
#pragma once

#include <string>

#include "model/model.h"

namespace kvcompact {

/// Options of load_hf_model.
struct HfLoadOptions {
  bool load_tokenizer = true;  ///< false: Model::tokenizer stays null (weights-only use, tests)
};

/// True when `path` is a folder that holds a config.json.
bool is_hf_checkpoint_dir(const std::string& path);

/// Loads a Hugging Face checkpoint folder: config.json (loaders/hf_config.h), the safetensors tensors
/// (io/safetensors.h; model.safetensors.index.json or model.safetensors), and, unless disabled,
/// tokenizer.json (load_hf_tokenizer, io/hf_tokenizer.h).
/// Tensors (W[out, in] as stored by transformers): model.embed_tokens.weight [vocab, hidden],
/// model.layers.N.{input_layernorm,post_attention_layernorm}.weight [hidden],
/// model.layers.N.self_attn.{q,k,v,o}_proj.weight (+ .bias with attention biases),
/// model.layers.N.self_attn.{q,k}_norm.weight [head_dim] (Qwen3, Gemma 3), and for Gemma 3
/// (NormPlacement::PrePost) model.layers.N.{input,post_attention,pre_feedforward,
/// post_feedforward}_layernorm.weight, every norm stored as w and applied as 1 + w,
/// model.layers.N.mlp.{gate,up,down}_proj.weight, model.norm.weight, lm_head.weight (unless
/// tie_word_embeddings). F16 and BF16 matrices stay in their dtype, viewing the memory-mapped
/// files (Model::storage keeps them mapped); F32 matrices are views too when 4-byte aligned,
/// else copied. Norms and biases are copied to float32 and checked finite.
/// Q/K rows are used as stored: transformers' Llama conversion permutes them for rotate_half,
/// so the model runs with RopeStyle::HalfSplit.
/// Throws Error naming the file and tensor for a missing tensor, a wrong shape, an unsupported
/// dtype (anything but F32/F16/BF16), or a non-finite norm/bias; and as read_hf_config,
/// SafetensorsCheckpoint and load_hf_tokenizer.
Model load_hf_model(const std::string& folder, const HfLoadOptions& options = {});

}  // namespace kvcompact
