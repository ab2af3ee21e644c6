#include "ops/rope.h"

#include <cmath>

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
