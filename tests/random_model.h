// Test helper: a small Llama-family model with random weights, deterministic by seed.
// Header-only so any test file can include it ("random_model.h").
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/config.h"
#include "core/weights.h"

namespace kvcompact::testing {

/// A config of the given sizes; head_dim = dim / n_heads unless head_dim > 0 is given.
inline ModelConfig small_config(int dim = 48, int hidden_dim = 80, int n_layers = 3,
                                int n_heads = 6, int n_kv_heads = 2, int vocab_size = 61,
                                RopeStyle rope_style = RopeStyle::Interleaved,
                                bool tied_classifier = true, int head_dim = 0) {
  ModelConfig c;
  c.dim = dim;
  c.hidden_dim = hidden_dim;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.head_dim = head_dim > 0 ? head_dim : dim / n_heads;
  c.vocab_size = vocab_size;
  c.max_seq_len = 256;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = rope_style;
  c.tied_classifier = tied_classifier;
  return c;
}

/// Random weights for `config`, deterministic by seed (std::mt19937_64). Matrices W[out, in] are
/// uniform in +-sqrt(3/in) (unit-variance projections); norm weights are 1 + U(-0.1, 0.1);
/// embedding U(-1, 1). The classifier is separate (random) unless config.tied_classifier.
inline ModelWeights random_weights(const ModelConfig& config, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  auto fill = [&](std::size_t n, float a, float center = 0.0f) {
    std::uniform_real_distribution<float> u(-a, a);
    std::vector<float> v(n);
    for (auto& x : v) x = center + u(rng);
    return v;
  };
  const std::size_t dim = config.dim, hid = config.hidden_dim, qd = config.q_dim(),
                    kvd = config.kv_dim(), vocab = config.vocab_size;
  auto mat = [&](std::size_t out, std::size_t in) {
    return fill(out * in, std::sqrt(3.0f / static_cast<float>(in)));
  };
  ModelWeights w;
  w.token_embedding = fill(vocab * dim, 1.0f);
  for (int l = 0; l < config.n_layers; ++l) {
    LayerWeights L;
    L.attn_norm = fill(dim, 0.1f, 1.0f);
    L.wq = mat(qd, dim);
    L.wk = mat(kvd, dim);
    L.wv = mat(kvd, dim);
    L.wo = mat(dim, qd);
    L.ffn_norm = fill(dim, 0.1f, 1.0f);
    L.w_gate = mat(hid, dim);
    L.w_down = mat(dim, hid);
    L.w_up = mat(hid, dim);
    w.layers.push_back(std::move(L));
  }
  w.final_norm = fill(dim, 0.1f, 1.0f);
  if (!config.tied_classifier) w.classifier = mat(vocab, dim);
  return w;
}

/// Config and weights together (keep this object alive while a Transformer references it).
struct RandomModel {
  ModelConfig config;
  ModelWeights weights;
};

/// small_config(...) plus random_weights(config, seed).
inline RandomModel make_random_model(const ModelConfig& config, uint64_t seed = 1) {
  return RandomModel{config, random_weights(config, seed)};
}

}  // namespace kvcompact::testing
