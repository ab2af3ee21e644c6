// Vectorised float32 exp (see vexp.h).
#include "ops/vexp.h"

#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX512F__)
#include <immintrin.h>
// GCC 12 reports its own _mm512_undefined_* placeholders (self-initialised) as uninitialised.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#endif

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

#if defined(__AVX512F__)
// exp_one on 16 lanes with the same steps (round-to-nearest k, two-part ln2, the same polynomial in
// FMAs) and the same edge cases: below kLo 0, above kHi +inf, NaN stays NaN. The plain loops
// vectorise only to 8 lanes with mask moves through general registers (gcc -march=native prefers
// 256-bit vectors), about 3x slower.
inline __m512 exp16(__m512 x) {
  const __m512 hi = _mm512_set1_ps(kHi), lo = _mm512_set1_ps(kLo);
  const __m512 xc = _mm512_max_ps(_mm512_min_ps(x, hi), lo);  // NaN -> kHi (min returns hi)
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(0.693359375f), xc);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(-2.12194440e-4f), r);
  const __m512 z = _mm512_mul_ps(r, r);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, r, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_add_ps(_mm512_fmadd_ps(y, z, r), _mm512_set1_ps(1.0f));
  const __m512i bits = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  __m512 e = _mm512_mul_ps(y, _mm512_castsi512_ps(bits));
  e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ), e, _mm512_setzero_ps());
  e = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ), e,
                           _mm512_set1_ps(std::numeric_limits<float>::infinity()));
  return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), e, x);
}

inline __mmask16 tail_mask(std::size_t left) {
  return static_cast<__mmask16>((1u << left) - 1u);
}
#endif

}  // namespace

void exp_inplace(float* __restrict x, std::size_t n) {
#if defined(__AVX512F__)
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_loadu_ps(x + i)));
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    _mm512_mask_storeu_ps(x + i, m, exp16(_mm512_maskz_loadu_ps(m, x + i)));
  }
#else
  for (std::size_t i = 0; i < n; ++i) x[i] = exp_one(x[i]);
#endif
}

float exp_shifted_sum(float* __restrict x, std::size_t n, float shift) {
#if defined(__AVX512F__)
  const __m512 sh = _mm512_set1_ps(shift);
  __m512 acc = _mm512_setzero_ps();
  std::size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), sh));
    _mm512_storeu_ps(x + i, e);
    acc = _mm512_add_ps(acc, e);
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 e = exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), sh));
    _mm512_mask_storeu_ps(x + i, m, e);
    acc = _mm512_mask_add_ps(acc, m, acc, e);
  }
  return _mm512_reduce_add_ps(acc);
#else
  float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = exp_one(x[i] - shift);
    sum += x[i];
  }
  return sum;
#endif
}

float max_value(const float* __restrict x, std::size_t n) {
#if defined(__AVX512F__)
  if (n >= 16) {
    __m512 acc = _mm512_loadu_ps(x);
    std::size_t i = 16;
    for (; i + 16 <= n; i += 16) acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + i));
    if (i < n) acc = _mm512_max_ps(acc, _mm512_loadu_ps(x + n - 16));  // overlaps: max is idempotent
    return _mm512_reduce_max_ps(acc);
  }
#endif
  float m = x[0];
#pragma omp simd reduction(max : m)
  for (std::size_t i = 1; i < n; ++i) m = x[i] > m ? x[i] : m;
  return m;
}

}  // namespace kvcompact
