// Plain scalar reference twins of the fast kernels in src/ops (naive loops, double accumulation).
// They define what the fast kernels must compute; tests compare the two on random data.
#pragma once

#include "core/config.h"
#include "ops/attention.h"

namespace kvcompact {

/// Y[n, out] = X[n, in] W[out, in]^T by triple loop (twin of matmul_wt).
void matmul_wt_ref(const float* X, const float* W, float* Y, int n, int in, int out);

/// Row-wise RMSNorm x / sqrt(mean(x^2) + eps) * weight; x, out: [n, dim] (twin of rmsnorm).
void rmsnorm_ref(const float* x, const float* weight, float* out, int n, int dim, float eps);

/// RoPE of x: [n, n_heads*head_dim], row i at position first_position + i, angle per pair j
/// computed directly as (first_position+i) / theta^(2j/head_dim) (twin of rope_angles+apply_rope).
void rope_ref(float* x, int n, int n_heads, int head_dim, int first_position, float theta,
              RopeStyle style);

/// Rotation of x [n, n_heads*head_dim] in place by given angles cos/sin [n, head_dim/2], pairs
/// per style, in double (twin of apply_rope).
void apply_rope_ref(float* x, int n, int n_heads, int head_dim, const float* cos, const float* sin,
                    RopeStyle style);
/// In-place softmax of x: [n] (twin of softmax).
void softmax_ref(float* x, int n);

/// gate[i] <- gate[i] / (1 + exp(-gate[i])) * up[i]; gate, up: [n] (twin of swiglu).
void swiglu_ref(float* gate, const float* up, long n);

/// gate[i] <- 0.5 g (1 + tanh(sqrt(2/pi) (g + 0.044715 g^3))) * up[i], g = gate[i], in double
/// (twin of geglu_tanh).
void geglu_tanh_ref(float* gate, const float* up, long n);
/// One query row against L entries with additive bias (twin of attend_row). q, out: [head_dim].
void attend_row_ref(const float* q, const float* keys, const float* values, const float* beta,
                    int L, int head_dim, float scale, float* out);

/// Causal GQA attention, same contract as causal_attention, single-threaded naive loops.
void causal_attention_ref(const float* q, int n, int n_heads, int n_kv_heads, int head_dim,
                          const AttentionHeadView* heads, float* out);

}  // namespace kvcompact
