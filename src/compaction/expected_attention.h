// ExpectedAttention (Devoto et al. 2025, kvpress's ExpectedAttentionPress): score each key by the
// attention that future queries are expected to give it, modelling those queries as a Gaussian
// fitted to the context's own queries (before RoPE) and rotated by the mean RoPE rotation of the
// next n_future positions; the first n_sink keys are always kept.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"

namespace kvcompact {

/// Options (defaults as kvpress 0.5.5).
struct ExpectedAttentionOptions {
  int n_future = 512;        ///< future positions T .. T + n_future - 1 averaged over, >= 1
  int n_sink = 4;            ///< first keys always kept (and left out of the statistics), >= 0
  bool use_covariance = true;
  bool use_vnorm = true;     ///< multiply by ||v_j|| (after adding epsilon)
  double epsilon = 0.0;
  bool operator==(const ExpectedAttentionOptions&) const = default;
};

/// Scores [T]. With Q_h the pre-RoPE context queries of query head h at positions n_sink..T-1
/// (the context queries un-rotated with in.rope_inv_freq), mu_h their mean and S_h their covariance
/// (divided by T - n_sink), R the mean over positions p in [T, T + n_future) of the RoPE rotation
/// at p: for key j >= n_sink, z_hj = (R mu_h) . k_j / sqrt(d) + k_j^T (R S_h R^T) k_j / (2d),
/// score_j = (mean_h softmax_j(z_h)_j + epsilon) * ||v_j||; keys j < n_sink get max + 1.
/// Throws Error when the context queries or the RoPE frequencies are missing, T <= n_sink, or on
/// bad input / options.
std::vector<double> expected_attention_scores(const HeadCompactionInput& in, const ExpectedAttentionOptions& options);

/// Keeps the t entries with the highest expected_attention_scores. Throws as that, and unless 0 <= t <= T.
CompactedHead compact_expected_attention(const HeadCompactionInput& in, int t, const ExpectedAttentionOptions& options);

}  // namespace kvcompact
