#include "core/dequant.h"
#include "core/kquant_scales.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "core/half.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace kvcompact {

namespace {
inline std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// ---- Fast path: one block of a quantised row -> float32, loops shaped after ggml's
// dequantize_row_* so that the compiler vectorises them. Every product in these formats is exact
// in float32 (at most 11 + 7 + 6 significant bits), so the single rounding of the final add/sub
// makes the result independent of FMA contraction and equal to ggml's. ----

void block_q8_0(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk));
  const std::int8_t* q = reinterpret_cast<const std::int8_t*>(blk + 2);
#pragma omp simd
  for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(q[j]) * d;
}

void block_q8_1(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk));  // blk + 2: s = d * sum(q), not needed to decode
  const std::int8_t* q = reinterpret_cast<const std::int8_t*>(blk + 4);
#pragma omp simd
  for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(q[j]) * d;
}

#if defined(__AVX2__)
// 32 elements of a Q4_0 / Q4_1 block: the 16 bytes' low nibbles are elements 0-15, high nibbles
// 16-31; each group of 8 is widened to int32, offset, converted and scaled: Q4_0 (kMin false):
// o = (q - 8) * d, Q4_1: o = q * d + m (the same operations as the scalar code).
template <bool kMin>
inline void nibbles32_avx2(const std::uint8_t* qs, float d, float m, float* o) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(raw, mask), hi = _mm_and_si128(_mm_srli_epi16(raw, 4), mask);
  const __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m);
  const __m256i eight = _mm256_set1_epi32(8);
  auto put8 = [&](__m128i bytes, float* dst) {
    const __m256i qi = _mm256_cvtepu8_epi32(bytes);
    if constexpr (kMin) {
      _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_mul_ps(_mm256_cvtepi32_ps(qi), vd), vm));
    } else {
      _mm256_storeu_ps(dst, _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(qi, eight)), vd));
    }
  };
  put8(lo, o);
  put8(_mm_srli_si128(lo, 8), o + 8);
  put8(hi, o + 16);
  put8(_mm_srli_si128(hi, 8), o + 24);
}

void block_q4_0(const std::uint8_t* blk, float* o) { nibbles32_avx2<false>(blk + 2, f16_to_f32(load_u16(blk)), 0.0f, o); }

void block_q4_1(const std::uint8_t* blk, float* o) {
  nibbles32_avx2<true>(blk + 4, f16_to_f32(load_u16(blk)), f16_to_f32(load_u16(blk + 2)), o);
}
#else
void block_q4_0(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk));
  const std::uint8_t* qs = blk + 2;
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    o[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
    o[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

void block_q4_1(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk)), m = f16_to_f32(load_u16(blk + 2));
  const std::uint8_t* qs = blk + 4;
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    o[j] = static_cast<float>(qs[j] & 0x0F) * d + m;
    o[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

#endif

void block_q5_0(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk));
  const std::uint32_t qh = load_u32(blk + 2);
  const std::uint8_t* qs = blk + 6;
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10), h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    o[j] = static_cast<float>(((qs[j] & 0x0F) | h0) - 16) * d;
    o[j + 16] = static_cast<float>(((qs[j] >> 4) | h1) - 16) * d;
  }
}

void block_q5_1(const std::uint8_t* blk, float* o) {
  const float d = f16_to_f32(load_u16(blk)), m = f16_to_f32(load_u16(blk + 2));
  const std::uint32_t qh = load_u32(blk + 4);
  const std::uint8_t* qs = blk + 8;
#pragma omp simd
  for (int j = 0; j < 16; ++j) {
    const int h0 = static_cast<int>(((qh >> j) << 4) & 0x10), h1 = static_cast<int>((qh >> (j + 12)) & 0x10);
    o[j] = static_cast<float>((qs[j] & 0x0F) | h0) * d + m;
    o[j + 16] = static_cast<float>((qs[j] >> 4) | h1) * d + m;
  }
}

// ggml block_q2_K: scales[16] | qs[64] | d | dmin.
void block_q2_k(const std::uint8_t* blk, float* y) {
  const std::uint8_t* scales = blk;
  const std::uint8_t* q = blk + 16;
  const float d = f16_to_f32(load_u16(blk + 80)), dmin = f16_to_f32(load_u16(blk + 82));
  int is = 0;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2) {
      for (int g = 0; g < 2; ++g, ++is, y += 16) {
        const float dl = d * static_cast<float>(scales[is] & 0xF), ml = dmin * static_cast<float>(scales[is] >> 4);
        const std::uint8_t* qg = q + 16 * g;
#pragma omp simd
        for (int l = 0; l < 16; ++l) y[l] = dl * static_cast<float>((qg[l] >> shift) & 3) - ml;
      }
    }
  }
}

// ggml block_q3_K: hmask[32] | qs[64] | scales[12] | d.
void block_q3_k(const std::uint8_t* blk, float* y) {
  const std::uint8_t* hm = blk;
  const std::uint8_t* q = blk + 32;
  const std::uint8_t* s = blk + 96;
  const float d_all = f16_to_f32(load_u16(blk + 108));
  std::int8_t scales[16];
  unpack_q3k_scales(s, scales);
  int is = 0;
  std::uint8_t m = 1;
  for (int n = 0; n < 256; n += 128, q += 32) {
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<std::uint8_t>(m << 1)) {
      for (int g = 0; g < 2; ++g, ++is, y += 16) {
        const float dl = d_all * static_cast<float>(scales[is] - 32);
        const std::uint8_t* qg = q + 16 * g;
        const std::uint8_t* hg = hm + 16 * g;
#pragma omp simd
        for (int l = 0; l < 16; ++l)
          y[l] = dl * static_cast<float>(((qg[l] >> shift) & 3) - ((hg[l] & m) ? 0 : 4));
      }
    }
  }
}

// ggml block_q4_K: d | dmin | scales[12] | qs[128].
void block_q4_k(const std::uint8_t* blk, float* y) {
  const float d = f16_to_f32(load_u16(blk)), dmin = f16_to_f32(load_u16(blk + 2));
  const std::uint8_t* scales = blk + 4;
  const std::uint8_t* q = blk + 16;
  for (int is = 0; is < 8; is += 2, q += 32, y += 64) {
    int sc, mn;
    scale_min_k4(is, scales, sc, mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    scale_min_k4(is + 1, scales, sc, mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
#pragma omp simd
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      y[l + 32] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// ggml block_q5_K: d | dmin | scales[12] | qh[32] | qs[128].
void block_q5_k(const std::uint8_t* blk, float* y) {
  const float d = f16_to_f32(load_u16(blk)), dmin = f16_to_f32(load_u16(blk + 2));
  const std::uint8_t* scales = blk + 4;
  const std::uint8_t* qh = blk + 16;
  const std::uint8_t* ql = blk + 48;
  int u1 = 1, u2 = 2;
  for (int is = 0; is < 8; is += 2, ql += 32, y += 64, u1 <<= 2, u2 <<= 2) {
    int sc, mn;
    scale_min_k4(is, scales, sc, mn);
    const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
    scale_min_k4(is + 1, scales, sc, mn);
    const float d2 = d * static_cast<float>(sc), m2 = dmin * static_cast<float>(mn);
#pragma omp simd
    for (int l = 0; l < 32; ++l) {
      y[l] = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) ? 16 : 0)) - m1;
      y[l + 32] = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

// ggml block_q6_K: ql[128] | qh[64] | int8 scales[16] | d.
void block_q6_k(const std::uint8_t* blk, float* y) {
  const std::uint8_t* ql = blk;
  const std::uint8_t* qh = blk + 128;
  const std::int8_t* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
  const float d = f16_to_f32(load_u16(blk + 208));
  for (int n = 0; n < 256; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
    float ds[8];
    for (int k = 0; k < 8; ++k) ds[k] = d * static_cast<float>(sc[k]);
    for (int half = 0; half < 2; ++half) {  // l in [16 half, 16 half + 16): scales is = half
#pragma omp simd
      for (int l = 16 * half; l < 16 * half + 16; ++l) {
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = ds[half] * static_cast<float>(q1);
        y[l + 32] = ds[half + 2] * static_cast<float>(q2);
        y[l + 64] = ds[half + 4] * static_cast<float>(q3);
        y[l + 96] = ds[half + 6] * static_cast<float>(q4);
      }
    }
  }
}

using BlockDecoder = void (*)(const std::uint8_t*, float*);

BlockDecoder block_decoder(WeightType t) {
  switch (t) {
    case WeightType::Q8_0: return block_q8_0;
    case WeightType::Q4_0: return block_q4_0;
    case WeightType::Q4_1: return block_q4_1;
    case WeightType::Q5_0: return block_q5_0;
    case WeightType::Q5_1: return block_q5_1;
    case WeightType::Q8_1: return block_q8_1;
    case WeightType::Q2_K: return block_q2_k;
    case WeightType::Q3_K: return block_q3_k;
    case WeightType::Q4_K: return block_q4_k;
    case WeightType::Q5_K: return block_q5_k;
    case WeightType::Q6_K: return block_q6_k;
    default: return nullptr;
  }
}

}  // namespace

void dequantize_row(WeightType t, const std::uint8_t* row, float* out, std::int64_t cols) {
  switch (t) {
    case WeightType::F32:
      std::memcpy(out, row, static_cast<std::size_t>(cols) * sizeof(float));
      return;
    case WeightType::F16: {
      std::uint16_t h[64];
      for (std::int64_t c0 = 0; c0 < cols; c0 += 64) {
        const int m = static_cast<int>(std::min<std::int64_t>(64, cols - c0));
        std::memcpy(h, row + 2 * c0, 2 * static_cast<std::size_t>(m));
#pragma omp simd
        for (int j = 0; j < m; ++j) out[c0 + j] = f16_to_f32(h[j]);
      }
      return;
    }
    case WeightType::BF16: {
      std::uint16_t h[64];
      for (std::int64_t c0 = 0; c0 < cols; c0 += 64) {
        const int m = static_cast<int>(std::min<std::int64_t>(64, cols - c0));
        std::memcpy(h, row + 2 * c0, 2 * static_cast<std::size_t>(m));
#pragma omp simd
        for (int j = 0; j < m; ++j) out[c0 + j] = bf16_to_f32(h[j]);
      }
      return;
    }
    default: {
      const BlockDecoder dec = block_decoder(t);
      const std::int64_t qk = weight_block_elements(t);
      const std::size_t bytes = weight_block_bytes(t);
      for (std::int64_t b = 0; b < cols / qk; ++b) dec(row + static_cast<std::size_t>(b) * bytes, out + b * qk);
      return;
    }
  }
}

void weight_row_f32(const WeightMatrix& W, std::int64_t r, std::int64_t cols, float* out) {
  const std::int64_t rows = W.is_view() ? W.rows() : (cols > 0 ? static_cast<std::int64_t>(W.size()) / cols : 0);
  if (W.is_view() && W.cols() != cols)
    throw Error(fmt::format("weight matrix: row of {} columns requested from a {} x {} matrix", cols,
                            W.rows(), W.cols()));
  if (r < 0 || r >= rows)
    throw Error(fmt::format("weight matrix: row {} outside a matrix of {} rows", r, rows));
  const std::size_t rb = weight_row_bytes(W.type(), cols);
  dequantize_row(W.type(), W.bytes() + static_cast<std::size_t>(r) * rb, out, cols);
}

namespace {

// ---- Plain reference: each element decoded on its own from the format definitions (WeightType's
// comment, written from ggml-common.h), in double, then rounded once to float. ----

/// binary16 at p: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
double half_ref(const std::uint8_t* p) {
  const unsigned h = p[0] | (p[1] << 8);
  const int sign = (h >> 15) ? -1 : 1;
  const int e = (h >> 10) & 31;
  const int m = h & 1023;
  if (e == 0) return sign * std::ldexp(static_cast<double>(m), -24);
  if (e == 31) return m ? NAN : sign * INFINITY;
  return sign * std::ldexp(1.0 + m / 1024.0, e - 15);
}

int bit(const std::uint8_t* bytes, int i) { return (bytes[i / 8] >> (i % 8)) & 1; }

/// 4-bit value j of a 32-element block whose 16 bytes pack j (low nibble) and j + 16 (high).
int nibble32(const std::uint8_t* qs, int j) { return j < 16 ? qs[j] % 16 : qs[j - 16] / 16; }

/// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes: sub-blocks 0-3
/// in the low 6 bits of bytes 0-3 (scale) and 4-7 (min); 4-7 in the nibbles of bytes 8-11 with
/// their top two bits in the top bits of bytes 0-3 (scale) and 4-7 (min).
void k4_scale_min_ref(const std::uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] % 64;
    mn = s[j + 4] % 64;
  } else {
    sc = s[j + 4] % 16 + 16 * (s[j - 4] / 64);
    mn = s[j + 4] / 16 + 16 * (s[j] / 64);
  }
}

/// Q3_K: 6-bit scale i (0..15): low 4 bits from the nibbles of bytes 0-7 (i < 8: low nibble of
/// byte i, else high nibble of byte i - 8), high 2 bits from bytes 8-11 (2 bits of byte 8 + i % 4
/// at position 2 (i / 4)).
int q3k_scale_ref(const std::uint8_t* s, int i) {
  const int lo = i < 8 ? s[i] % 16 : s[i - 8] / 16;
  const int hi = (s[8 + i % 4] >> (2 * (i / 4))) % 4;
  return lo + 16 * hi;
}

/// Element e (0..255) of a K-quant super-block.
double kquant_element_ref(WeightType t, const std::uint8_t* b, int e) {
  switch (t) {
    case WeightType::Q2_K: {
      const std::uint8_t sc = b[e / 16];
      const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) % 4;
      return half_ref(b + 80) * (sc % 16) * q - half_ref(b + 82) * (sc / 16);
    }
    case WeightType::Q3_K: {
      const int low = (b[32 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) % 4;
      const int high_set = (b[e % 32] >> (4 * (e / 128) + (e % 128) / 32)) % 2;
      return half_ref(b + 108) * (q3k_scale_ref(b + 96, e / 16) - 32) * (low - (high_set ? 0 : 4));
    }
    case WeightType::Q4_K:
    case WeightType::Q5_K: {
      const bool q5 = t == WeightType::Q5_K;
      const std::uint8_t* qs = b + (q5 ? 48 : 16);
      const std::uint8_t byte = qs[32 * (e / 64) + e % 32];
      int q = e % 64 < 32 ? byte % 16 : byte / 16;
      if (q5) q += 16 * ((b[16 + e % 32] >> (e / 32)) % 2);
      int sc, mn;
      k4_scale_min_ref(b + 4, e / 32, sc, mn);
      return half_ref(b) * sc * q - half_ref(b + 2) * mn;
    }
    case WeightType::Q6_K: {
      // Per half of 128: ql bytes 64 h + l (quarters 0, 2: low nibble; 1, 3: of byte + 32 ... see
      // ggml dequantize_row_q6_K), qh byte 32 h + l holds the 2 high bits of quarter k at 2k.
      const int h = e / 128, k = (e % 128) / 32, l = e % 32;
      const std::uint8_t lbyte = b[64 * h + 32 * (k % 2) + l];
      const int low = k < 2 ? lbyte % 16 : lbyte / 16;
      const int high = (b[128 + 32 * h + l] >> (2 * k)) % 4;
      const int sc = static_cast<std::int8_t>(b[192 + e / 16]);
      return half_ref(b + 208) * sc * (low + 16 * high - 32);
    }
    default: return NAN;
  }
}

}  // namespace

float weight_element_ref(const WeightMatrix& W, std::int64_t r, std::int64_t c, std::int64_t cols) {
  const std::uint8_t* base = W.bytes();
  const std::size_t idx = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
  // Block geometry (ggml-common.h): elements and bytes per block.
  std::size_t qk = 32, bytes = 0;
  switch (W.type()) {
    case WeightType::F32: {
      float v;
      std::memcpy(&v, base + 4 * idx, 4);
      return v;
    }
    case WeightType::F16: return static_cast<float>(half_ref(base + 2 * idx));
    case WeightType::BF16: {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(base + 2 * idx)) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    case WeightType::Q8_0: bytes = 2 + 32; break;
    case WeightType::Q4_0: bytes = 2 + 16; break;
    case WeightType::Q4_1: bytes = 2 + 2 + 16; break;
    case WeightType::Q5_0: bytes = 2 + 4 + 16; break;
    case WeightType::Q5_1: bytes = 2 + 2 + 4 + 16; break;
    case WeightType::Q8_1: bytes = 2 + 2 + 32; break;
    case WeightType::Q2_K: qk = 256, bytes = 16 + 64 + 2 + 2; break;
    case WeightType::Q3_K: qk = 256, bytes = 32 + 64 + 12 + 2; break;
    case WeightType::Q4_K: qk = 256, bytes = 2 + 2 + 12 + 128; break;
    case WeightType::Q5_K: qk = 256, bytes = 2 + 2 + 12 + 32 + 128; break;
    case WeightType::Q6_K: qk = 256, bytes = 128 + 64 + 16 + 2; break;
  }
  const std::size_t blocks_per_row = static_cast<std::size_t>(cols) / qk;
  const std::uint8_t* b = base + (static_cast<std::size_t>(r) * blocks_per_row + static_cast<std::size_t>(c) / qk) * bytes;
  const int j = static_cast<int>(static_cast<std::size_t>(c) % qk);
  double v = NAN;
  switch (W.type()) {
    case WeightType::Q8_0: v = static_cast<std::int8_t>(b[2 + j]) * half_ref(b); break;
    case WeightType::Q8_1: v = static_cast<std::int8_t>(b[4 + j]) * half_ref(b); break;
    case WeightType::Q4_0: v = (nibble32(b + 2, j) - 8) * half_ref(b); break;
    case WeightType::Q4_1: v = nibble32(b + 4, j) * half_ref(b) + half_ref(b + 2); break;
    case WeightType::Q5_0: v = (nibble32(b + 6, j) + 16 * bit(b + 2, j) - 16) * half_ref(b); break;
    case WeightType::Q5_1: v = (nibble32(b + 8, j) + 16 * bit(b + 4, j)) * half_ref(b) + half_ref(b + 2); break;
    default: v = kquant_element_ref(W.type(), b, j); break;
  }
  return static_cast<float>(v);
}

}  // namespace kvcompact
