// The default backend: the fast kernels of src/ops.
#include "core/dequant.h"
#include "model/backend.h"
#include "ops/attention.h"
#include "ops/geglu.h"
#include "ops/matmul.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/swiglu.h"

namespace kvcompact {

namespace {

class CpuBackend final : public Backend {
 public:
  std::string_view name() const override { return "cpu"; }
  void rmsnorm(const float* x, const float* weight, float* out, int n, int dim, float eps) const override {
    kvcompact::rmsnorm(x, weight, out, n, dim, eps);
  }
  void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) const override {
    kvcompact::matmul_wt(X, W, Y, n, in, out);
  }
  void weight_row(const WeightMatrix& W, int r, int cols, float* out) const override {
    weight_row_f32(W, r, cols, out);
  }
  void rope(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
            RopeStyle style) const override {
    apply_rope(x, n, n_heads, head_dim, cos, sin, style);
  }
  void attention(const float* q, int n, int n_heads, int n_kv_heads, int head_dim, const AttentionHeadView* heads,
                 float* out) const override {
    causal_attention(q, n, n_heads, n_kv_heads, head_dim, heads, out);
  }
  void gated_activation(MlpKind kind, float* gate, const float* up, long n) const override {
    if (kind == MlpKind::GeGLUTanh)
      geglu_tanh(gate, up, n);
    else
      swiglu(gate, up, n);
  }
};

}  // namespace

const Backend& cpu_backend() {
  static const CpuBackend backend;
  return backend;
}

}  // namespace kvcompact
