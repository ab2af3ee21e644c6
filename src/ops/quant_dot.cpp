#include "ops/quant_dot.h"
#include "core/kquant_scales.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "core/half.h"
#include "ops/prefetch.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define KVC_QDOT_AVX2 1
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
#define KVC_QDOT_VNNI 1
#endif
#endif

namespace kvcompact {

namespace {

inline std::uint16_t ld16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline std::uint32_t ld32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline float fp16(const std::uint8_t* p) { return f16_to_f32(ld16(p)); }
inline float round_f16(float x) { return f16_to_f32(f32_to_f16(x)); }

void quantize_q8_32(const float* x, int cols, std::int8_t* q, float* d, float* s, std::int32_t* sum) {
  for (int b = 0; b < cols / 32; ++b) {
    const float* xb = x + 32 * b;
    float amax = 0.0f;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float db = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int total = 0;
    for (int j = 0; j < 32; ++j) {
      const int v = static_cast<int>(std::nearbyint(xb[j] * id));
      q[32 * b + j] = static_cast<std::int8_t>(v);
      total += v;
    }
    d[b] = round_f16(db);
    s[b] = round_f16(db * static_cast<float>(total));
    sum[b] = total;
  }
}

void quantize_q8_k(const float* x, int cols, std::int8_t* q, float* d, std::int32_t* bsums) {
  for (int b = 0; b < cols / 256; ++b) {
    const float* xb = x + 256 * b;
    std::int8_t* qb = q + 256 * b;
    float mx = 0.0f, amax = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(xb[j]);
      if (ax > amax) amax = ax, mx = xb[j];
    }
    if (amax == 0.0f) {
      d[b] = 0.0f;
      std::fill(qb, qb + 256, std::int8_t{0});
      std::fill(bsums + 16 * b, bsums + 16 * b + 16, 0);
      continue;
    }
    const float iscale = -127.0f / mx;
    for (int j = 0; j < 256; ++j) qb[j] = static_cast<std::int8_t>(std::min(127, static_cast<int>(std::nearbyint(iscale * xb[j]))));
    for (int j = 0; j < 16; ++j) {
      int t = 0;
      for (int k = 0; k < 16; ++k) t += qb[16 * j + k];
      bsums[16 * b + j] = t;
    }
    d[b] = 1.0f / iscale;
  }
}

// ---- Scalar kernels: ggml's generic ggml_vec_dot_*. ----

/// Unsigned 5-bit or 4-bit quant j of a 32-block (nibble plus optional high bit from qh).
inline int quant32(const std::uint8_t* qs, std::uint32_t qh, bool five, int j) {
  const int nib = j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4);
  return five ? nib | static_cast<int>(((qh >> j) & 1u) << 4) : nib;
}

// GCC 12.2 at -O2/-O3 with -march=native on this AVX-512 VNNI CPU vectorises the int8 x int8 -> int
// sums below wrongly (a Q8_0 block gave -6.61 where the exact sum is 1.22; -fno-tree-vectorize
// gives 1.22), so the scalar reference is kept out of the vectoriser.
__attribute__((optimize("no-tree-vectorize")))
float dot_scalar(WeightType t, const std::uint8_t* row, const QuantizedRows& xq, int i) {
  const int cols = xq.cols;
  const std::int8_t* y = xq.q.data() + static_cast<std::size_t>(i) * cols;
  if (t == WeightType::Q4_K) {
    const int nb = cols / 256;
    const float* yd = xq.d.data() + static_cast<std::size_t>(i) * nb;
    const std::int32_t* bs = xq.sum.data() + static_cast<std::size_t>(i) * (cols / 16);
    float sumf = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t* p = row + 144 * static_cast<std::size_t>(b);
      const std::uint8_t* qs = p + 16;
      int sumi = 0, summ = 0;
      for (int g = 0; g < 8; ++g) {
        int sc, mn;
        scale_min_k4(g, p + 4, sc, mn);
        int dot = 0;
        for (int l = 0; l < 32; ++l) {
          const std::uint8_t byte = qs[32 * (g / 2) + l];
          dot += ((g % 2) ? byte >> 4 : byte & 0xF) * y[256 * b + 32 * g + l];
        }
        sumi += sc * dot;
        summ += mn * (bs[16 * b + 2 * g] + bs[16 * b + 2 * g + 1]);
      }
      sumf += yd[b] * fp16(p) * static_cast<float>(sumi) - yd[b] * fp16(p + 2) * static_cast<float>(summ);
    }
    return sumf;
  }
  const int nb = cols / 32;
  const float* yd = xq.d.data() + static_cast<std::size_t>(i) * nb;
  const float* ys = xq.s.data() + static_cast<std::size_t>(i) * nb;
  float sumf = 0.0f;
  for (int b = 0; b < nb; ++b) {
    const std::int8_t* yb = y + 32 * b;
    int sumi = 0;
    float extra = 0.0f;
    switch (t) {
      case WeightType::Q8_0: {
        const std::uint8_t* p = row + 34 * static_cast<std::size_t>(b);
        for (int j = 0; j < 32; ++j) sumi += static_cast<std::int8_t>(p[2 + j]) * yb[j];
        sumf += static_cast<float>(sumi) * (fp16(p) * yd[b]);
        break;
      }
      case WeightType::Q4_0:
      case WeightType::Q5_0: {
        const bool five = t == WeightType::Q5_0;
        const std::uint8_t* p = row + (five ? 22 : 18) * static_cast<std::size_t>(b);
        const std::uint32_t qh = five ? ld32(p + 2) : 0;
        for (int j = 0; j < 32; ++j) sumi += (quant32(p + (five ? 6 : 2), qh, five, j) - (five ? 16 : 8)) * yb[j];
        sumf += static_cast<float>(sumi) * (fp16(p) * yd[b]);
        break;
      }
      default: {  // Q4_1, Q5_1
        const bool five = t == WeightType::Q5_1;
        const std::uint8_t* p = row + (five ? 24 : 20) * static_cast<std::size_t>(b);
        const std::uint32_t qh = five ? ld32(p + 4) : 0;
        for (int j = 0; j < 32; ++j) sumi += quant32(p + (five ? 8 : 4), qh, five, j) * yb[j];
        extra = fp16(p + 2) * ys[b];
        sumf += (fp16(p) * yd[b]) * static_cast<float>(sumi) + extra;
        break;
      }
    }
  }
  return sumf;
}

#if defined(KVC_QDOT_AVX2)

inline float hsum8(__m256 v) {
  __m128 r = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = _mm_add_ps(r, _mm_movehl_ps(r, r));
  r = _mm_add_ss(r, _mm_movehdup_ps(r));
  return _mm_cvtss_f32(r);
}

/// acc + sum over groups of 4 of u8 * s8 (int32 lanes): vpdpbusd, or maddubs + madd (no
/// saturation for |u| <= 128 and |s| <= 127, the only cases below).
template <bool kVnni>
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i s) {
#if defined(KVC_QDOT_VNNI)
  if constexpr (kVnni) return _mm256_dpbusd_epi32(acc, u, s);
#endif
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
}

inline __m256i nibbles32(const std::uint8_t* qs) {  // element j < 16: low nibble of byte j, else high of j-16
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m256i both = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
  return _mm256_and_si256(both, _mm256_set1_epi8(0x0F));
}

inline __m256i bits_to_bytes(std::uint32_t bits) {  // byte j = 0xFF where bit j is set (ggml bytes_from_bits_32)
  const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
  __m256i b = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  b = _mm256_or_si256(b, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfe));
  return _mm256_cmpeq_epi8(b, _mm256_set1_epi64x(-1));
}

/// 32-element block types: the weight block as 32 unsigned bytes u (Q8_0: x + 128 for VNNI, |x|
/// for AVX2 with the signs moved to y), its scale and min, and the integer offset to subtract
/// per unit of sum(y) (8 for Q4_0, 16 for Q5_0, 128 for Q8_0 with VNNI).
template <WeightType T, bool kVnni, int N>
void rows_q32(const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRows& xq, float* Y, int ldy) {
  constexpr bool kMin = T == WeightType::Q4_1 || T == WeightType::Q5_1;
  constexpr bool kFive = T == WeightType::Q5_0 || T == WeightType::Q5_1;
  constexpr int kBytes = T == WeightType::Q8_0 ? 34 : T == WeightType::Q4_0 ? 18 : T == WeightType::Q4_1 ? 20 : T == WeightType::Q5_0 ? 22 : 24;
  constexpr int kOffset = T == WeightType::Q4_0 ? 8 : T == WeightType::Q5_0 ? 16 : (T == WeightType::Q8_0 && kVnni) ? 128 : 0;
  const int cols = xq.cols, nb = cols / 32;
  const std::int8_t* yq[N];
  const float* yd[N];
  const float* ys[N];
  const std::int32_t* ysum[N];
  for (int i = 0; i < N; ++i) {
    yq[i] = xq.q.data() + static_cast<std::size_t>(i) * cols;
    yd[i] = xq.d.data() + static_cast<std::size_t>(i) * nb;
    ys[i] = xq.s.data() + static_cast<std::size_t>(i) * nb;
    ysum[i] = xq.sum.data() + static_cast<std::size_t>(i) * nb;
  }
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m256 acc[N][2];
    float macc[N];
    for (int i = 0; i < N; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps(), macc[i] = 0.0f;
    auto one = [&](int b, auto slot) {
      const std::uint8_t* p = row + static_cast<std::size_t>(b) * kBytes;
      const float dx = fp16(p);
      __m256i u;
      [[maybe_unused]] __m256i sgn;  // AVX2 Q8_0: the weights' signs
      if constexpr (T == WeightType::Q8_0) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2));
        if constexpr (kVnni) u = _mm256_xor_si256(x, _mm256_set1_epi8(static_cast<char>(0x80)));
        else u = _mm256_abs_epi8(x), sgn = x;
      } else if constexpr (kFive) {
        const std::uint32_t qh = ld32(p + 2 + (kMin ? 2 : 0));
        u = _mm256_or_si256(nibbles32(p + 6 + (kMin ? 2 : 0)), _mm256_and_si256(bits_to_bytes(qh), _mm256_set1_epi8(0x10)));
      } else {
        u = nibbles32(p + (kMin ? 4 : 2));
      }
      for (int i = 0; i < N; ++i) {
        __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(yq[i] + 32 * b));
        if constexpr (T == WeightType::Q8_0 && !kVnni) yv = _mm256_sign_epi8(yv, sgn);
        // Lane 0 starts at -offset * sum(y), so the lanes add up to ggml's integer block sum.
        const __m256i init = kOffset ? _mm256_zextsi128_si256(_mm_cvtsi32_si128(-kOffset * ysum[i][b])) : _mm256_setzero_si256();
        const __m256i iv = dot_u8s8<kVnni>(init, u, yv);
        acc[i][decltype(slot)::value] = _mm256_fmadd_ps(_mm256_set1_ps(dx * yd[i][b]), _mm256_cvtepi32_ps(iv), acc[i][decltype(slot)::value]);
        if constexpr (kMin) macc[i] += fp16(p + 2) * ys[i][b];
      }
    };
    int b = 0;
    for (; b + 1 < nb; b += 2) {
      prefetch_stream(row + static_cast<std::size_t>(b) * kBytes, 2 * kBytes);
      one(b, std::integral_constant<int, 0>{});
      one(b + 1, std::integral_constant<int, 1>{});
    }
    if (b < nb) one(b, std::integral_constant<int, 0>{});
    for (int i = 0; i < N; ++i) Y[static_cast<std::size_t>(i) * ldy + o] = hsum8(_mm256_add_ps(acc[i][0], acc[i][1])) + macc[i];
  }
}

/// Q4_K x Q8_K as ggml's AVX2 ggml_vec_dot_q4_K_q8_K: per 32-group maddubs, madd with the 6-bit
/// scale, one float FMA per super-block; mins through the bsums.
template <int N>
void rows_q4k(const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRows& xq, float* Y, int ldy) {
  const int cols = xq.cols, nb = cols / 256;
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m256 acc[N];
    float macc[N];
    for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps(), macc[i] = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t* p = row + 144 * static_cast<std::size_t>(b);
      prefetch_stream(p, 144);
      const float dx = fp16(p), dmx = fp16(p + 2);
      int sc[8], mn[8];
      for (int g = 0; g < 8; ++g) scale_min_k4(g, p + 4, sc[g], mn[g]);
      __m256i nib[8];
      for (int k = 0; k < 4; ++k) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16 + 32 * k));
        nib[2 * k] = _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
        nib[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
      }
      for (int i = 0; i < N; ++i) {
        const std::int8_t* y = xq.q.data() + static_cast<std::size_t>(i) * cols + 256 * b;
        const std::int32_t* bs = xq.sum.data() + static_cast<std::size_t>(i) * (cols / 16) + 16 * b;
        const float dy = xq.d[static_cast<std::size_t>(i) * nb + b];
        __m256i sumi = _mm256_setzero_si256();
        int summ = 0;
        for (int g = 0; g < 8; ++g) {
          const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * g));
          sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(nib[g], yv), _mm256_set1_epi16(static_cast<short>(sc[g]))));
          summ += mn[g] * (bs[2 * g] + bs[2 * g + 1]);
        }
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dy * dx), _mm256_cvtepi32_ps(sumi), acc[i]);
        macc[i] -= dy * dmx * static_cast<float>(summ);
      }
    }
    for (int i = 0; i < N; ++i) Y[static_cast<std::size_t>(i) * ldy + o] = hsum8(acc[i]) + macc[i];
  }
}

template <bool kVnni, int N>
bool rows_simd(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRows& xq, float* Y, int ldy) {
  switch (t) {
    case WeightType::Q8_0: rows_q32<WeightType::Q8_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q4_0: rows_q32<WeightType::Q4_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q4_1: rows_q32<WeightType::Q4_1, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q5_0: rows_q32<WeightType::Q5_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q5_1: rows_q32<WeightType::Q5_1, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q4_K: rows_q4k<N>(base, rb, r0, r1, xq, Y, ldy); return true;
    default: return false;
  }
}

template <bool kVnni>
bool rows_simd_n(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRows& xq, float* Y, int ldy) {
  switch (xq.n) {
    case 1: return rows_simd<kVnni, 1>(t, base, rb, r0, r1, xq, Y, ldy);
    case 2: return rows_simd<kVnni, 2>(t, base, rb, r0, r1, xq, Y, ldy);
    case 3: return rows_simd<kVnni, 3>(t, base, rb, r0, r1, xq, Y, ldy);
    default: return rows_simd<kVnni, 4>(t, base, rb, r0, r1, xq, Y, ldy);
  }
}

#endif  // KVC_QDOT_AVX2

}  // namespace

bool quant_dot_supported(WeightType t) {
  switch (t) {
    case WeightType::Q8_0: case WeightType::Q4_0: case WeightType::Q4_1:
    case WeightType::Q5_0: case WeightType::Q5_1: case WeightType::Q4_K: return true;
    default: return false;
  }
}

void quantize_rows(WeightType t, const float* X, int n, int cols, QuantizedRows& out) {
  out.n = n;
  out.cols = cols;
  out.k_blocks = t == WeightType::Q4_K;
  const std::size_t N = static_cast<std::size_t>(n);
  out.q.resize(N * cols);
  if (out.k_blocks) {
    out.d.resize(N * (cols / 256));
    out.sum.resize(N * (cols / 16));
    for (int i = 0; i < n; ++i)
      quantize_q8_k(X + i * static_cast<std::size_t>(cols), cols, out.q.data() + i * static_cast<std::size_t>(cols),
                    out.d.data() + i * static_cast<std::size_t>(cols / 256), out.sum.data() + i * static_cast<std::size_t>(cols / 16));
  } else {
    const std::size_t nb = cols / 32;
    out.d.resize(N * nb);
    out.s.resize(N * nb);
    out.sum.resize(N * nb);
    for (int i = 0; i < n; ++i)
      quantize_q8_32(X + i * static_cast<std::size_t>(cols), cols, out.q.data() + i * static_cast<std::size_t>(cols),
                     out.d.data() + i * nb, out.s.data() + i * nb, out.sum.data() + i * nb);
  }
}

void quant_rows_dot(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1,
                    const QuantizedRows& xq, float* Y, int ldy, Isa isa) {
  if (r1 <= r0 || xq.n <= 0) return;
#if defined(KVC_QDOT_VNNI)
  if (isa == Isa::Avx512 && rows_simd_n<true>(t, base, rb, r0, r1, xq, Y, ldy)) return;
#endif
#if defined(KVC_QDOT_AVX2)
  if (isa >= Isa::Avx2 && rows_simd_n<false>(t, base, rb, r0, r1, xq, Y, ldy)) return;
#endif
  (void)isa;
  for (int o = r0; o < r1; ++o)
    for (int i = 0; i < xq.n; ++i)
      Y[static_cast<std::size_t>(i) * ldy + o] = dot_scalar(t, base + static_cast<std::size_t>(o) * rb, xq, i);
}

}  // namespace kvcompact
