// --model / --tokenizer options shared by the commands that load a model.
#pragma once

#include <string>

#include "cli_common.h"

namespace kvcompact::cli {

struct ModelOptions {
  std::string model;      ///< llama2.c .bin or .gguf
  std::string tokenizer;  ///< llama2.c tokenizer.bin (default: beside a .bin model)
};

inline void add_model_options(CLI::App* cmd, ModelOptions& m) {
  cmd->add_option("--model", m.model, "model file: llama2.c .bin or .gguf")->required();
  cmd->add_option("--tokenizer", m.tokenizer, "llama2.c tokenizer.bin (default: tok512.bin or tokenizer.bin beside a .bin model)");
}

}  // namespace kvcompact::cli
