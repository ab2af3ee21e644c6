#include "core/config.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

const LayerSpec& ModelConfig::layer(int l) const {
  static const LayerSpec kDefault{};
  if (layers.empty()) return kDefault;
  if (l < 0 || static_cast<std::size_t>(l) >= layers.size())
    throw Error(fmt::format("model config: no layer {} (config describes {} layers)", l, layers.size()));
  return layers[static_cast<std::size_t>(l)];
}

RopeSpec ModelConfig::layer_rope(int l) const {
  const LayerSpec& s = layer(l);
  return s.rope ? *s.rope : RopeSpec{rope_theta, rope_scaling};
}

bool ModelConfig::has_sliding_layers() const {
  for (const LayerSpec& s : layers)
    if (s.sliding()) return true;
  return false;
}

std::vector<int> ModelConfig::sliding_layers() const {
  std::vector<int> out;
  for (int l = 0; l < n_layers; ++l)
    if (sliding(l)) out.push_back(l);
  return out;
}

long long parameter_count(const ModelConfig& c) {
  const long long D = c.dim, H = c.hidden_dim, V = c.vocab_size;
  const long long per_layer = 2 * D + static_cast<long long>(c.q_dim()) * D +
                              2LL * c.kv_dim() * D + D * c.q_dim() + 3 * H * D;
  long long extra = 0;  // biases and QK norms
  if (c.attention_qkv_bias) extra += c.q_dim() + 2LL * c.kv_dim();
  if (c.attention_out_bias) extra += D;
  if (c.qk_norm) extra += 2LL * c.head_dim;
  long long post = 0;  // post-attention / post-MLP norms (Gemma)
  for (int l = 0; l < c.n_layers; ++l)
    if (c.layer(l).norm == NormPlacement::PrePost) post += 2 * D;
  long long n = V * D + c.n_layers * (per_layer + extra) + post + D;
  if (!c.tied_classifier) n += V * D;
  return n;
}

}  // namespace kvcompact
