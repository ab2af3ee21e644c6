// A loaded model: configuration, weights and tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/config.h"
#include "model/weights.h"

namespace kvcompact {

/// Everything needed to run a model on text.
struct Model {
  std::string path;  ///< file the weights came from
  ModelConfig config;
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;
  /// Files the weight views point into (memory-mapped safetensors shards, GGUF files); empty for
  /// models whose weights own their values. Must outlive every use of `weights`.
  std::vector<std::shared_ptr<const void>> storage;
};

/// Loads a model by file name:
///  - a folder holding config.json: a Hugging Face checkpoint (model/hf_loader.h; tokenizer from
///    its tokenizer.json, `tokenizer_path` must be empty);
///  - `*.gguf`: GGUF v3 (llama, qwen2, qwen3 architectures), vocabulary embedded in the file;
///  - otherwise a llama2.c legacy checkpoint (`*.bin`), whose tokenizer is `tokenizer_path` (a
///    llama2.c tokenizer.bin, or a Hugging Face tokenizer.json / folder holding one), or
///    else tok512.bin / tokenizer.bin found beside the model.
/// Throws Error naming the file and the problem (missing, truncated, wrong format, sizes that
/// do not match the header).
Model load_model(const std::string& path, const std::string& tokenizer_path = "");

/// Loads a GGUF file (architectures llama, qwen2, qwen3; see load_model). With load_tokenizer
/// false the vocabulary is not read (vocab_size from token_embd.weight) and Model::tokenizer is
/// null. F16/BF16/Q8_0/Q4_0 matrices stay in their storage type (Model::storage keeps the file
/// mapped). Throws Error naming the file and the key/tensor.
Model load_gguf_model(const std::string& path, bool load_tokenizer = true);

/// Total parameter count (embedding, layers, final norm, separate classifier if any).
long long parameter_count(const ModelConfig& config);

}  // namespace kvcompact
