// The reference backend: the plain scalar twins of the CPU kernels (ops/reference.h), one thread.
#include <cstdint>

#include "core/dequant.h"
#include "model/backend.h"
#include "ops/matmul.h"
#include "ops/reference.h"

namespace kvcompact {

namespace {

class ReferenceBackend final : public Backend {
 public:
  std::string_view name() const override { return "reference"; }
  void rmsnorm(const float* x, const float* weight, float* out, int n, int dim, float eps) const override {
    rmsnorm_ref(x, weight, out, n, dim, eps);
  }
  void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) const override {
    matmul_wt_typed_ref(X, W, Y, n, in, out);
  }
  void weight_row(const WeightMatrix& W, int r, int cols, float* out) const override {
    for (int c = 0; c < cols; ++c) out[c] = weight_element_ref(W, r, c, cols);
  }
  void rope(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
            RopeStyle style) const override {
    apply_rope_ref(x, n, n_heads, head_dim, cos, sin, style);
  }
  void attention(const float* q, int n, int n_heads, int n_kv_heads, int head_dim, const AttentionHeadView* heads,
                 float* out) const override {
    causal_attention_ref(q, n, n_heads, n_kv_heads, head_dim, heads, out);
  }
  void gated_activation(MlpKind kind, float* gate, const float* up, long n) const override {
    if (kind == MlpKind::GeGLUTanh)
      geglu_tanh_ref(gate, up, n);
    else
      swiglu_ref(gate, up, n);
  }
};

}  // namespace

const Backend& reference_backend() {
  static const ReferenceBackend backend;
  return backend;
}

}  // namespace kvcompact
