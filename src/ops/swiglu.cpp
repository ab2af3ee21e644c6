#include "ops/swiglu.h"

#include <cmath>

namespace kvcompact {

void swiglu(float* gate, const float* up, long n) {
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
  for (long i = 0; i < n; ++i) {
    const float v = gate[i];
    gate[i] = v * (1.0f / (1.0f + std::exp(-v))) * up[i];
  }
}

}  // namespace kvcompact
