// Attention Matching compaction of one KV head (arXiv 2602.16284): keep t of the T keys (C1 =
// highest-attention keys), fit a per-key logit bias beta by bounded NNLS on the attention mass and
// new values C2 by least squares on the attention output, both over the reference queries.
#pragma once

#include <vector>

#include "compaction/head_attention.h"
#include "compaction/head_compaction.h"
#include "compaction/key_selection.h"
#include "compaction/nnls.h"

namespace kvcompact {

/// Options of the Attention Matching fit.
struct AttentionMatchingOptions {
  SelectionScore score = SelectionScore::Rms;  ///< key-selection score
  NnlsOptions nnls;                            ///< beta fit: iters, bounds [lo, hi] on beta
  double ls_rcond = 1e-12;  ///< C2 fit: singular values below rcond * sigma_max count as zero
};

/// Short name used by the whole-cache compaction and the CLI (compact_cache.h).
using AmOptions = AttentionMatchingOptions;

/// A prepared Attention Matching fit for one head. The constructor validates the input and makes
/// one blocked pass over the original attention (row max m [n], mass Z [n], output Y [n, d],
/// per-key scores) and ranks the keys, so that compact(t) for many t reuses that work.
/// The input's K/V/Q pointers are borrowed and must outlive the matcher.
/// Throws Error on invalid input (NaN/Inf in K, V or Q; head_dim <= 0; negative sizes).
class AttentionMatcher {
 public:
  explicit AttentionMatcher(const HeadCompactionInput& in, const AttentionMatchingOptions& options = {});

  /// Key indices [T] from highest to lowest score (ties: lower index first). Empty when there are
  /// no keys or no reference queries.
  const std::vector<int>& ranking() const { return ranking_; }
  /// Attention statistics of the original head on the reference queries.
  const HeadAttentionStats& stats() const { return stats_; }

  /// The t highest-scoring key indices in context order. Throws Error unless 0 <= t <= T, or when
  /// t > 0 and there are no reference queries.
  std::vector<int> select(int t) const;

  /// Full AM: select(t), then fit(selected). t == 0 gives an empty head; t == T reproduces the
  /// head (beta ~ 0, C2 ~ V when the queries determine it). Throws as select and fit.
  CompactedHead compact(int t) const;

  /// Fits beta and C2 for a given key subset (indices distinct, sorted, in [0, T)):
  ///   M = E[:, sel] = exp(S[:, sel] - m) [n, t];  w = bounded_nnls(M, Z);  beta = log w in [lo, hi]
  ///   P = softmax_row(S[:, sel] + beta) [n, t];   C2 = argmin ||P C2 - Y||_F (dgelsd, min-norm).
  /// Returns the head with C1 = K[sel]. Throws Error on bad indices, missing queries, or a
  /// non-finite / float-overflowing C2.
  CompactedHead fit(const std::vector<int>& selected) const;

 private:
  HeadCompactionInput in_;
  AttentionMatchingOptions options_;
  HeadAttentionStats stats_;
  std::vector<int> ranking_;
};

/// One-shot AM compaction of a head to t entries (see AttentionMatcher::compact).
CompactedHead compact_attention_matching(const HeadCompactionInput& in, int t,
                                         const AttentionMatchingOptions& options = {});

}  // namespace kvcompact
