// Key selection by attention score (Attention Matching, arXiv 2602.16284: "highest attention" keys).
#pragma once

#include <string>
#include <vector>

#include "compaction/head_attention.h"

namespace kvcompact {

/// How the per-key score aggregates the attention A[:, j] [n] that key j receives over the
/// reference queries.
enum class SelectionScore {
  Rms,   ///< sqrt(mean_i A_ij^2) (the paper's default)
  Mean,  ///< mean_i A_ij
  Max,   ///< max_i A_ij
};

/// Parses "rms" / "mean" / "max"; throws Error naming the option otherwise.
SelectionScore parse_selection_score(const std::string& name);
/// Inverse of parse_selection_score.
std::string selection_score_name(SelectionScore score);

/// Per-key scores [T] from the attention statistics (all 0 when there are no queries).
std::vector<double> key_scores(const HeadAttentionStats& stats, SelectionScore score);

/// 1-D pooling of the per-key scores along the key axis before ranking (as SnapKV, arXiv
/// 2404.14469, pools its votes): kernel k odd, stride 1, padding k/2, same-length output.
enum class PoolKind {
  None,  ///< scores used as they are
  Avg,   ///< mean over the window, zero padding counted (PyTorch avg_pool1d, count_include_pad)
  Max,   ///< max over the in-range part of the window (PyTorch max_pool1d, -inf padding)
};

/// A pooling choice; kernel is ignored (and 1) for PoolKind::None.
struct ScorePooling {
  PoolKind kind = PoolKind::None;
  int kernel = 1;
  bool operator==(const ScorePooling&) const = default;
};

/// Pools scores [T] -> [T]: out_j = avg or max of scores[j - k/2 .. j + k/2] (see PoolKind).
/// Throws Error unless the kernel is odd and >= 1 (any kernel for None), or when a score is NaN.
std::vector<double> pool_scores(const std::vector<double>& scores, const ScorePooling& pooling);

/// "none", "avg:K" or "max:K".
std::string pooling_name(const ScorePooling& pooling);

/// All T key indices ordered from highest to lowest score; ties go to the lower index.
/// The first t entries of this ranking are the selection for any t (one run serves every ratio).
/// Throws Error when a score is NaN.
std::vector<int> rank_keys(const std::vector<double>& scores);

/// The first t indices of `ranking`, sorted in context order. Throws Error unless 0 <= t <= size.
std::vector<int> top_keys(const std::vector<int>& ranking, int t);

}  // namespace kvcompact
