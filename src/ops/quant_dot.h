// Integer dot products of ggml-quantised weight rows with activations quantised on the fly to int8
// blocks, the arithmetic of llama.cpp's CPU backend (ggml quantize_row_q8_0 / q8_1 / q8_K and
// ggml_vec_dot_{q8_0,q4_0,q5_0}_q8_0, {q4_1,q5_1}_q8_1, q{2,3,4,5,6}_K_q8_K). Faster than the float32 path
// (half the bytes per activation, 32 multiply-adds per instruction) but not exact: each activation
// is rounded to 8 bits per block (relative error up to 1/254 of the block's largest |x|), so a
// product differs from the float32 one by about that much. Opt-in (MatmulMode::FastQuant).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/weight_matrix.h"
#include "ops/isa.h"

namespace kvcompact {

/// Rows [i0, i0 + n) of a QuantizedRows, as the kernels read them (non-owning; valid while the
/// QuantizedRows lives and is not resized). s is null for Q8_K blocks.
struct QuantizedRowsView {
  const std::int8_t* q;
  const float* d;
  const float* s;
  const std::int32_t* sum;
  int n, cols;
};

/// Activation rows quantised to int8 blocks.
/// 32-element blocks (ggml block_q8_0 / block_q8_1, the AVX2 quantize_row_q8_*): amax = max |x|,
///   d = amax / 127 (stored rounded through f16), q = round-half-even(x * 127 / amax),
///   sum = sum q, s = f16(d * sum).
/// 256-element blocks (ggml block_q8_K, quantize_row_q8_K_ref): m = the x of largest |x|,
///   iscale = -127 / m, q = min(127, round-half-even(iscale * x)), d = 1 / iscale (float),
///   sum = per-16 sums of q (bsums).
struct QuantizedRows {
  int n = 0, cols = 0;
  bool k_blocks = false;          ///< Q8_K (256) instead of Q8_0/Q8_1 (32) blocks
  std::vector<std::int8_t> q;     ///< [n, cols]
  std::vector<float> d;           ///< [n, cols / block] block scales
  std::vector<float> s;           ///< [n, cols / 32] f16(d * sum) (32-element blocks only)
  std::vector<std::int32_t> sum;  ///< [n, cols / 32] sums of q; Q8_K: [n, cols / 16] bsums
  /// Rows [i0, i0 + rows) (0 <= i0, i0 + rows <= n, unchecked).
  QuantizedRowsView view(int i0, int rows) const;
};

/// Whether W of type t has an int8 dot kernel (Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K,
/// Q5_K, Q6_K).
bool quant_dot_supported(WeightType t);

/// Whether type t pairs with 256-element Q8_K activation blocks (the K-quants Q2_K...Q6_K) rather
/// than 32-element Q8_0 / Q8_1 ones.
bool quant_dot_k_blocks(WeightType t);

/// Quantises X [n, cols] into out in the activation format weight type t pairs with (Q8_K for
/// the K-quants, else 32-element blocks). cols must be a multiple of t's block (weight_row_bytes checks
/// that for W). Reference twin: itself is the reference (plain loops); kernels read its output.
void quantize_rows(WeightType t, const float* X, int n, int cols, QuantizedRows& out);

/// Y[i * ldy + o] = dot(W row o, activation row i) for o in [r0, r1), i < xq.n (<= 4), computed as
/// ggml does: per block an exact integer sum, times dx * dy in float32 (+ m * s for Q4_1 / Q5_1,
/// - dmin * dy * sum(min * bsum) for Q2_K / Q4_K / Q5_K). Base is row 0 of W, row_bytes its
/// stride (weight_row_bytes(t, xq.cols)); Y has ldy floats per activation row. Single-threaded.
/// isa: Avx512 uses vpdpbusd (VNNI) for the 32-element types and the AVX2 kernels for the
/// K-quants, Avx2 maddubs/madd (ggml's AVX2 path), Scalar plain loops (the reference of the other
/// two: same integer sums, float32 sums in another order; the K-quants' follows ggml's generic
/// ggml_vec_dot_q{2,3,5,6}_K_q8_K with signed quants).
void quant_rows_dot(WeightType t, const std::uint8_t* base, std::size_t row_bytes, int r0, int r1,
                    const QuantizedRows& xq, float* Y, int ldy, Isa isa);
/// The same over a view of up to 4 activation rows (the prefill GEMM's tiles: matmul.cpp).
void quant_rows_dot(WeightType t, const std::uint8_t* base, std::size_t row_bytes, int r0, int r1,
                    const QuantizedRowsView& xq, float* Y, int ldy, Isa isa);

}  // namespace kvcompact
