#include "ops/geglu.h"

#include <cmath>

namespace kvcompact {

void geglu_tanh(float* gate, const float* up, long n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
#pragma omp parallel for schedule(static) if (n >= (1L << 16))
  for (long i = 0; i < n; ++i) {
    const float v = gate[i];
    gate[i] = 0.5f * v * (1.0f + std::tanh(k * (v + 0.044715f * v * v * v))) * up[i];
  }
}

}  // namespace kvcompact
