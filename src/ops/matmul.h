// Dense projections y = W x for a batch of rows (the linear layers of the decoder).
#pragma once

namespace kvcompact {

/// Y = X W^T for row-major float32 matrices, via OpenBLAS cblas_sgemm (threads itself; do not call
/// from inside an OpenMP parallel region).
/// X: [n, in], W: [out, in] (the W[out, in] layout of ModelWeights), Y: [n, out] (overwritten;
/// must not alias X or W). n == 0 is a no-op. Reference twin: matmul_wt_ref (ops/reference.h).
void matmul_wt(const float* X, const float* W, float* Y, int n, int in, int out);

}  // namespace kvcompact
