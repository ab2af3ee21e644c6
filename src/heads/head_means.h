// Mean attention output of every query head over a reference text set (for mean ablation).
#pragma once

#include <string>
#include <vector>

#include "model/model.h"

namespace kvcompact {

/// Mean over all token positions of a reference text set of each query head's attention output
/// (before the output projection). values: [n_layers][n_heads * head_dim], head h of layer l in
/// values[l][h*head_dim .. (h+1)*head_dim).
struct HeadMeans {
  std::string model_fingerprint;  ///< fingerprint_hex of the model the means belong to
  int n_layers = 0;
  int n_heads = 0;
  int head_dim = 0;
  long long tokens = 0;  ///< token positions averaged over
  std::vector<std::vector<float>> values;
  /// Mean output of query head (layer, head): [head_dim].
  const float* head(int layer, int head) const {
    return values[layer].data() + static_cast<std::size_t>(head) * head_dim;
  }
};

/// Runs the model over each document (token ids, BOS first; each at most max_seq_len positions
/// is not enforced) and averages every query head's attention output over all positions.
/// Throws Error for no documents or an empty document.
HeadMeans compute_head_means(const Model& model, const std::vector<std::vector<int>>& documents);

/// Checks that `means` belong to the model with this config and fingerprint (shape and
/// fingerprint). Throws Error "<source>: head means of model X, not this model (Y)" or naming the
/// shapes.
void check_head_means_model(const HeadMeans& means, const ModelConfig& config,
                            const std::string& fingerprint, const std::string& source);

/// JSON file: {"model_fingerprint", "n_layers", "n_heads", "head_dim", "tokens",
/// "values": [[...n_heads*head_dim floats] x n_layers]}; written atomically.
void write_head_means(const std::string& path, const HeadMeans& means);
/// Reads and validates that file (shapes, finite values). Throws Error naming the file and field.
HeadMeans read_head_means(const std::string& path);

}  // namespace kvcompact
