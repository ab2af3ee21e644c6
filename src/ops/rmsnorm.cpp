#include "ops/rmsnorm.h"

#include <cmath>

namespace kvcompact {

void rmsnorm(const float* x, const float* weight, float* out, int n, int dim, float eps) {
#pragma omp parallel for schedule(static) if (static_cast<long>(n) * dim >= (1L << 16))
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<long>(r) * dim;
    float* yr = out + static_cast<long>(r) * dim;
    float ss = 0.0f;
#pragma omp simd reduction(+ : ss)
    for (int i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
#pragma omp simd
    for (int i = 0; i < dim; ++i) yr[i] = weight[i] * (scale * xr[i]);
  }
}

}  // namespace kvcompact
