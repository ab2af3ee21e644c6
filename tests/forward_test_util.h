// Helpers shared by the forward-pass tests (backend_test, forward_batch_test): random token ids,
// a relative logit difference, and a small Gemma-3-style random model.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "random_model.h"

namespace kvcompact::testing {

inline std::vector<int> tokens_for(int n, int vocab, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (int& x : t) x = static_cast<int>(rng() % static_cast<unsigned>(vocab));
  return t;
}

/// Max |a - b| over max |b|.
inline double rel_max_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0, m = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    d = std::max(d, static_cast<double>(std::fabs(a[i] - b[i])));
    m = std::max(m, static_cast<double>(std::fabs(b[i])));
  }
  return d / m;
}

/// 3 layers: 2 sliding (window 6) and 1 global, their own RoPE bases, pre+post norms, QK-norm,
/// GeGLU, embedding scale, soft-cap, query_pre_attn_scalar 20 (not head_dim 16).
inline RandomModel gemma_style_model() {
  ModelConfig c = small_config(48, 80, 3, 4, 2, 67, RopeStyle::HalfSplit, true, 16);
  c.architecture = "gemma3";
  c.qk_norm = true;
  c.embedding_scale = std::sqrt(48.0f);
  c.final_logit_softcap = 30.0f;
  LayerSpec local;
  local.attention = AttentionKind::Sliding;
  local.window = 6;
  local.rope = RopeSpec{10000.0f, {}};
  local.norm = NormPlacement::PrePost;
  local.mlp = MlpKind::GeGLUTanh;
  local.attention_scale = 1.0f / std::sqrt(20.0f);  // query_pre_attn_scalar 20, not head_dim 16
  LayerSpec global = local;
  global.attention = AttentionKind::Global;
  global.window = 0;
  global.rope = RopeSpec{1000000.0f, {}};
  c.layers = {local, local, global};
  RandomModel m = make_random_model(c, 5);
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> u(0.9f, 1.1f);
  for (LayerWeights& w : m.weights.layers) {
    for (auto* v : {&w.q_norm, &w.k_norm}) {
      v->resize(static_cast<std::size_t>(c.head_dim));
      for (float& x : *v) x = u(rng);
    }
    for (auto* v : {&w.attn_post_norm, &w.ffn_post_norm}) {
      v->resize(static_cast<std::size_t>(c.dim));
      for (float& x : *v) x = u(rng);
    }
  }
  return m;
}

}  // namespace kvcompact::testing
