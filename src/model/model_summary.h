// One description of a loaded model: what `kvcompact info --json` prints and what the Python
// package's Model.config returns.
#pragma once

#include <nlohmann/json.hpp>

#include "model/model.h"

namespace kvcompact {

/// The model's path, architecture and sizes (dim, hidden_dim, layers, query / KV heads, head_dim,
/// vocabulary, max_seq_len, rope_theta, norm_eps, tied classifier), its parameter count and its
/// tokenizer's vocabulary size and bos / eos ids, as one JSON object.
nlohmann::json model_summary(const Model& model);

}  // namespace kvcompact
