// Loading a model from its file(s): the one entry point that dispatches on the file name to the
// llama2.c, GGUF and Hugging Face readers of this floor.
#pragma once

#include <string>

#include "model/model.h"

namespace kvcompact {

/// Loads a model by file name:
///  - a folder holding config.json: a Hugging Face checkpoint (loaders/hf_loader.h; tokenizer from
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

}  // namespace kvcompact
