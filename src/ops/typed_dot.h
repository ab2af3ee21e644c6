// Fused decode-and-dot kernels for typed weight rows against float32 activations: the decode
// (token-by-token) path of the typed matmul. Every weight element is decoded to exactly the float32
// value dequantize_row gives (ggml's dequantize_row_* arithmetic), so the results equal
// "decode the row, then dot it in float32" up to the order of the float32 additions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/weight_matrix.h"
#include "ops/isa.h"

namespace kvcompact {

/// Most activation rows one call of typed_rows_dot takes.
inline constexpr int kTypedDotMaxRows = 4;

/// Y[i * ldy + o] = sum_k W[o, k] * X[i * in + k] for rows o in [r0, r1) of a typed weight matrix
/// and activation rows i < n (1 <= n <= kTypedDotMaxRows). Row o of W starts at
/// base + o * row_bytes (row_bytes = weight_row_bytes(t, in)). Single-threaded (callers split the
/// rows over threads). isa: Avx512 runs zmm kernels and Avx2 ymm kernels (AVX2 + FMA + F16C) that
/// decode the blocks in registers, for every type; Scalar decodes each row into a small per-thread
/// buffer with dequantize_row and dots it.
/// Float32 accumulation; reference twin: matmul_wt_typed_ref (double accumulation).
void typed_rows_dot(WeightType t, const std::uint8_t* base, std::size_t row_bytes, int r0, int r1,
                    const float* X, int n, int in, float* Y, int ldy, Isa isa);

}  // namespace kvcompact
