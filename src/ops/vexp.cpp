// Vectorised float32 exp (see vexp.h).
#include "ops/vexp.h"

#include <cstdint>
#include <cstring>
#include <limits>

namespace kvcompact {
namespace {

constexpr float kLo = -87.3365447f;  // exp(kLo) ~ 2^-126, the smallest normal float
constexpr float kHi = 88.3762626f;   // exp(kHi) ~ 2^127.5, below FLT_MAX

// Cephes expf. Branch-free apart from selects, so the calling loops vectorise.
inline float exp_one(float x) {
  float xc = x < kHi ? x : kHi;  // NaN -> kHi here (the cast below must see a finite k)
  xc = xc > kLo ? xc : kLo;
  const float t = xc * 1.44269504088896341f;
  const float k = (t + 12582912.0f) - 12582912.0f;  // round to nearest integer (|t| < 2^22)
  float r = xc - k * 0.693359375f;                   // ln2 = 0.693359375 - 2.12194440e-4 (hi + lo)
  r = r - k * -2.12194440e-4f;
  const float z = r * r;
  float y = 1.9875691500e-4f;
  y = y * r + 1.3981999507e-3f;
  y = y * r + 8.3334519073e-3f;
  y = y * r + 4.1665795894e-2f;
  y = y * r + 1.6666665459e-1f;
  y = y * r + 5.0000001201e-1f;
  y = y * z + r + 1.0f;
  const std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;  // 2^k, k in [-126, 127]
  float p;
  std::memcpy(&p, &bits, sizeof p);
  const float e = y * p;
  return x < kLo ? 0.0f : (x <= kHi ? e : (x > kHi ? std::numeric_limits<float>::infinity() : x));
}

}  // namespace

void exp_inplace(float* __restrict x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) x[i] = exp_one(x[i]);
}

float exp_shifted_sum(float* __restrict x, std::size_t n, float shift) {
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = exp_one(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

float max_value(const float* __restrict x, std::size_t n) {
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (std::size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace kvcompact
