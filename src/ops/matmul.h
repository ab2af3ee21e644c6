// Dense projections y = W x for a batch of rows (the linear layers of the decoder).
#pragma once

#include "model/weight_matrix.h"

namespace kvcompact {

/// Y = X W^T for row-major float32 matrices, via OpenBLAS cblas_sgemm (threads itself; do not call
/// from inside an OpenMP parallel region).
/// X: [n, in], W: [out, in] (the W[out, in] layout of ModelWeights), Y: [n, out] (overwritten;
/// must not alias X or W). n == 0 is a no-op. Reference twin: matmul_wt_ref (ops/reference.h).
void matmul_wt(const float* X, const float* W, float* Y, int n, int in, int out);

/// Y = X W^T for a typed weight matrix W [out, in] (WeightMatrix; an owned float32 matrix has
/// out*in values). F32: cblas_sgemm directly. Other types (F16, BF16, ggml blocks), n > 4: blocks
/// of W's rows are decoded to float32 into a thread-local scratch buffer (about 4 MiB, rows decoded
/// in parallel) and each block multiplied with sgemm, so W stays in its storage type; n <= 4
/// (token-by-token decoding): each row of W is decoded into a small per-thread buffer and dotted
/// with the rows of X (float accumulation, rows in parallel). X: [n, in], Y: [n, out].
/// Throws Error when W's shape (or size) is not [out, in]. Reference twin: matmul_wt_typed_ref.
void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

/// Plain reference of the typed matmul: every element decoded by weight_element_ref, double
/// accumulation. Same shapes and errors as matmul_wt.
void matmul_wt_typed_ref(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out);

}  // namespace kvcompact
