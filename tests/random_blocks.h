// Random typed weight matrices for kernel tests: random bytes with finite, small f16 scales.
#pragma once

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/weight_matrix.h"
#include "core/half.h"

namespace kvcompact {

/// Random bytes of `rows` x `cols` elements of a block type with finite f16 scales in [0.002, 0.02]
/// (F16 / BF16: values of uniform(-1, 1)).
inline std::vector<std::uint8_t> random_blocks(WeightType t, int rows, int cols, std::mt19937& rng) {
  std::vector<std::uint8_t> b(weight_row_bytes(t, cols) * static_cast<std::size_t>(rows));
  std::uniform_int_distribution<int> byte(0, 255);
  for (auto& x : b) x = static_cast<std::uint8_t>(byte(rng));
  if (t == WeightType::F16 || t == WeightType::BF16) {
    std::uniform_real_distribution<float> u(-1, 1);
    for (std::size_t i = 0; i < b.size(); i += 2) {
      const std::uint16_t h = t == WeightType::F16 ? f32_to_f16(u(rng)) : f32_to_bf16(u(rng));
      std::memcpy(&b[i], &h, 2);
    }
    return b;
  }
  std::vector<std::size_t> scale_at;  // f16 fields of a block (ggml-common.h)
  switch (t) {
    case WeightType::Q8_0: case WeightType::Q4_0: case WeightType::Q5_0: scale_at = {0}; break;
    case WeightType::Q4_1: case WeightType::Q5_1: case WeightType::Q8_1: case WeightType::Q4_K:
    case WeightType::Q5_K: scale_at = {0, 2}; break;
    case WeightType::Q2_K: scale_at = {80, 82}; break;
    case WeightType::Q3_K: scale_at = {108}; break;
    case WeightType::Q6_K: scale_at = {208}; break;
    default: break;
  }
  std::uniform_real_distribution<float> s(0.002f, 0.02f);
  const std::size_t bb = weight_block_bytes(t);
  for (std::size_t blk = 0; blk < b.size() / bb; ++blk)
    for (std::size_t off : scale_at) {
      const std::uint16_t h = f32_to_f16(s(rng));
      std::memcpy(&b[blk * bb + off], &h, 2);
    }
  return b;
}

}  // namespace kvcompact
