// A loaded model: configuration, weights and tokenizer.
#pragma once

#include <memory>
#include <string>

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
};

/// Loads a model by file name:
///  - `*.gguf`: GGUF v3 (llama architecture), vocabulary embedded in the file;
///  - otherwise a llama2.c legacy checkpoint (`*.bin`), whose tokenizer is `tokenizer_path`, or
///    else tok512.bin / tokenizer.bin found beside the model.
/// Throws Error naming the file and the problem (missing, truncated, wrong format, sizes that
/// do not match the header).
Model load_model(const std::string& path, const std::string& tokenizer_path = "");

/// Total parameter count (embedding, layers, final norm, separate classifier if any).
long long parameter_count(const ModelConfig& config);

}  // namespace kvcompact
