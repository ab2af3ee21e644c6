// The packed sub-block scales of ggml's K-quants, shared by the dequantizer (core/dequant.cpp) and
// the fused and int8 dot kernels (ops/typed_dot.cpp, ops/quant_dot.cpp). Layouts: ggml-quants.c.
#pragma once
#include <cstdint>
#include <cstring>

namespace kvcompact {

/// ggml get_scale_min_k4 (Q4_K, Q5_K): sub-block j's (0..7) 6-bit scale and min from the 12 packed
/// bytes `q`.
inline void scale_min_k4(int j, const std::uint8_t* q, int& sc, int& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

/// Q3_K: the 16 6-bit sub-block scales, unpacked from the 12 bytes at `packed` as ggml's
/// dequantize_row_q3_K does; still biased by 32 (subtract 32 for the signed scale).
inline void unpack_q3k_scales(const std::uint8_t* packed, std::int8_t scales[16]) {
  std::uint32_t aux[4];
  std::memcpy(aux, packed, 12);
  const std::uint32_t kmask1 = 0x03030303, kmask2 = 0x0f0f0f0f, tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(scales, aux, 16);
}

}  // namespace kvcompact
