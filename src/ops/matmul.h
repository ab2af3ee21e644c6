// Dense projections y = W x for a batch of rows (the linear layers of the decoder).
#pragma once

#include "core/weight_matrix.h"

namespace kvcompact {

/// Y = X W^T for row-major float32 matrices, via OpenBLAS cblas_sgemm (threads itself; do not call
/// from inside an OpenMP parallel region).
/// X: [n, in], W: [out, in] (the W[out, in] layout of ModelWeights), Y: [n, out] (overwritten;
/// must not alias X or W). n == 0 is a no-op. Reference twin: matmul_wt_ref (ops/reference.h).
void matmul_wt(const float* X, const float* W, float* Y, int n, int in, int out);

/// How the typed matmul treats activations for ggml-quantised weights.
///   Exact: float32 activations against the exactly decoded weights (the default; logits equal a
///     float32 evaluation of the dequantised model up to the order of float32 additions).
///   FastQuant: for n <= 4 rows and Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 / Q4_K weights, activations are
///     quantised to int8 blocks and multiplied with integer dot products as llama.cpp does
///     (ops/quant_dot.h); for n > 4 rows and any weight type but F32, on CPUs with AMX-BF16,
///     activations and decoded weights are rounded to bfloat16 and multiplied on the AMX tiles with
///     float32 accumulation (ops/bf16_gemm.h). Other cases stay exact.
enum class MatmulMode { Exact, FastQuant };

/// The process-wide mode: Exact, or FastQuant when the environment variable KVC_FAST_QUANT=1 is
/// set at start-up or after set_matmul_mode(FastQuant) (the CLI's --fast-quant).
MatmulMode matmul_mode();
/// Sets the process-wide mode (not while a forward runs on another thread).
void set_matmul_mode(MatmulMode mode);

/// Y = X W^T for a typed weight matrix W [out, in] (WeightMatrix; an owned float32 matrix has
/// out*in values). X: [n, in], Y: [n, out].
/// n <= 4 (token-by-token decoding): the rows of W are split over the OpenMP threads and each is
/// streamed once through a fused decode-and-dot kernel against the n rows of X (ops/typed_dot.h,
/// AVX-512 where kernel_isa() allows, else decode to a per-thread buffer and dot); float32
/// accumulation. With MatmulMode::FastQuant and a supported type: int8 dots (ops/quant_dot.h).
/// n > 4: F32 through cblas_sgemm directly; with MatmulMode::FastQuant and AMX, bf16_matmul_wt;
/// with FastQuant, a supported type and int8_prefill_preferred(), matmul_wt_int8; otherwise the
/// other types (F16, BF16, ggml blocks) in blocks of W's rows decoded to float32 into a thread-local
/// scratch buffer (about 16 MiB, rows decoded in parallel), each block multiplied
/// with sgemm, so W stays in its storage type.
/// Throws Error when W's shape (or size) is not [out, in]. Reference twin: matmul_wt_typed_ref.
void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

/// The fast mode's int8 prefill GEMM: X [n, in] quantised once to the activation blocks W's type
/// pairs with (quantize_rows), then tiles of W's rows (about 32 KiB) x groups of 4 rows of X through
/// quant_rows_dot at kernel_isa(); Y: [n, out]. Throws Error for a W type without int8 dot kernels
/// (quant_dot_supported) or of another shape. Reference twin: quant_rows_dot one row at a time.
void matmul_wt_int8(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

/// Whether the fast mode's prefill (n > 4, no AMX) takes matmul_wt_int8: at the AVX-512 VNNI level
/// (vpdpbusd) only. With AVX2's maddubs it lost to decoding + float32 sgemm end to end on a 2-core
/// Zen 3 (pp512, 2 threads, bench/vs_llama_cpp.py: SmolLM2 Q4_1 280 vs 442 tokens/s, Gemma 3 270M
/// Q4_K_M 286 vs 408), so there the fast mode's prefill is the exact one.
bool int8_prefill_preferred();

/// Plain reference of the typed matmul: every element decoded by weight_element_ref, double
/// accumulation. Same shapes and errors as matmul_wt.
void matmul_wt_typed_ref(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

}  // namespace kvcompact
