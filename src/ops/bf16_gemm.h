// Prefill matmul in bfloat16 on Intel AMX tiles (tdpbf16ps): the fast-mode (--fast-quant) path for
// many rows of activations against typed weights. Weights and activations are rounded to bfloat16
// (8 significant bits, round to nearest even); the tiles add pairs of exact bf16 products into
// float32 accumulators. About as exact as running the model in bfloat16 (relative error of a dot
// product ~ 2^-8 / sqrt(terms) for random signs). llama.cpp's prefill likewise rounds activations
// (to bf16 for BF16 weights, to int8 blocks for quantised ones).
#pragma once

#include "core/weight_matrix.h"

namespace kvcompact {

/// Whether bf16_matmul_wt runs on this process: the build targets AMX-TILE, AMX-BF16 and AVX-512
/// BF16 (e.g. -march=native on a CPU that has them, Linux), cpuid reports AMX-BF16 and AMX-TILE,
/// Linux granted the tile state (arch_prctl, asked once per process), and kernel_isa() is Avx512
/// (KVC_ISA=avx2 or scalar turns it off, which is how tests force the fallback).
bool bf16_matmul_available();

/// Y = bf16(X) bf16(W)^T with float32 accumulation. X: [n, in] float32, W: [out, in] of any weight
/// type (rows decoded by dequantize_row, then rounded to bf16), Y: [n, out] (overwritten).
/// in must be even. Threads over blocks of W's rows (OpenMP; call outside a parallel region).
/// Throws Error when !bf16_matmul_available() or in is odd. Reference: matmul_wt_typed_ref (the
/// difference is the bf16 rounding of both operands).
void bf16_matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

}  // namespace kvcompact
