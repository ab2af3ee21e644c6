#include "ops/reference.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

namespace kvcompact {

void matmul_wt_ref(const float* X, const float* W, float* Y, int n, int in, int out) {
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int i = 0; i < in; ++i)
        acc += static_cast<double>(X[static_cast<long>(r) * in + i]) * W[static_cast<long>(o) * in + i];
      Y[static_cast<long>(r) * out + o] = static_cast<float>(acc);
    }
}

void rmsnorm_ref(const float* x, const float* weight, float* out, int n, int dim, float eps) {
  for (int r = 0; r < n; ++r) {
    double ss = 0.0;
    for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[r * dim + i]) * x[r * dim + i];
    const double scale = 1.0 / std::sqrt(ss / dim + eps);
    for (int i = 0; i < dim; ++i)
      out[r * dim + i] = static_cast<float>(weight[i] * scale * x[r * dim + i]);
  }
}

namespace {

// Rotates pair j of every head of x [n, n_heads*head_dim] by the angle cos_sin(i, j) returns for
// row i: (a, b) -> (a cos - b sin, a sin + b cos), in double.
template <class CosSin>
void rotate_pairs(float* x, int n, int n_heads, int head_dim, RopeStyle style, CosSin cos_sin) {
  const int half = head_dim / 2;
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < n_heads; ++h) {
      float* v = x + (static_cast<long>(i) * n_heads + h) * head_dim;
      for (int j = 0; j < half; ++j) {
        const auto [c, s] = cos_sin(i, j);
        const int ia = style == RopeStyle::Interleaved ? 2 * j : j;
        const int ib = style == RopeStyle::Interleaved ? 2 * j + 1 : j + half;
        const double a = v[ia], b = v[ib];
        v[ia] = static_cast<float>(a * c - b * s);
        v[ib] = static_cast<float>(a * s + b * c);
      }
    }
}

}  // namespace

void rope_ref(float* x, int n, int n_heads, int head_dim, int first_position, float theta,
              RopeStyle style) {
  rotate_pairs(x, n, n_heads, head_dim, style, [&](int i, int j) {
    const double angle =
        static_cast<double>(first_position + i) / std::pow(static_cast<double>(theta), 2.0 * j / head_dim);
    return std::pair<double, double>(std::cos(angle), std::sin(angle));
  });
}

void apply_rope_ref(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
                    RopeStyle style) {
  const long half = head_dim / 2;
  rotate_pairs(x, n, n_heads, head_dim, style, [&](int i, int j) {
    return std::pair<double, double>(cos[i * half + j], sin[i * half + j]);
  });
}

void softmax_ref(float* x, int n) {
  double mx = x[0];
  for (int i = 1; i < n; ++i) mx = std::max<double>(mx, x[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += std::exp(x[i] - mx);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(std::exp(x[i] - mx) / sum);
}

void swiglu_ref(float* gate, const float* up, long n) {
  for (long i = 0; i < n; ++i) {
    const double v = gate[i];
    gate[i] = static_cast<float>(v / (1.0 + std::exp(-v)) * up[i]);
  }
}

void geglu_tanh_ref(float* gate, const float* up, long n) {
  const double k = std::sqrt(2.0 / 3.141592653589793238);
  for (long i = 0; i < n; ++i) {
    const double g = gate[i];
    gate[i] = static_cast<float>(0.5 * g * (1.0 + std::tanh(k * (g + 0.044715 * g * g * g))) * up[i]);
  }
}

void attend_row_ref(const float* q, const float* keys, const float* values, const float* beta,
                    int L, int head_dim, float scale, float* out) {
  std::vector<double> logit(L);
  double mx = -INFINITY;
  for (int j = 0; j < L; ++j) {
    double s = 0.0;
    for (int d = 0; d < head_dim; ++d) s += static_cast<double>(q[d]) * keys[static_cast<long>(j) * head_dim + d];
    logit[j] = s * scale + beta[j];
    mx = std::max(mx, logit[j]);
  }
  double sum = 0.0;
  for (int j = 0; j < L; ++j) sum += (logit[j] = std::exp(logit[j] - mx));
  std::vector<double> acc(head_dim, 0.0);
  for (int j = 0; j < L; ++j)
    for (int d = 0; d < head_dim; ++d)
      acc[d] += logit[j] / sum * values[static_cast<long>(j) * head_dim + d];
  for (int d = 0; d < head_dim; ++d) out[d] = static_cast<float>(acc[d]);
}

void causal_attention_ref(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                          const AttentionHeadView* heads, float* out) {
  const int group = n_heads / n_kv_heads;
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(head_dim)));
  for (int i = 0; i < n; ++i)
    for (int h = 0; h < n_heads; ++h) {
      const AttentionHeadView& hv = heads[h / group];
      const long off = (static_cast<long>(i) * n_heads + h) * head_dim;
      // window: entries at positions <= own position - window are hidden (linear scan)
      int lo = 0;
      if (hv.window > 0)
        while (hv.positions[lo] <= hv.positions[hv.length - n + i] - hv.window) ++lo;
      attend_row_ref(q + off, hv.keys + static_cast<long>(lo) * head_dim,
                     hv.values + static_cast<long>(lo) * head_dim, hv.beta + lo,
                     hv.length - n + i + 1 - lo, head_dim, scale, out + off);
    }
}

}  // namespace kvcompact
