// The kernels a forward pass runs (model/transformer.h), behind one interface, and the activation
// workspaces the backend owns. A new backend (another ISA, a GPU) is a new file implementing
// Backend; the model code, compaction and analyses do not change.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/kv_cache.h"
#include "core/weight_matrix.h"
#include "ops/attention.h"

namespace kvcompact {

/// Activation buffers of one forward call, grow-only: a forward that fits reuses them without
/// allocating (token-at-a-time decoding allocates only on its first call).
struct ForwardWorkspace {
  std::vector<float> x, xn, q, k, v, att, proj, hb, hb2;
  std::vector<std::vector<float>> cos, sin;  ///< per distinct layer RoPE: [n, head_dim/2]
  std::vector<AttentionHeadView> views;      ///< [n_kv_heads]
};

class Backend;

/// A workspace held for the length of one forward call; given back to its backend's pool when
/// destroyed. Move-only.
class WorkspaceLease {
 public:
  WorkspaceLease(const Backend& owner, std::unique_ptr<ForwardWorkspace> ws);
  WorkspaceLease(WorkspaceLease&&) = default;
  WorkspaceLease& operator=(WorkspaceLease&&) = delete;
  ~WorkspaceLease();
  ForwardWorkspace& operator*() const { return *ws_; }
  ForwardWorkspace* operator->() const { return ws_.get(); }

 private:
  const Backend* owner_;
  std::unique_ptr<ForwardWorkspace> ws_;
};

/// The kernels of a decoder forward pass. Every kernel takes row-major float32 activations; the
/// weights stay in their storage type (WeightMatrix). Implementations: cpu_backend() (the fast
/// kernels of src/ops) and reference_backend() (their plain scalar twins, ops/reference.h).
/// The kernels are const and may run from several threads at once; the backend owns a pool of
/// ForwardWorkspaces that concurrent forward calls draw from (acquire_workspace), so no call
/// shares buffers with another and none is thread_local.
class Backend {
 public:
  virtual ~Backend() = default;
  /// Short name ("cpu", "reference") for logs and benchmarks.
  virtual std::string_view name() const = 0;
  /// Row-wise RMSNorm: out[i] = x[i] / sqrt(mean(x[i]^2) + eps) * weight; x, out: [n, dim]
  /// (out may alias x); weight: [dim].
  virtual void rmsnorm(const float* x, const float* weight, float* out, int n, int dim, float eps) const = 0;
  /// Y[n, out] = X[n, in] W^T for W [out, in] in any WeightType. Throws Error for a W of another shape.
  virtual void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) const = 0;
  /// Row r of W [rows, cols] decoded to float32: out [cols] (the embedding lookup).
  virtual void weight_row(const WeightMatrix& W, int r, int cols, float* out) const = 0;
  /// Rotates every head of x [n, n_heads * head_dim] in place by the angles cos/sin
  /// [n, head_dim/2], pairs per `style` (ops/rope.h apply_rope).
  virtual void rope(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
                    RopeStyle style) const = 0;
  /// Causal grouped-query attention of n new rows over the KV head views (ops/attention.h
  /// causal_attention): q, out [n, n_heads * head_dim]; heads [n_kv_heads].
  virtual void attention(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                         const AttentionHeadView* heads, float* out) const = 0;
  /// The gated MLP activation in place: gate[i] <- act(gate[i]) * up[i] over n values, act = SiLU
  /// (MlpKind::SwiGLU) or tanh-approximated GELU (MlpKind::GeGLUTanh).
  virtual void gated_activation(MlpKind kind, float* gate, const float* up, long n) const = 0;

  // Element-wise host steps of the forward. Each has a plain loop as its default (backend.cpp), so
  // a backend overrides only what it runs elsewhere (a device backend: all of them).

  /// Adds the bias b [m] to every row of y [n, m].
  virtual void add_bias(float* y, const float* b, int n, int m) const;
  /// x[i] += y[i] for i < count (the residual add).
  virtual void add(float* x, const float* y, long count) const;
  /// x[i] *= m for i < count.
  virtual void scale(float* x, long count, float m) const;
  /// x[i] = tanh(x[i] / cap) * cap for i < count (Gemma's final logit soft-cap).
  virtual void softcap(float* x, long count, float cap) const;
  /// RoPE angles of n rows at positions first_position, first_position + 1, ...: cos/sin
  /// [n, half] = cos/sin(position * inv_freq[j]) * factor, for inv_freq [half] (ops/rope.h).
  virtual void rope_tables(const float* inv_freq, int half, float factor, int first_position, int n,
                           float* cos, float* sin) const;
  /// Appends n new entries to head h: row i's key at k + i * ld and value at v + i * ld (head_dim
  /// floats each, beta 0, position first_position + i), growing the head by HeadCache::reserve_more.
  virtual void append_kv(HeadCache& h, const float* k, const float* v, long ld, int n, int head_dim,
                         int first_position) const;

  /// A workspace from this backend's pool (a new one when every pooled one is in use).
  WorkspaceLease acquire_workspace() const;

 private:
  friend class WorkspaceLease;
  void release_workspace(std::unique_ptr<ForwardWorkspace> ws) const;
  mutable std::mutex pool_mutex_;
  mutable std::vector<std::unique_ptr<ForwardWorkspace>> pool_;
};

/// The fast CPU kernels (OpenBLAS sgemm, AVX2/AVX-512 typed dots, OpenMP): the default backend.
const Backend& cpu_backend();
/// The plain scalar reference twins of the CPU kernels (ops/reference.h: naive loops, double
/// accumulation, one thread). Slow; for tests of the kernels and of the seam.
const Backend& reference_backend();

}  // namespace kvcompact
