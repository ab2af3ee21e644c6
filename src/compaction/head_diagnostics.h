// How well a compacted head reproduces its original head's attention on a set of queries: the
// per-query metrics of the paper's evaluate_compaction (adamzweiger/compaction,
// compaction/algorithms/base.py), reduced to means and extremes.
#pragma once

#include <vector>

#include "compaction/head_compaction.h"
#include "core/kv_cache.h"

namespace kvcompact {

/// Attention-matching quality of one compacted head on n test queries. Per query q (s = 1/sqrt(d)):
///   original  y = softmax(s q K^T) V,            lse = log sum_j exp(s q.k_j)
///   compacted y' = softmax(s q C1^T + beta) C2,  lse' = log sum_i exp(s q.c_i + beta_i)
///   relative L2 error ||y' - y|| / (||y|| + 1e-10), cosine similarity y.y' / max(||y|| ||y'||, 1e-8),
///   attention-mass error |exp(lse' - lse) - 1| (the paper's "sumexp relative error"; how far the
///   compacted entries' total attention mass is from the original's, which matters when the head
///   is later read together with new tokens).
struct HeadDiagnostics {
  int n_queries = 0;
  double rel_l2_mean = 0, rel_l2_max = 0;
  double cosine_mean = 0, cosine_min = 0;
  double mass_err_mean = 0, mass_err_max = 0;
};

/// Diagnostics of `compacted` (keys C1, beta, values C2 of the head, [t, d]) against the original
/// head and test queries of `original` (keys, values [T, d], queries [n, d]; other fields unused).
/// Original side in float32 GEMMs with double sums (compute_head_attention_f32), compacted side by
/// compacted_attention_output (double, with its log-mass). n = 0 gives all-zero diagnostics.
/// Throws Error for an empty compacted head with n > 0, shapes that disagree, or non-finite input
/// (validate_head_input, compacted_attention_output).
HeadDiagnostics diagnose_head(const HeadCompactionInput& original, const HeadCache& compacted);

}  // namespace kvcompact
