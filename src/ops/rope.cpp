#include "ops/rope.h"

#include <cmath>
#include <numbers>
#include <vector>

#include <fmt/format.h>

#include "io/error.h"

namespace kvcompact {

void rope_angles(int first_position, int n, int head_dim, float theta, float* cos_out,
                 float* sin_out) {
  const int half = head_dim / 2;
  for (int j = 0; j < half; ++j) {
    const float freq = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(head_dim));
    for (int i = 0; i < n; ++i) {
      const float val = static_cast<float>(first_position + i) * freq;
      cos_out[static_cast<long>(i) * half + j] = std::cos(val);
      sin_out[static_cast<long>(i) * half + j] = std::sin(val);
    }
  }
}

void rope_inv_freq(int head_dim, float theta, const RopeScaling& sc, float* inv_freq) {
  const int half = head_dim / 2;
  for (int j = 0; j < half; ++j)
    inv_freq[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(head_dim));
  if (sc.type == RopeScalingType::None) return;
  if (!(sc.factor > 0.0f) || !std::isfinite(sc.factor))
    throw Error(fmt::format("rope scaling: factor {} is not positive", sc.factor));
  if (sc.type == RopeScalingType::Linear) {
    for (int j = 0; j < half; ++j) inv_freq[j] = static_cast<float>(inv_freq[j] / static_cast<double>(sc.factor));
    return;
  }
  // Llama 3.1 (transformers modeling_rope_utils._compute_llama3_parameters).
  if (!(sc.high_freq_factor > sc.low_freq_factor) || !(sc.low_freq_factor > 0.0f) ||
      sc.original_max_position_embeddings <= 0)
    throw Error(fmt::format(
        "rope scaling llama3: need 0 < low_freq_factor ({}) < high_freq_factor ({}) and "
        "original_max_position_embeddings ({}) > 0",
        sc.low_freq_factor, sc.high_freq_factor, sc.original_max_position_embeddings));
  const double factor = sc.factor, lo = sc.low_freq_factor, hi = sc.high_freq_factor,
               old_ctx = sc.original_max_position_embeddings;
  const double low_wavelen = old_ctx / lo, high_wavelen = old_ctx / hi;
  for (int j = 0; j < half; ++j) {
    const double f = inv_freq[j];
    const double wavelen = 2.0 * std::numbers::pi / f;
    double g;
    if (wavelen < high_wavelen) {
      g = f;
    } else if (wavelen > low_wavelen) {
      g = f / factor;
    } else {
      const double s = (old_ctx / wavelen - lo) / (hi - lo);
      g = (1.0 - s) * f / factor + s * f;
    }
    inv_freq[j] = static_cast<float>(g);
  }
}

void rope_angles(int first_position, int n, int head_dim, float theta, const RopeScaling& scaling,
                 float* cos_out, float* sin_out) {
  if (scaling.type == RopeScalingType::None)
    return rope_angles(first_position, n, head_dim, theta, cos_out, sin_out);
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  rope_inv_freq(head_dim, theta, scaling, inv.data());
  for (int j = 0; j < half; ++j)
    for (int i = 0; i < n; ++i) {
      const float val = static_cast<float>(first_position + i) * inv[j];
      cos_out[static_cast<long>(i) * half + j] = std::cos(val);
      sin_out[static_cast<long>(i) * half + j] = std::sin(val);
    }
}

void apply_rope(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
                RopeStyle style) {
  const int half = head_dim / 2;
  const long row = static_cast<long>(n_heads) * head_dim;
#pragma omp parallel for schedule(static) if (static_cast<long>(n) * row >= (1L << 16))
  for (int i = 0; i < n; ++i) {
    const float* c = cos + static_cast<long>(i) * half;
    const float* s = sin + static_cast<long>(i) * half;
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + i * row + static_cast<long>(h) * head_dim;
      if (style == RopeStyle::Interleaved) {
        for (int j = 0; j < half; ++j) {
          const float a = v[2 * j], b = v[2 * j + 1];
          v[2 * j] = a * c[j] - b * s[j];
          v[2 * j + 1] = a * s[j] + b * c[j];
        }
      } else {
#pragma omp simd
        for (int j = 0; j < half; ++j) {
          const float a = v[j], b = v[j + half];
          v[j] = a * c[j] - b * s[j];
          v[j + half] = a * s[j] + b * c[j];
        }
      }
    }
  }
}

}  // namespace kvcompact
