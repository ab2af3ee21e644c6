// A loaded model: configuration, weights and tokenizer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "core/config.h"
#include "core/weights.h"

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

}  // namespace kvcompact
