#include "model/config.h"

#include <fmt/format.h>

#include "io/error.h"

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

}  // namespace kvcompact
