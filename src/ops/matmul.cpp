#include "ops/matmul.h"

#include <cblas.h>

namespace kvcompact {

void matmul_wt(const float* X, const float* W, float* Y, int n, int in, int out) {
  if (n <= 0 || out <= 0) return;
  // Row-major: Y[n, out] = X[n, in] * W[out, in]^T.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, X, in, W, in, 0.0f, Y,
              out);
}

}  // namespace kvcompact
