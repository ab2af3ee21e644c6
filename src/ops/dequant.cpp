#include "ops/dequant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include <fmt/format.h>

#include "io/error.h"
#include "ops/half.h"

namespace kvcompact {

namespace {
inline std::uint16_t load_u16(const std::uint8_t* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
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
    case WeightType::Q8_0:
      for (std::int64_t b = 0; b < cols / 32; ++b) {
        const std::uint8_t* blk = row + 34 * b;
        const float d = f16_to_f32(load_u16(blk));
        const std::int8_t* q = reinterpret_cast<const std::int8_t*>(blk + 2);
        float* o = out + 32 * b;
#pragma omp simd
        for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(q[j]) * d;
      }
      return;
    case WeightType::Q4_0:
      for (std::int64_t b = 0; b < cols / 32; ++b) {
        const std::uint8_t* blk = row + 18 * b;
        const float d = f16_to_f32(load_u16(blk));
        const std::uint8_t* qs = blk + 2;
        float* o = out + 32 * b;
#pragma omp simd
        for (int j = 0; j < 16; ++j) {
          o[j] = static_cast<float>((qs[j] & 0x0F) - 8) * d;
          o[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
        }
      }
      return;
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

float weight_element_ref(const WeightMatrix& W, std::int64_t r, std::int64_t c, std::int64_t cols) {
  const std::uint8_t* base = W.bytes();
  const std::size_t idx = static_cast<std::size_t>(r) * static_cast<std::size_t>(cols) + static_cast<std::size_t>(c);
  switch (W.type()) {
    case WeightType::F32: {
      float v;
      std::memcpy(&v, base + 4 * idx, 4);
      return v;
    }
    case WeightType::F16: {
      // binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
      const unsigned h = load_u16(base + 2 * idx);
      const int sign = (h >> 15) ? -1 : 1;
      const int e = (h >> 10) & 31;
      const int m = h & 1023;
      if (e == 0) return static_cast<float>(sign * std::ldexp(static_cast<double>(m), -24));
      if (e == 31) return m ? NAN : sign * INFINITY;
      return static_cast<float>(sign * std::ldexp(1.0 + m / 1024.0, e - 15));
    }
    case WeightType::BF16: {
      const std::uint32_t bits = static_cast<std::uint32_t>(load_u16(base + 2 * idx)) << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      return v;
    }
    case WeightType::Q8_0:
    case WeightType::Q4_0: {
      const bool q8 = W.type() == WeightType::Q8_0;
      const std::size_t block_bytes = q8 ? 34 : 18;
      const std::uint8_t* blk = base + static_cast<std::size_t>(r) * (static_cast<std::size_t>(cols) / 32) * block_bytes +
                                static_cast<std::size_t>(c / 32) * block_bytes;
      WeightMatrix scale = WeightMatrix::view(WeightType::F16, blk, 1, 1);
      const double d = weight_element_ref(scale, 0, 0, 1);
      const int j = static_cast<int>(c % 32);
      if (q8) return static_cast<float>(static_cast<std::int8_t>(blk[2 + j]) * d);
      const int nib = j < 16 ? (blk[2 + j] & 0x0F) : (blk[2 + j - 16] >> 4);
      return static_cast<float>((nib - 8) * d);
    }
  }
  return NAN;
}

}  // namespace kvcompact
