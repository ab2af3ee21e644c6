#include "ops/typed_dot.h"
#include "core/kquant_scales.h"

#include <cstring>
#include <vector>

#include "core/dequant.h"
#include "core/half.h"
#include "ops/prefetch.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define KVC_TYPED_DOT_AVX2 1
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define KVC_TYPED_DOT_AVX512 1
// GCC 12 reports its own _mm512_undefined_* placeholders (self-initialised) as maybe-uninitialised.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

/// Decode each row into a per-thread buffer, then float32 dot (the Scalar / Avx2 path).
void rows_dot_decoded(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1,
                      const float* X, int n, int in, float* Y, int ldy) {
  thread_local std::vector<float> row;
  if (row.size() < static_cast<std::size_t>(in)) row.resize(static_cast<std::size_t>(in));
  float* w = row.data();
  for (int o = r0; o < r1; ++o) {
    dequantize_row(t, base + static_cast<std::size_t>(o) * rb, w, in);
    for (int i = 0; i < n; ++i) {
      const float* x = X + static_cast<std::size_t>(i) * in;
      float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
      for (int k = 0; k < in; ++k) acc += x[k] * w[k];
      Y[static_cast<std::size_t>(i) * ldy + o] = acc;
    }
  }
}

#if defined(KVC_TYPED_DOT_AVX512)

// ---- AVX-512 decoders. Each decodes one stored block (QK elements, BYTES bytes) and hands its
// elements to emit(offset, w0, w1) 32 at a time (w0: elements offset .. +15, w1: +16 .. +31).
// Values are computed with the same float32 operations as core/dequant.cpp (all products there
// are exact in float32, so table look-ups, FMA or not, give identical values). ----

inline __m512 iota16() { return _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15); }
inline __m512 f16x(const std::uint8_t* p) { return _mm512_set1_ps(_cvtsh_ss(ld16(p))); }
inline __m128i lo_nibbles(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0x0F)); }
inline __m128i hi_nibbles(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)); }
inline __m128i load128(const std::uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

struct DecF32 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 128;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) {
    float v;
    std::memcpy(&v, row + 4 * static_cast<std::size_t>(k), 4);
    return v;
  }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    emit(0, _mm512_loadu_ps(p), _mm512_loadu_ps(p + 64));
  }
};

struct DecF16 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 64;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) { return f16_to_f32(ld16(row + 2 * static_cast<std::size_t>(k))); }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    emit(0, _mm512_cvtph_ps(load256(p)), _mm512_cvtph_ps(load256(p + 32)));
  }
};

struct DecBF16 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 64;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) { return bf16_to_f32(ld16(row + 2 * static_cast<std::size_t>(k))); }
  static __m512 widen(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    emit(0, widen(load256(p)), widen(load256(p + 32)));
  }
};

template <int kOff>  // byte offset of qs in the block (Q8_0: 2, Q8_1: 4)
struct DecQ8 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kOff + 32;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m512 d = f16x(p);
    const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(p + kOff)));
    const __m512 b = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(load128(p + kOff + 16)));
    emit(0, _mm512_mul_ps(a, d), _mm512_mul_ps(b, d));
  }
};

// Q4_0 / Q4_1: the 16 possible values of a block as a table, looked up by nibble.
template <bool kMin>
struct DecQ4 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kMin ? 20 : 18;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m512 d = f16x(p);
    const __m512 table = kMin ? _mm512_fmadd_ps(iota16(), d, f16x(p + 2))
                              : _mm512_mul_ps(_mm512_sub_ps(iota16(), _mm512_set1_ps(8.0f)), d);
    const __m128i raw = load128(p + (kMin ? 4 : 2));
    emit(0, _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(lo_nibbles(raw)), table),
         _mm512_permutexvar_ps(_mm512_cvtepu8_epi32(hi_nibbles(raw)), table));
  }
};

// Q5_0 / Q5_1: 32 possible values in two tables, 5-bit index = nibble | high bit << 4.
template <bool kMin>
struct DecQ5 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kMin ? 24 : 22;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m512 d = f16x(p);
    const __m512 lo = kMin ? iota16() : _mm512_sub_ps(iota16(), _mm512_set1_ps(16.0f));
    const __m512 hi = kMin ? _mm512_add_ps(iota16(), _mm512_set1_ps(16.0f)) : iota16();
    const __m512 t0 = kMin ? _mm512_fmadd_ps(lo, d, f16x(p + 2)) : _mm512_mul_ps(lo, d);
    const __m512 t1 = kMin ? _mm512_fmadd_ps(hi, d, f16x(p + 2)) : _mm512_mul_ps(hi, d);
    const std::uint32_t qh = ld32(p + (kMin ? 4 : 2));
    const __m128i raw = load128(p + (kMin ? 8 : 6));
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i i0 = _mm512_cvtepu8_epi32(lo_nibbles(raw)), i1 = _mm512_cvtepu8_epi32(hi_nibbles(raw));
    i0 = _mm512_mask_or_epi32(i0, static_cast<__mmask16>(qh & 0xFFFF), i0, sixteen);
    i1 = _mm512_mask_or_epi32(i1, static_cast<__mmask16>(qh >> 16), i1, sixteen);
    emit(0, _mm512_permutex2var_ps(t0, i0, t1), _mm512_permutex2var_ps(t0, i1, t1));
  }
};

/// The 8 groups' d * scale (dsc) and dmin * min (mmn) of a Q4_K / Q5_K block p, as float32: ggml's
/// kmask arithmetic on the 12 scale bytes in one xmm (32-bit lanes: u0 & k1 | (u2 & k2) |
/// ((u0 >> 6) & k3) << 4 | u1 & k1 | ((u2 >> 4) & k2) | ((u1 >> 6) & k3) << 4 = scales 0-3, 4-7,
/// mins 0-3, 4-7), then one float32 multiply each: the same products as scale_min_k4.
inline void k_scales_mins(const std::uint8_t* p, __m256& dsc, __m256& mmn) {
  const __m128i u = load128(p + 4);  // 12 scale bytes + 4 bytes of the block that are not used
  const __m128i a = _mm_shuffle_epi32(u, _MM_SHUFFLE(2, 1, 2, 0));  // u0 u2 u1 u2
  const __m128i b = _mm_shuffle_epi32(u, _MM_SHUFFLE(1, 1, 0, 0));  // u0 u0 u1 u1
  const __m128i even = _mm_and_si128(a, _mm_set1_epi32(0x3f3f3f3f));
  const __m128i odd = _mm_or_si128(
      _mm_and_si128(_mm_srlv_epi32(a, _mm_setr_epi32(0, 0, 0, 4)), _mm_set1_epi32(0x0f0f0f0f)),
      _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(b, 6), _mm_set1_epi32(0x03030303)), 4));
  const __m128i sm = _mm_blend_epi32(even, odd, 0b1010);  // bytes 0-7 scales, 8-15 mins
  dsc = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(ld16(p))), _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(sm)));
  mmn = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(ld16(p + 2))),
                      _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(sm, 8))));
}

// Q4_K / Q5_K: 8 groups of 32 with their own scale and min; per group a table d1 * q - m1.
template <bool kQ5>
struct DecQ45K {
  static constexpr int QK = 256;
  static constexpr int BYTES = kQ5 ? 176 : 144;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    __m256 dsc, mmn;  // without ~16 scalar operations per group
    k_scales_mins(p, dsc, mmn);
    const __m512 dsc16 = _mm512_castps256_ps512(dsc), mmn16 = _mm512_castps256_ps512(mmn);
    const std::uint8_t* qs = p + (kQ5 ? 48 : 16);
    [[maybe_unused]] const __m256i qh = kQ5 ? load256(p + 16) : _mm256_setzero_si256();
    if constexpr (!kQ5) {
      // Q4_K: the 32 bytes of groups 2c (low nibbles) and 2c + 1 (high nibbles) widened to 32-bit
      // lanes once; q * d1 - m1 in one rounding, as the table entry fmsub(q, d1, m1).
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i z0 = _mm512_cvtepu8_epi32(load128(qs + 32 * c)), z1 = _mm512_cvtepu8_epi32(load128(qs + 32 * c + 16));
        const __m512i lo = _mm512_set1_epi32(2 * c), hi = _mm512_set1_epi32(2 * c + 1), f = _mm512_set1_epi32(0x0F);
        const __m512 d0 = _mm512_permutexvar_ps(lo, dsc16), m0 = _mm512_permutexvar_ps(lo, mmn16);
        emit(64 * c, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(z0, f)), d0, m0),
             _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_and_si512(z1, f)), d0, m0));
        const __m512 d1 = _mm512_permutexvar_ps(hi, dsc16), m1 = _mm512_permutexvar_ps(hi, mmn16);
        emit(64 * c + 32, _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(z0, 4)), d1, m1),
             _mm512_fmsub_ps(_mm512_cvtepi32_ps(_mm512_srli_epi32(z1, 4)), d1, m1));
      }
      return;
    }
    const __m512 iota = iota16();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      const __m512i lane = _mm512_set1_epi32(g);
      const __m512 d1 = _mm512_permutexvar_ps(lane, dsc16), m1 = _mm512_permutexvar_ps(lane, mmn16);
      const __m256i raw = load256(qs + 32 * (g / 2));
      const __m256i nib = (g % 2) ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F))
                                  : _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
      __m512i i0 = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(nib));
      __m512i i1 = _mm512_cvtepu8_epi32(_mm256_extracti128_si256(nib, 1));
      const __m512 t0 = _mm512_fmsub_ps(iota, d1, m1);
      if constexpr (kQ5) {
        const __m512 t1 = _mm512_fmsub_ps(_mm512_add_ps(iota, _mm512_set1_ps(16.0f)), d1, m1);
        const __mmask32 hb = _mm256_test_epi8_mask(qh, _mm256_set1_epi8(static_cast<char>(1 << g)));
        const __m512i sixteen = _mm512_set1_epi32(16);
        i0 = _mm512_mask_or_epi32(i0, static_cast<__mmask16>(hb & 0xFFFF), i0, sixteen);
        i1 = _mm512_mask_or_epi32(i1, static_cast<__mmask16>(hb >> 16), i1, sixteen);
        emit(32 * g, _mm512_permutex2var_ps(t0, i0, t1), _mm512_permutex2var_ps(t0, i1, t1));
      } else {
        emit(32 * g, _mm512_permutexvar_ps(i0, t0), _mm512_permutexvar_ps(i1, t0));
      }
    }
  }
};

struct DecQ6K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 210;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float d = f16_to_f32(ld16(p + 208));
    const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(p + 192);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3);
    const __m512i off = _mm512_set1_epi32(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i qa = load256(p + 64 * h), qb = load256(p + 64 * h + 32), qh = load256(p + 128 + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i lb = (k % 2) ? qb : qa;
        const __m256i low = k < 2 ? _mm256_and_si256(lb, m4) : _mm256_and_si256(_mm256_srli_epi16(lb, 4), m4);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
        const __m256i q = _mm256_or_si256(low, _mm256_slli_epi16(high, 4));
        const __m512 a = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)), off));
        const __m512 b = _mm512_cvtepi32_ps(_mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)), off));
        const int s = 8 * h + 2 * k;
        emit(128 * h + 32 * k, _mm512_mul_ps(a, _mm512_set1_ps(d * static_cast<float>(sc[s]))),
             _mm512_mul_ps(b, _mm512_set1_ps(d * static_cast<float>(sc[s + 1]))));
      }
    }
  }
};

struct DecQ2K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 84;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const std::uint8_t* scales = p;
    const float d = f16_to_f32(ld16(p + 80)), dmin = f16_to_f32(ld16(p + 82));
    const __m256i m2 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = load256(p + 16 + 32 * h);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m2);
        const __m512 a = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_castsi256_si128(q)));
        const __m512 b = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1)));
        const std::uint8_t s0 = scales[2 * g], s1 = scales[2 * g + 1];
        emit(32 * g,
             _mm512_fmsub_ps(_mm512_set1_ps(d * static_cast<float>(s0 & 0xF)), a, _mm512_set1_ps(dmin * static_cast<float>(s0 >> 4))),
             _mm512_fmsub_ps(_mm512_set1_ps(d * static_cast<float>(s1 & 0xF)), b, _mm512_set1_ps(dmin * static_cast<float>(s1 >> 4))));
      }
    }
  }
};

struct DecQ3K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 110;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float d_all = f16_to_f32(ld16(p + 108));
    std::int8_t scales[16];
    unpack_q3k_scales(p + 96, scales);
    const __m256i hm = load256(p), m2 = _mm256_set1_epi8(3);
    const __m512i four = _mm512_set1_epi32(4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = load256(p + 32 + 32 * h);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m2);
        const __mmask32 hb = _mm256_test_epi8_mask(hm, _mm256_set1_epi8(static_cast<char>(1 << g)));
        __m512i a = _mm512_cvtepu8_epi32(_mm256_castsi256_si128(q));
        __m512i b = _mm512_cvtepu8_epi32(_mm256_extracti128_si256(q, 1));
        a = _mm512_mask_sub_epi32(a, static_cast<__mmask16>(~hb & 0xFFFF), a, four);
        b = _mm512_mask_sub_epi32(b, static_cast<__mmask16>((~hb) >> 16), b, four);
        emit(32 * g, _mm512_mul_ps(_mm512_set1_ps(d_all * static_cast<float>(scales[2 * g] - 32)), _mm512_cvtepi32_ps(a)),
             _mm512_mul_ps(_mm512_set1_ps(d_all * static_cast<float>(scales[2 * g + 1] - 32)), _mm512_cvtepi32_ps(b)));
      }
    }
  }
};

/// Rows [r0, r1) of W against N activation rows. Blocks are taken in pairs so that every row has
/// four independent FMA chains.
template <class D, int N>
void rows_avx512(const std::uint8_t* base, std::size_t rb, int r0, int r1, const float* X, int in, float* Y, int ldy) {
  const int nb = in / D::QK;
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m512 acc[N][4];
    for (int i = 0; i < N; ++i)
      for (int s = 0; s < 4; ++s) acc[i][s] = _mm512_setzero_ps();
    int b = 0;
    for (; b + 1 < nb; b += 2) {
      const int x0 = b * D::QK, x1 = x0 + D::QK;
      prefetch_stream(row + static_cast<std::size_t>(b) * D::BYTES, 2 * D::BYTES);
      D::block(row + static_cast<std::size_t>(b) * D::BYTES, [&](int off, __m512 w0, __m512 w1) {
        for (int i = 0; i < N; ++i) {
          const float* x = X + static_cast<std::size_t>(i) * in + x0 + off;
          acc[i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc[i][1]);
        }
      });
      D::block(row + static_cast<std::size_t>(b + 1) * D::BYTES, [&](int off, __m512 w0, __m512 w1) {
        for (int i = 0; i < N; ++i) {
          const float* x = X + static_cast<std::size_t>(i) * in + x1 + off;
          acc[i][2] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc[i][2]);
          acc[i][3] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc[i][3]);
        }
      });
    }
    if (b < nb) {
      const int x0 = b * D::QK;
      D::block(row + static_cast<std::size_t>(b) * D::BYTES, [&](int off, __m512 w0, __m512 w1) {
        for (int i = 0; i < N; ++i) {
          const float* x = X + static_cast<std::size_t>(i) * in + x0 + off;
          acc[i][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(x), acc[i][0]);
          acc[i][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(x + 16), acc[i][1]);
        }
      });
    }
    for (int i = 0; i < N; ++i) {
      float sum = _mm512_reduce_add_ps(
          _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3])));
      if constexpr (D::kDense) {  // columns past the last whole group of 32
        const float* x = X + static_cast<std::size_t>(i) * in;
        for (int k = nb * D::QK; k < in; ++k) sum += D::element(row, k) * x[k];
      }
      Y[static_cast<std::size_t>(i) * ldy + o] = sum;
    }
  }
}

/// Q4_K rows [r0, r1) against N activation rows, factored per group of 32: with w = d1 q - m1,
/// x . w = sum_g d1_g (x_g . q_g) - sum_g m1_g (sum x_g). The group sums of x are taken once per
/// call, so each element costs one convert (or table look-up) and one FMA instead of a decode
/// fmsub and an FMA. Same float32 d1, m1 as the decoder above; the products are rounded in a
/// different order (|difference| ~ 1e-7 of sum |x w|, as any reordering of the dot).
template <int N>
void rows_q4k_avx512(const std::uint8_t* base, std::size_t rb, int r0, int r1, const float* X, int in, float* Y,
                     int ldy) {
  constexpr int QK = 256, BYTES = 144;
  const int nb = in / QK, ng = nb * 8;
  thread_local std::vector<float> sx;
  sx.resize(static_cast<std::size_t>(N) * static_cast<std::size_t>(ng));
  for (int i = 0; i < N; ++i)
    for (int g = 0; g < ng; ++g) {
      const float* x = X + static_cast<std::size_t>(i) * in + 32 * g;
      sx[static_cast<std::size_t>(i) * ng + g] =
          _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)));
    }
  const __m512 iota = iota16();
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m512 acc[N][4];
    __m256 macc[N];
    for (int i = 0; i < N; ++i) {
      for (int s = 0; s < 4; ++s) acc[i][s] = _mm512_setzero_ps();
      macc[i] = _mm256_setzero_ps();
    }
    for (int b = 0; b < nb; ++b) {
      const std::uint8_t* p = row + static_cast<std::size_t>(b) * BYTES;
      prefetch_stream(p, BYTES);
      __m256 dsc, mmn;
      k_scales_mins(p, dsc, mmn);
      for (int i = 0; i < N; ++i)
        macc[i] = _mm256_fmadd_ps(mmn, _mm256_loadu_ps(sx.data() + static_cast<std::size_t>(i) * ng + 8 * b), macc[i]);
      const __m512 dsc16 = _mm512_castps256_ps512(dsc);
      const std::uint8_t* qs = p + 16;
      const float* xb = X + static_cast<std::size_t>(b) * QK;
#pragma GCC unroll 4
      for (int c = 0; c < 4; ++c) {
        const __m512i z0 = _mm512_cvtepu8_epi32(load128(qs + 32 * c)), z1 = _mm512_cvtepu8_epi32(load128(qs + 32 * c + 16));
        // Low nibbles by table look-up (permutexvar reads the index's low 4 bits), high ones by
        // shift and convert: the two halves go to different ports.
        const __m512 l0 = _mm512_permutexvar_ps(z0, iota), l1 = _mm512_permutexvar_ps(z1, iota);
        const __m512 h0 = _mm512_cvtepi32_ps(_mm512_srli_epi32(z0, 4)), h1 = _mm512_cvtepi32_ps(_mm512_srli_epi32(z1, 4));
        const __m512 d0 = _mm512_permutexvar_ps(_mm512_set1_epi32(2 * c), dsc16);
        const __m512 d1 = _mm512_permutexvar_ps(_mm512_set1_epi32(2 * c + 1), dsc16);
        for (int i = 0; i < N; ++i) {
          const float* x = xb + static_cast<std::size_t>(i) * in + 64 * c;
          const __m512 g0 = _mm512_fmadd_ps(l1, _mm512_loadu_ps(x + 16), _mm512_mul_ps(l0, _mm512_loadu_ps(x)));
          const __m512 g1 = _mm512_fmadd_ps(h1, _mm512_loadu_ps(x + 48), _mm512_mul_ps(h0, _mm512_loadu_ps(x + 32)));
          acc[i][(2 * c) % 4] = _mm512_fmadd_ps(d0, g0, acc[i][(2 * c) % 4]);
          acc[i][(2 * c + 1) % 4] = _mm512_fmadd_ps(d1, g1, acc[i][(2 * c + 1) % 4]);
        }
      }
    }
    for (int i = 0; i < N; ++i) {
      const float dot = _mm512_reduce_add_ps(
          _mm512_add_ps(_mm512_add_ps(acc[i][0], acc[i][1]), _mm512_add_ps(acc[i][2], acc[i][3])));
      Y[static_cast<std::size_t>(i) * ldy + o] = dot - _mm512_reduce_add_ps(_mm512_zextps256_ps512(macc[i]));
    }
  }
}

template <class D>
void rows_avx512_n(const std::uint8_t* base, std::size_t rb, int r0, int r1, const float* X, int n, int in, float* Y, int ldy) {
  switch (n) {
    case 1: return rows_avx512<D, 1>(base, rb, r0, r1, X, in, Y, ldy);
    case 2: return rows_avx512<D, 2>(base, rb, r0, r1, X, in, Y, ldy);
    case 3: return rows_avx512<D, 3>(base, rb, r0, r1, X, in, Y, ldy);
    default: return rows_avx512<D, 4>(base, rb, r0, r1, X, in, Y, ldy);
  }
}

#endif  // KVC_TYPED_DOT_AVX512

#if defined(KVC_TYPED_DOT_AVX2)

// ---- AVX2 decoders. Each decodes one stored block (QK elements, BYTES bytes) and hands its
// elements to emit(offset, w0, w1, w2, w3) 32 at a time (wj: elements offset + 8j .. + 8j + 7),
// with the same float32 operations as core/dequant.cpp (products that are exact in float32 may
// be fused into an FMA: the value is the same). ----

namespace avx2 {

/// An f16 block scale as float32 by F16C (exact, as f16_to_f32; no branches on the scale).
inline float h2f(const std::uint8_t* p) { return _cvtsh_ss(ld16(p)); }
inline __m256 f16x(const std::uint8_t* p) { return _mm256_set1_ps(h2f(p)); }
inline __m128i load128(const std::uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline __m256i load256(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
/// The 8 unsigned / signed bytes at the bottom of v as 8 int32 lanes.
inline __m256i u8lo(__m128i v) { return _mm256_cvtepu8_epi32(v); }
inline __m256i u8hi(__m128i v) { return _mm256_cvtepu8_epi32(_mm_srli_si128(v, 8)); }
inline __m256i i8lo(__m128i v) { return _mm256_cvtepi8_epi32(v); }
inline __m256i i8hi(__m128i v) { return _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8)); }
inline __m256 cvt(__m256i v) { return _mm256_cvtepi32_ps(v); }
inline __m128i lo_nib(__m128i v) { return _mm_and_si128(v, _mm_set1_epi8(0x0F)); }
inline __m128i hi_nib(__m128i v) { return _mm_and_si128(_mm_srli_epi16(v, 4), _mm_set1_epi8(0x0F)); }
/// Bit `bit` of every byte of v, as 0 / 1 bytes (the 16-bit shift moves no bit across a byte
/// boundary that the mask keeps).
inline __m256i bit_of_bytes(__m256i v, int bit) {
  return _mm256_and_si256(_mm256_srl_epi16(v, _mm_cvtsi32_si128(bit)), _mm256_set1_epi8(1));
}

struct DecF32 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 128;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) {
    float v;
    std::memcpy(&v, row + 4 * static_cast<std::size_t>(k), 4);
    return v;
  }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float* f = reinterpret_cast<const float*>(p);
    emit(0, _mm256_loadu_ps(f), _mm256_loadu_ps(f + 8), _mm256_loadu_ps(f + 16), _mm256_loadu_ps(f + 24));
  }
};

struct DecF16 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 64;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) { return f16_to_f32(ld16(row + 2 * static_cast<std::size_t>(k))); }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    emit(0, _mm256_cvtph_ps(load128(p)), _mm256_cvtph_ps(load128(p + 16)), _mm256_cvtph_ps(load128(p + 32)),
         _mm256_cvtph_ps(load128(p + 48)));
  }
};

struct DecBF16 {
  static constexpr int QK = 32;
  static constexpr int BYTES = 64;
  static constexpr bool kDense = true;
  static float element(const std::uint8_t* row, int k) { return bf16_to_f32(ld16(row + 2 * static_cast<std::size_t>(k))); }
  static __m256 widen(__m128i h) { return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)); }
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    emit(0, widen(load128(p)), widen(load128(p + 16)), widen(load128(p + 32)), widen(load128(p + 48)));
  }
};

template <int kOff>  // byte offset of qs in the block (Q8_0: 2, Q8_1: 4)
struct DecQ8 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kOff + 32;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m256 d = f16x(p);
    const __m128i a = load128(p + kOff), b = load128(p + kOff + 16);
    emit(0, _mm256_mul_ps(cvt(i8lo(a)), d), _mm256_mul_ps(cvt(i8hi(a)), d), _mm256_mul_ps(cvt(i8lo(b)), d),
         _mm256_mul_ps(cvt(i8hi(b)), d));
  }
};

// Q4_0: (q - 8) * d; Q4_1: q * d + m. Elements 0..15 are the low nibbles, 16..31 the high ones.
template <bool kMin>
struct DecQ4 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kMin ? 20 : 18;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m256 d = f16x(p);
    const __m128i raw = load128(p + (kMin ? 4 : 2));
    const __m128i lo = lo_nib(raw), hi = hi_nib(raw);
    if constexpr (kMin) {
      const __m256 m = f16x(p + 2);
      emit(0, _mm256_fmadd_ps(cvt(u8lo(lo)), d, m), _mm256_fmadd_ps(cvt(u8hi(lo)), d, m),
           _mm256_fmadd_ps(cvt(u8lo(hi)), d, m), _mm256_fmadd_ps(cvt(u8hi(hi)), d, m));
    } else {
      const __m256i eight = _mm256_set1_epi32(8);
      auto v = [&](__m256i q) { return _mm256_mul_ps(cvt(_mm256_sub_epi32(q, eight)), d); };
      emit(0, v(u8lo(lo)), v(u8hi(lo)), v(u8lo(hi)), v(u8hi(hi)));
    }
  }
};

// Q5_0: (q - 16) * d; Q5_1: q * d + m; q = nibble | (bit j of qh) << 4 for element j.
template <bool kMin>
struct DecQ5 {
  static constexpr int QK = 32;
  static constexpr int BYTES = kMin ? 24 : 22;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const __m256 d = f16x(p);
    const __m256i qh = _mm256_set1_epi32(static_cast<int>(ld32(p + (kMin ? 4 : 2))));
    const __m128i raw = load128(p + (kMin ? 8 : 6));
    const __m128i lo = lo_nib(raw), hi = hi_nib(raw);
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), one = _mm256_set1_epi32(1);
    auto q5 = [&](__m256i nib, int j0) {
      const __m256i hb = _mm256_and_si256(_mm256_srlv_epi32(qh, _mm256_add_epi32(lane, _mm256_set1_epi32(j0))), one);
      return _mm256_or_si256(nib, _mm256_slli_epi32(hb, 4));
    };
    auto v = [&](__m256i q) {
      if constexpr (kMin) return _mm256_fmadd_ps(cvt(q), d, f16x(p + 2));
      else return _mm256_mul_ps(cvt(_mm256_sub_epi32(q, _mm256_set1_epi32(16))), d);
    };
    emit(0, v(q5(u8lo(lo), 0)), v(q5(u8hi(lo), 8)), v(q5(u8lo(hi), 16)), v(q5(u8hi(hi), 24)));
  }
};

// Q4_K / Q5_K: 8 groups of 32 with their own scale and min: d1 * q - m1.
template <bool kQ5>
struct DecQ45K {
  static constexpr int QK = 256;
  static constexpr int BYTES = kQ5 ? 176 : 144;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float d = h2f(p), dmin = h2f(p + 2);
    const std::uint8_t* scales = p + 4;
    const std::uint8_t* qs = p + (kQ5 ? 48 : 16);
    [[maybe_unused]] const __m256i qh = kQ5 ? load256(p + 16) : _mm256_setzero_si256();
#pragma GCC unroll 8
    for (int g = 0; g < 8; ++g) {
      int sc, mn;
      scale_min_k4(g, scales, sc, mn);
      const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(sc)), m1 = _mm256_set1_ps(dmin * static_cast<float>(mn));
      const __m256i raw = load256(qs + 32 * (g / 2));
      __m256i q = (g % 2) ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), _mm256_set1_epi8(0x0F))
                          : _mm256_and_si256(raw, _mm256_set1_epi8(0x0F));
      if constexpr (kQ5) q = _mm256_or_si256(q, _mm256_slli_epi16(bit_of_bytes(qh, g), 4));
      const __m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);
      emit(32 * g, _mm256_fmsub_ps(d1, cvt(u8lo(a)), m1), _mm256_fmsub_ps(d1, cvt(u8hi(a)), m1),
           _mm256_fmsub_ps(d1, cvt(u8lo(b)), m1), _mm256_fmsub_ps(d1, cvt(u8hi(b)), m1));
    }
  }
};

// Q6_K: (d * sc) * (q - 32), q = 4 low bits | 2 high bits << 4; 16 elements per scale.
struct DecQ6K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 210;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float d = h2f(p + 208);
    const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(p + 192);
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(3), off = _mm256_set1_epi8(32);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i qa = load256(p + 64 * h), qb = load256(p + 64 * h + 32), qh = load256(p + 128 + 32 * h);
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) {
        const __m256i lb = (k % 2) ? qb : qa;
        const __m256i low = k < 2 ? _mm256_and_si256(lb, m4) : _mm256_and_si256(_mm256_srli_epi16(lb, 4), m4);
        const __m256i high = _mm256_and_si256(_mm256_srli_epi16(qh, 2 * k), m2);
        const __m256i q = _mm256_sub_epi8(_mm256_or_si256(low, _mm256_slli_epi16(high, 4)), off);  // in [-32, 31]
        const __m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);
        const int s = 8 * h + 2 * k;
        const __m256 ds0 = _mm256_set1_ps(d * static_cast<float>(sc[s])), ds1 = _mm256_set1_ps(d * static_cast<float>(sc[s + 1]));
        emit(128 * h + 32 * k, _mm256_mul_ps(cvt(i8lo(a)), ds0), _mm256_mul_ps(cvt(i8hi(a)), ds0),
             _mm256_mul_ps(cvt(i8lo(b)), ds1), _mm256_mul_ps(cvt(i8hi(b)), ds1));
      }
    }
  }
};

// Q2_K: dl * q - ml per 16 elements (q 2 bits, scale and min 4 bits each).
struct DecQ2K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 84;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const std::uint8_t* scales = p;
    const float d = h2f(p + 80), dmin = h2f(p + 82);
    const __m256i m2 = _mm256_set1_epi8(3);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = load256(p + 16 + 32 * h);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        const __m256i q = _mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m2);
        const __m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);
        const std::uint8_t s0 = scales[2 * g], s1 = scales[2 * g + 1];
        const __m256 d0 = _mm256_set1_ps(d * static_cast<float>(s0 & 0xF)), n0 = _mm256_set1_ps(dmin * static_cast<float>(s0 >> 4));
        const __m256 d1 = _mm256_set1_ps(d * static_cast<float>(s1 & 0xF)), n1 = _mm256_set1_ps(dmin * static_cast<float>(s1 >> 4));
        emit(32 * g, _mm256_fmsub_ps(d0, cvt(u8lo(a)), n0), _mm256_fmsub_ps(d0, cvt(u8hi(a)), n0),
             _mm256_fmsub_ps(d1, cvt(u8lo(b)), n1), _mm256_fmsub_ps(d1, cvt(u8hi(b)), n1));
      }
    }
  }
};

// Q3_K: dl * (q - 4 * (high bit clear)), dl = d * (6-bit scale - 32) per 16 elements.
struct DecQ3K {
  static constexpr int QK = 256;
  static constexpr int BYTES = 110;
  static constexpr bool kDense = false;
  template <class E> static void block(const std::uint8_t* p, E&& emit) {
    const float d_all = h2f(p + 108);
    std::int8_t scales[16];
    unpack_q3k_scales(p + 96, scales);
    const __m256i hm = load256(p), m2 = _mm256_set1_epi8(3), four = _mm256_set1_epi8(4);
#pragma GCC unroll 2
    for (int h = 0; h < 2; ++h) {
      const __m256i raw = load256(p + 32 + 32 * h);
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const int g = 4 * h + s;
        const __m256i hb = bit_of_bytes(hm, g);  // 1: keep q, 0: q - 4
        const __m256i q = _mm256_sub_epi8(_mm256_and_si256(_mm256_srli_epi16(raw, 2 * s), m2),
                                          _mm256_andnot_si256(_mm256_slli_epi16(hb, 2), four));
        const __m128i a = _mm256_castsi256_si128(q), b = _mm256_extracti128_si256(q, 1);
        const __m256 d0 = _mm256_set1_ps(d_all * static_cast<float>(scales[2 * g] - 32));
        const __m256 d1 = _mm256_set1_ps(d_all * static_cast<float>(scales[2 * g + 1] - 32));
        emit(32 * g, _mm256_mul_ps(d0, cvt(i8lo(a))), _mm256_mul_ps(d0, cvt(i8hi(a))), _mm256_mul_ps(d1, cvt(i8lo(b))),
             _mm256_mul_ps(d1, cvt(i8hi(b))));
      }
    }
  }
};

inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

/// Rows [r0, r1) of W against N activation rows; 4 independent FMA chains per row for N <= 2,
/// 2 for N >= 3 (16 ymm registers).
template <class D, int N>
void rows(const std::uint8_t* base, std::size_t rb, int r0, int r1, const float* X, int in, float* Y, int ldy) {
  constexpr int A = N <= 2 ? 4 : 2;
  const int nb = in / D::QK;
  for (int o = r0; o < r1; ++o) {
    const std::uint8_t* row = base + static_cast<std::size_t>(o) * rb;
    __m256 acc[N][A];
    for (int i = 0; i < N; ++i)
      for (int s = 0; s < A; ++s) acc[i][s] = _mm256_setzero_ps();
    for (int b = 0; b < nb; ++b) {
      const int x0 = b * D::QK;
      prefetch_stream(row + static_cast<std::size_t>(b) * D::BYTES, D::BYTES);
      D::block(row + static_cast<std::size_t>(b) * D::BYTES, [&](int off, __m256 w0, __m256 w1, __m256 w2, __m256 w3) {
        for (int i = 0; i < N; ++i) {
          const float* x = X + static_cast<std::size_t>(i) * in + x0 + off;
          acc[i][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x), acc[i][0]);
          acc[i][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + 8), acc[i][1]);
          acc[i][2 % A] = _mm256_fmadd_ps(w2, _mm256_loadu_ps(x + 16), acc[i][2 % A]);
          acc[i][3 % A] = _mm256_fmadd_ps(w3, _mm256_loadu_ps(x + 24), acc[i][3 % A]);
        }
      });
    }
    for (int i = 0; i < N; ++i) {
      __m256 s = _mm256_add_ps(acc[i][0], acc[i][1]);
      if constexpr (A == 4) s = _mm256_add_ps(s, _mm256_add_ps(acc[i][2], acc[i][3]));
      float sum = hsum(s);
      if constexpr (D::kDense) {  // columns past the last whole group of 32
        const float* x = X + static_cast<std::size_t>(i) * in;
        for (int k = nb * D::QK; k < in; ++k) sum += D::element(row, k) * x[k];
      }
      Y[static_cast<std::size_t>(i) * ldy + o] = sum;
    }
  }
}

template <class D>
void rows_n(const std::uint8_t* base, std::size_t rb, int r0, int r1, const float* X, int n, int in, float* Y, int ldy) {
  switch (n) {
    case 1: return rows<D, 1>(base, rb, r0, r1, X, in, Y, ldy);
    case 2: return rows<D, 2>(base, rb, r0, r1, X, in, Y, ldy);
    case 3: return rows<D, 3>(base, rb, r0, r1, X, in, Y, ldy);
    default: return rows<D, 4>(base, rb, r0, r1, X, in, Y, ldy);
  }
}

}  // namespace avx2

#endif  // KVC_TYPED_DOT_AVX2

}  // namespace

void typed_rows_dot(WeightType t, const std::uint8_t* base, std::size_t rb, int r0, int r1,
                    const float* X, int n, int in, float* Y, int ldy, Isa isa) {
  if (r1 <= r0 || n <= 0) return;
#if defined(KVC_TYPED_DOT_AVX512)
  if (isa == Isa::Avx512) {
    switch (t) {
      case WeightType::F32: return rows_avx512_n<DecF32>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::F16: return rows_avx512_n<DecF16>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::BF16: return rows_avx512_n<DecBF16>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q8_0: return rows_avx512_n<DecQ8<2>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q8_1: return rows_avx512_n<DecQ8<4>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_0: return rows_avx512_n<DecQ4<false>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_1: return rows_avx512_n<DecQ4<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q5_0: return rows_avx512_n<DecQ5<false>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q5_1: return rows_avx512_n<DecQ5<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q2_K: return rows_avx512_n<DecQ2K>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q3_K: return rows_avx512_n<DecQ3K>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_K:
        switch (n) {
          case 1: return rows_q4k_avx512<1>(base, rb, r0, r1, X, in, Y, ldy);
          case 2: return rows_q4k_avx512<2>(base, rb, r0, r1, X, in, Y, ldy);
          case 3: return rows_q4k_avx512<3>(base, rb, r0, r1, X, in, Y, ldy);
          default: return rows_q4k_avx512<4>(base, rb, r0, r1, X, in, Y, ldy);
        }
      case WeightType::Q5_K: return rows_avx512_n<DecQ45K<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q6_K: return rows_avx512_n<DecQ6K>(base, rb, r0, r1, X, n, in, Y, ldy);
    }
  }
#endif
#if defined(KVC_TYPED_DOT_AVX2)
  if (isa >= Isa::Avx2) {
    switch (t) {
      case WeightType::F32: return avx2::rows_n<avx2::DecF32>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::F16: return avx2::rows_n<avx2::DecF16>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::BF16: return avx2::rows_n<avx2::DecBF16>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q8_0: return avx2::rows_n<avx2::DecQ8<2>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q8_1: return avx2::rows_n<avx2::DecQ8<4>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_0: return avx2::rows_n<avx2::DecQ4<false>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_1: return avx2::rows_n<avx2::DecQ4<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q5_0: return avx2::rows_n<avx2::DecQ5<false>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q5_1: return avx2::rows_n<avx2::DecQ5<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q2_K: return avx2::rows_n<avx2::DecQ2K>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q3_K: return avx2::rows_n<avx2::DecQ3K>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q4_K: return avx2::rows_n<avx2::DecQ45K<false>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q5_K: return avx2::rows_n<avx2::DecQ45K<true>>(base, rb, r0, r1, X, n, in, Y, ldy);
      case WeightType::Q6_K: return avx2::rows_n<avx2::DecQ6K>(base, rb, r0, r1, X, n, in, Y, ldy);
    }
  }
#endif
  (void)isa;
  if (t == WeightType::F32) {  // no decode needed: dot the stored row directly
    for (int o = r0; o < r1; ++o) {
      const float* w = reinterpret_cast<const float*>(base + static_cast<std::size_t>(o) * rb);
      for (int i = 0; i < n; ++i) {
        const float* x = X + static_cast<std::size_t>(i) * in;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int k = 0; k < in; ++k) acc += x[k] * w[k];
        Y[static_cast<std::size_t>(i) * ldy + o] = acc;
      }
    }
    return;
  }
  rows_dot_decoded(t, base, rb, r0, r1, X, n, in, Y, ldy);
}

}  // namespace kvcompact
