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

/// One Q2_K / Q3_K / Q5_K / Q6_K super-block (256 weights) as ggml's generic
/// ggml_vec_dot_{q2,q3,q5,q6}_K_q8_K sees it: signed integer quants q[256] (Q6_K: 6-bit - 32,
/// Q3_K: 2 low bits - 4 where the hmask bit is clear, Q2_K / Q5_K: unsigned), one integer scale
/// and min per 16 weights (Q5_K's per-32 scale and min repeated), and the block's f16 d and dmin
/// (dmin = 0 where the type has no mins).
struct KBlock {
  int q[256];
  int sc[16], mn[16];
  float d, dmin;
};

void decode_kblock(WeightType t, const std::uint8_t* p, KBlock& k) {
  std::fill(k.mn, k.mn + 16, 0);
  k.dmin = 0.0f;
  switch (t) {
    case WeightType::Q6_K:  // ql[128], qh[64], scales[16] (int8), d
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        const std::uint8_t lb = p[64 * h + 32 * (g % 2) + l];
        const int low = g < 2 ? lb & 0xF : lb >> 4;
        const int high = (p[128 + 32 * h + l] >> (2 * g)) & 3;
        k.q[e] = (low | (high << 4)) - 32;
      }
      for (int j = 0; j < 16; ++j) k.sc[j] = static_cast<std::int8_t>(p[192 + j]);
      k.d = fp16(p + 208);
      break;
    case WeightType::Q5_K:  // d, dmin, scales[12], qh[32], qs[128]
      for (int e = 0; e < 256; ++e) {
        const int g = e / 32, l = e % 32;
        const std::uint8_t lb = p[48 + 32 * (g / 2) + l];
        k.q[e] = ((g % 2) ? lb >> 4 : lb & 0xF) | (((p[16 + l] >> g) & 1) << 4);
      }
      for (int g = 0; g < 8; ++g) {
        int sc, mn;
        scale_min_k4(g, p + 4, sc, mn);
        k.sc[2 * g] = k.sc[2 * g + 1] = sc;
        k.mn[2 * g] = k.mn[2 * g + 1] = mn;
      }
      k.d = fp16(p), k.dmin = fp16(p + 2);
      break;
    case WeightType::Q3_K: {  // hmask[32], qs[64], scales[12], d
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        const int low = (p[32 + 32 * h + l] >> (2 * g)) & 3;
        const bool hbit = (p[l] >> (4 * h + g)) & 1;
        k.q[e] = low - (hbit ? 0 : 4);
      }
      std::int8_t scales[16];
      unpack_q3k_scales(p + 96, scales);
      for (int j = 0; j < 16; ++j) k.sc[j] = scales[j] - 32;
      k.d = fp16(p + 108);
      break;
    }
    default:  // Q2_K: scales[16] (scale | min << 4), qs[64], d, dmin
      for (int e = 0; e < 256; ++e) {
        const int h = e / 128, g = (e % 128) / 32, l = e % 32;
        k.q[e] = (p[16 + 32 * h + l] >> (2 * g)) & 3;
      }
      for (int j = 0; j < 16; ++j) k.sc[j] = p[j] & 0xF, k.mn[j] = p[j] >> 4;
      k.d = fp16(p + 80), k.dmin = fp16(p + 82);
      break;
  }
}

/// Scalar Q2_K / Q3_K / Q5_K / Q6_K x Q8_K (ggml's generic vec_dot_*_K_q8_K): per super-block the
/// exact integer sum of sc * q * y over the 16-weight groups and of mn * bsum, then
/// sumf += (d * dy) * sumi - (dmin * dy) * summ in float32.
__attribute__((optimize("no-tree-vectorize")))
float dot_scalar_k(WeightType t, const std::uint8_t* row, const QuantizedRowsView& xq, int i) {
  const int cols = xq.cols, nb = cols / 256;
  const std::size_t bb = weight_block_bytes(t);
  const std::int8_t* y = xq.q + static_cast<std::size_t>(i) * cols;
  const float* yd = xq.d + static_cast<std::size_t>(i) * nb;
  const std::int32_t* bs = xq.sum + static_cast<std::size_t>(i) * (cols / 16);
  float sumf = 0.0f;
  KBlock k;
  for (int b = 0; b < nb; ++b) {
    decode_kblock(t, row + bb * static_cast<std::size_t>(b), k);
    int sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int dot = 0;
      for (int l = 0; l < 16; ++l) dot += k.q[16 * j + l] * y[256 * b + 16 * j + l];
      sumi += k.sc[j] * dot;
      summ += k.mn[j] * bs[16 * b + j];
    }
    sumf += (k.d * yd[b]) * static_cast<float>(sumi) - (k.dmin * yd[b]) * static_cast<float>(summ);
  }
  return sumf;
}

// GCC 12.2 at -O2/-O3 with -march=native on this AVX-512 VNNI CPU vectorises the int8 x int8 -> int
// sums below wrongly (a Q8_0 block gave -6.61 where the exact sum is 1.22; -fno-tree-vectorize
// gives 1.22), so the scalar reference is kept out of the vectoriser.
__attribute__((optimize("no-tree-vectorize")))
float dot_scalar(WeightType t, const std::uint8_t* row, const QuantizedRowsView& xq, int i) {
  if (t == WeightType::Q2_K || t == WeightType::Q3_K || t == WeightType::Q5_K || t == WeightType::Q6_K)
    return dot_scalar_k(t, row, xq, i);
  const int cols = xq.cols;
  const std::int8_t* y = xq.q + static_cast<std::size_t>(i) * cols;
  if (t == WeightType::Q4_K) {
    const int nb = cols / 256;
    const float* yd = xq.d + static_cast<std::size_t>(i) * nb;
    const std::int32_t* bs = xq.sum + static_cast<std::size_t>(i) * (cols / 16);
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
  const float* yd = xq.d + static_cast<std::size_t>(i) * nb;
  const float* ys = xq.s + static_cast<std::size_t>(i) * nb;
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
void rows_q32(const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRowsView& xq, float* Y, int ldy) {
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
    yq[i] = xq.q + static_cast<std::size_t>(i) * cols;
    yd[i] = xq.d + static_cast<std::size_t>(i) * nb;
    ys[i] = xq.s + static_cast<std::size_t>(i) * nb;
    ysum[i] = xq.sum + static_cast<std::size_t>(i) * nb;
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

/// Q4_K / Q5_K x Q8_K as ggml's AVX2 ggml_vec_dot_q{4,5}_K_q8_K: per 32-group maddubs of the
/// unsigned quants (Q5_K: nibble | high bit << 4, at most 31) with y, madd with the 6-bit scale,
/// one float FMA per super-block; mins through the bsums.
template <bool kFive, int N>
void rows_q45k(const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRowsView& xq, float* Y, int ldy) {
  constexpr int kBytes = kFive ? 176 : 144, kQs = kFive ? 48 : 16;
  const int cols = xq.cols, nb = cols / 256;
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m256 acc[N];
    float macc[N];
    for (int i = 0; i < N; ++i) acc[i] = _mm256_setzero_ps(), macc[i] = 0.0f;
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t* p = row + kBytes * static_cast<std::size_t>(b);
      prefetch_stream(p, kBytes);
      const float dx = fp16(p), dmx = fp16(p + 2);
      int sc[8], mn[8];
      for (int g = 0; g < 8; ++g) scale_min_k4(g, p + 4, sc[g], mn[g]);
      __m256i nib[8];
      [[maybe_unused]] const __m256i qh = kFive ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 16)) : _mm256_setzero_si256();
      for (int k = 0; k < 4; ++k) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + kQs + 32 * k));
        nib[2 * k] = _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
        nib[2 * k + 1] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F));
        if constexpr (kFive)
          for (int h = 0; h < 2; ++h) {  // bit g of qh byte l is weight 32 g + l's fifth bit
            const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k + h), _mm256_set1_epi8(1));
            nib[2 * k + h] = _mm256_or_si256(nib[2 * k + h], _mm256_slli_epi16(hb, 4));
          }
      }
      for (int i = 0; i < N; ++i) {
        const std::int8_t* y = xq.q + static_cast<std::size_t>(i) * cols + 256 * b;
        const std::int32_t* bs = xq.sum + static_cast<std::size_t>(i) * (cols / 16) + 16 * b;
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

/// Q6_K / Q3_K / Q2_K x Q8_K: 16 scales of 16 weights per super-block. Each half (128 weights) is
/// decoded once for all N activation rows into 4 groups of 32 unsigned bytes u (Q6_K: q + 32 in
/// [0, 63]; Q3_K: q + 4 in [0, 7]; Q2_K: q in [0, 3]); per group maddubs(u, y) (pairs at most
/// 2 * 63 * 127, no saturation), madd with the group's two 16-weight scales (ggml's AVX2
/// ggml_vec_dot_q{6,3,2}_K_q8_K do the same). The offset (32 or 4) comes off once per super-block
/// as offset * sum(sc * bsum) instead of one more maddubs per group; Q2_K's mins likewise as
/// dmin * dy * sum(mn * bsum). The integer sums equal ggml's.
template <WeightType T, int N>
void rows_k16(const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRowsView& xq, float* Y, int ldy) {
  constexpr int kBytes = T == WeightType::Q6_K ? 210 : T == WeightType::Q3_K ? 110 : 84;
  constexpr int kOffsetShift = T == WeightType::Q6_K ? 5 : T == WeightType::Q3_K ? 2 : 0;  // offset 32, 4, none
  constexpr bool kMins = T == WeightType::Q2_K;
  const int cols = xq.cols, nb = cols / 256;
  const __m256i m3 = _mm256_set1_epi8(3), m4 = _mm256_set1_epi8(0x0F);
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m256 acc[N], macc[N];
    for (int i = 0; i < N; ++i) acc[i] = macc[i] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t* p = row + kBytes * static_cast<std::size_t>(b);
      prefetch_stream(p, kBytes);
      // The 16 signed 8-bit scales (and Q2_K's 16 mins), the block scales.
      __m128i sc8;
      [[maybe_unused]] __m128i mn8;
      float dx;
      [[maybe_unused]] float dmx = 0.0f;
      if constexpr (T == WeightType::Q6_K) {
        sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 192));
        dx = fp16(p + 208);
      } else if constexpr (T == WeightType::Q3_K) {
        std::int8_t s16[16];
        unpack_q3k_scales(p + 96, s16);
        sc8 = _mm_sub_epi8(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s16)), _mm_set1_epi8(32));
        dx = fp16(p + 108);
      } else {
        const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
        sc8 = _mm_and_si128(raw, _mm_set1_epi8(0x0F));
        mn8 = _mm_and_si128(_mm_srli_epi16(raw, 4), _mm_set1_epi8(0x0F));
        dx = fp16(p + 80), dmx = fp16(p + 82);
      }
      __m256i sumi[N];
      for (int i = 0; i < N; ++i) sumi[i] = _mm256_setzero_si256();
      [[maybe_unused]] const __m256i hm = T == WeightType::Q3_K ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)) : _mm256_setzero_si256();
      for (int h = 0; h < 2; ++h) {
        __m256i u[4];
        if constexpr (T == WeightType::Q6_K) {
          const __m256i qa = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h));
          const __m256i qb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 64 * h + 32));
          const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 128 + 32 * h));
          // Each high pair masked in place before the shift, so no bits cross a byte.
          u[0] = _mm256_or_si256(_mm256_and_si256(qa, m4), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
          u[1] = _mm256_or_si256(_mm256_and_si256(qb, m4), _mm256_slli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(0x0C)), 2));
          u[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qa, 4), m4), _mm256_and_si256(qh, _mm256_set1_epi8(0x30)));
          u[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(qb, 4), m4),
                                 _mm256_srli_epi16(_mm256_and_si256(qh, _mm256_set1_epi8(static_cast<char>(0xC0))), 2));
        } else {
          const __m256i qs = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + (T == WeightType::Q3_K ? 32 : 16) + 32 * h));
          for (int g = 0; g < 4; ++g) {
            u[g] = _mm256_and_si256(_mm256_srli_epi16(qs, 2 * g), m3);
            if constexpr (T == WeightType::Q3_K) {
              const __m256i hb = _mm256_and_si256(_mm256_srli_epi16(hm, 4 * h + g), _mm256_set1_epi8(1));
              u[g] = _mm256_or_si256(u[g], _mm256_slli_epi16(hb, 2));
            }
          }
        }
        __m256i scv[4];  // int16: 8 lanes of scale 2G, 8 of scale 2G + 1 (G = 4 h + g)
        for (int g = 0; g < 4; ++g) {
          const long long G = 4 * h + g;
          const __m128i pat = _mm_set_epi64x((2 * G + 1) * 0x0101010101010101LL, 2 * G * 0x0101010101010101LL);
          scv[g] = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc8, pat));
        }
        for (int i = 0; i < N; ++i) {
          const std::int8_t* y = xq.q + static_cast<std::size_t>(i) * cols + 256 * b + 128 * h;
          for (int g = 0; g < 4; ++g) {
            const __m256i yv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y + 32 * g));
            sumi[i] = _mm256_add_epi32(sumi[i], _mm256_madd_epi16(scv[g], _mm256_maddubs_epi16(u[g], yv)));
          }
        }
      }
      [[maybe_unused]] const __m256i sc_lo = _mm256_cvtepi8_epi32(sc8), sc_hi = _mm256_cvtepi8_epi32(_mm_srli_si128(sc8, 8));
      [[maybe_unused]] __m256i mn_lo, mn_hi;
      if constexpr (kMins) mn_lo = _mm256_cvtepi8_epi32(mn8), mn_hi = _mm256_cvtepi8_epi32(_mm_srli_si128(mn8, 8));
      for (int i = 0; i < N; ++i) {
        const std::int32_t* bs = xq.sum + static_cast<std::size_t>(i) * (cols / 16) + 16 * b;
        const __m256i b0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs));
        const __m256i b1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + 8));
        const float dy = xq.d[static_cast<std::size_t>(i) * nb + b];
        if constexpr (kOffsetShift > 0) {
          const __m256i corr = _mm256_add_epi32(_mm256_mullo_epi32(sc_lo, b0), _mm256_mullo_epi32(sc_hi, b1));
          sumi[i] = _mm256_sub_epi32(sumi[i], _mm256_slli_epi32(corr, kOffsetShift));
        }
        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dx * dy), _mm256_cvtepi32_ps(sumi[i]), acc[i]);
        if constexpr (kMins) {
          const __m256i m = _mm256_add_epi32(_mm256_mullo_epi32(mn_lo, b0), _mm256_mullo_epi32(mn_hi, b1));
          macc[i] = _mm256_fmadd_ps(_mm256_set1_ps(dmx * dy), _mm256_cvtepi32_ps(m), macc[i]);
        }
      }
    }
    for (int i = 0; i < N; ++i) Y[static_cast<std::size_t>(i) * ldy + o] = hsum8(_mm256_sub_ps(acc[i], macc[i]));
  }
}

template <bool kVnni, int N>
bool rows_simd(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRowsView& xq, float* Y, int ldy) {
  switch (t) {
    case WeightType::Q8_0: rows_q32<WeightType::Q8_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q4_0: rows_q32<WeightType::Q4_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q4_1: rows_q32<WeightType::Q4_1, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q5_0: rows_q32<WeightType::Q5_0, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q5_1: rows_q32<WeightType::Q5_1, kVnni, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    // The K-quants have no VNNI kernel: at Avx512 they run these AVX2 (maddubs) kernels.
    case WeightType::Q4_K: rows_q45k<false, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q5_K: rows_q45k<true, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q6_K: rows_k16<WeightType::Q6_K, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q3_K: rows_k16<WeightType::Q3_K, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    case WeightType::Q2_K: rows_k16<WeightType::Q2_K, N>(base, rb, r0, r1, xq, Y, ldy); return true;
    default: return false;
  }
}

template <bool kVnni>
bool rows_simd_n(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1, const QuantizedRowsView& xq, float* Y, int ldy) {
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
    case WeightType::Q5_0: case WeightType::Q5_1: case WeightType::Q2_K: case WeightType::Q3_K:
    case WeightType::Q4_K: case WeightType::Q5_K: case WeightType::Q6_K: return true;
    default: return false;
  }
}

bool quant_dot_k_blocks(WeightType t) {
  return t == WeightType::Q2_K || t == WeightType::Q3_K || t == WeightType::Q4_K || t == WeightType::Q5_K ||
         t == WeightType::Q6_K;
}

void quantize_rows(WeightType t, const float* X, int n, int cols, QuantizedRows& out) {
  out.n = n;
  out.cols = cols;
  out.k_blocks = quant_dot_k_blocks(t);
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

QuantizedRowsView QuantizedRows::view(int i0, int rows) const {
  const std::size_t c = static_cast<std::size_t>(cols), i = static_cast<std::size_t>(i0);
  const std::size_t nb = c / (k_blocks ? 256 : 32), ns = c / (k_blocks ? 16 : 32);
  return QuantizedRowsView{q.data() + i * c, d.data() + i * nb, k_blocks ? nullptr : s.data() + i * nb,
                           sum.data() + i * ns, rows, cols};
}

void quant_rows_dot(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1,
                    const QuantizedRows& xq, float* Y, int ldy, Isa isa) {
  quant_rows_dot(t, base, rb, r0, r1, xq.view(0, xq.n), Y, ldy, isa);
}

void quant_rows_dot(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1,
                    const QuantizedRowsView& xq, float* Y, int ldy, Isa isa) {
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
