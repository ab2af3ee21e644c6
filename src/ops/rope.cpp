#include "ops/rope.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"

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

namespace {

// Yarn (transformers _compute_yarn_parameters; ggml_rope_yarn_corr_dims + rope_yarn_ramp).
void yarn_inv_freq(int head_dim, float theta, const RopeScaling& sc, float* inv_freq) {
  const int half = head_dim / 2;
  const double dim = head_dim, base = theta, factor = sc.factor;
  const double orig = sc.original_max_position_embeddings;
  auto correction_dim = [&](double rotations) {
    return (dim * std::log(orig / (rotations * 2.0 * std::numbers::pi))) / (2.0 * std::log(base));
  };
  double low = correction_dim(sc.beta_fast), high = correction_dim(sc.beta_slow);
  if (sc.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0);
  high = std::min(high, dim - 1);
  if (low == high) high += 0.001;  // as transformers' linear_ramp_factor
  for (int j = 0; j < half; ++j) {
    const double pos_freq = std::pow(base, 2.0 * j / dim);
    const double extrapolation = 1.0 / pos_freq, interpolation = 1.0 / (factor * pos_freq);
    const double ramp = std::clamp((j - low) / (high - low), 0.0, 1.0);
    const double extrapolation_factor = 1.0 - ramp;
    inv_freq[j] = static_cast<float>(interpolation * (1.0 - extrapolation_factor) +
                                     extrapolation * extrapolation_factor);
  }
}

}  // namespace

float rope_attention_factor(const RopeScaling& sc) {
  if (sc.type != RopeScalingType::Yarn) return 1.0f;
  if (sc.attention_factor > 0.0f) return sc.attention_factor;
  if (sc.factor <= 1.0f) return 1.0f;
  return static_cast<float>(0.1 * std::log(static_cast<double>(sc.factor)) + 1.0);
}

void rope_inv_freq(int head_dim, float theta, const RopeScaling& sc, float* inv_freq) {
  const int half = head_dim / 2;
  if (!sc.freq_factors.empty() && sc.freq_factors.size() != static_cast<std::size_t>(half))
    throw Error(fmt::format("rope scaling: {} frequency factors, head_dim {} needs {}", sc.freq_factors.size(),
                            head_dim, half));
  for (float f : sc.freq_factors)
    if (!(f > 0.0f) || !std::isfinite(f))
      throw Error(fmt::format("rope scaling: frequency factor {} is not positive", f));
  for (int j = 0; j < half; ++j)
    inv_freq[j] = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(head_dim));
  auto apply_factors = [&] {
    for (std::size_t j = 0; j < sc.freq_factors.size(); ++j) inv_freq[j] /= sc.freq_factors[j];
  };
  if (sc.type == RopeScalingType::None) return apply_factors();
  if (!(sc.factor > 0.0f) || !std::isfinite(sc.factor))
    throw Error(fmt::format("rope scaling: factor {} is not positive", sc.factor));
  if (sc.type == RopeScalingType::Linear) {
    for (int j = 0; j < half; ++j) inv_freq[j] = static_cast<float>(inv_freq[j] / static_cast<double>(sc.factor));
    return apply_factors();
  }
  if (sc.type == RopeScalingType::Yarn) {
    if (sc.original_max_position_embeddings <= 0 || !(sc.beta_fast > 0.0f) || !(sc.beta_slow > 0.0f))
      throw Error(fmt::format("rope scaling yarn: need original_max_position_embeddings ({}) > 0 and positive "
                              "beta_fast ({}) / beta_slow ({})",
                              sc.original_max_position_embeddings, sc.beta_fast, sc.beta_slow));
    yarn_inv_freq(head_dim, theta, sc, inv_freq);
    return apply_factors();
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
  apply_factors();
}

void rope_angles(int first_position, int n, int head_dim, float theta, const RopeScaling& scaling,
                 float* cos_out, float* sin_out) {
  if (scaling.type == RopeScalingType::None && scaling.freq_factors.empty())
    return rope_angles(first_position, n, head_dim, theta, cos_out, sin_out);
  const int half = head_dim / 2;
  std::vector<float> inv(static_cast<std::size_t>(half));
  rope_inv_freq(head_dim, theta, scaling, inv.data());
  const float af = rope_attention_factor(scaling);
  for (int j = 0; j < half; ++j)
    for (int i = 0; i < n; ++i) {
      const float val = static_cast<float>(first_position + i) * inv[j];
      cos_out[static_cast<long>(i) * half + j] = std::cos(val) * af;
      sin_out[static_cast<long>(i) * half + j] = std::sin(val) * af;
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
