// RMSNorm (Zhang & Sennrich 2019) as used by Llama / llama2.c run.c `rmsnorm`.
#pragma once

namespace kvcompact {

/// Row-wise RMSNorm: out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight.
/// x, out: [n, dim] (out may equal x); weight: [dim]; eps > 0 (ModelConfig::norm_eps).
/// The mean of squares is accumulated in float, as llama2.c. OpenMP over rows for large inputs
/// (do not call inside a parallel region). Reference twin: rmsnorm_ref.
void rmsnorm(const float* x, const float* weight, float* out, int n, int dim, float eps);

}  // namespace kvcompact
