// Attention Matching compaction of one KV head (arXiv 2602.16284): keep t of the T keys (C1 =
// highest-attention keys or OMP keys), fit a per-key logit bias beta (NNLS on the attention mass)
// and new values C2 (least squares / ridge on the attention output), over the reference queries;
// optionally keep the last `recent` context entries verbatim.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compaction/head_attention.h"
#include "compaction/head_compaction.h"
#include "compaction/key_selection.h"
#include "compaction/nnls.h"
#include "compaction/nnls_active_set.h"
#include "compaction/omp_selection.h"
#include "compaction/value_fit.h"

namespace kvcompact {

/// How C1 (the kept keys) is chosen.
enum class KeySelector {
  Attention,  ///< highest per-key attention score (score + optional pooling), key_selection.h
  Omp,        ///< orthogonal matching pursuit on the attention mass, omp_selection.h
};

/// How beta is fitted (w = exp(beta) >= 0 so that the kept keys' exp-scores reproduce the mass).
enum class BetaFit {
  NnlsPg,     ///< bounded_nnls (nnls.h): clipped least squares + `iters` projected-gradient steps
  NnlsExact,  ///< exact Lawson-Hanson NNLS (nnls_active_set.h), then w clipped to [e^lo, e^hi]
  Zero,       ///< beta = 0 (no mass fit)
};

/// Options of the Attention Matching fit.
struct AttentionMatchingOptions {
  KeySelector selector = KeySelector::Attention;
  SelectionScore score = SelectionScore::Rms;  ///< Attention selector: per-key score
  ScorePooling pool;                           ///< Attention selector: pooling of the scores
  BetaFit beta = BetaFit::NnlsPg;
  NnlsOptions nnls;     ///< iters (NnlsPg only), bounds [lo, hi] on beta (NnlsPg and NnlsExact)
  ValueFitOptions c2;   ///< C2 fit: lsq (dgelsd, rcond), ridge or direct
  int recent = 0;       ///< keep the last `recent` context entries verbatim (>= 0), see below
  /// Omp selector: the paper's OMP loop (omp_select) instead of kvcompact's prefix-consistent
  /// order (omp_order) when any of these differs from its default. A Bounded refit uses `nnls`.
  OmpRefit omp_refit = OmpRefit::Exact;
  bool omp_progressive = false;
  std::optional<double> omp_drop;  ///< nats
  /// True when the Omp selector runs the paper's loop (see above).
  bool paper_omp() const {
    return selector == KeySelector::Omp && (omp_refit != OmpRefit::Exact || omp_progressive || omp_drop.has_value());
  }
  bool operator==(const AttentionMatchingOptions&) const = default;
};

/// Short name used by the whole-cache compaction and the CLI (compact_cache.h).
using AmOptions = AttentionMatchingOptions;

/// Checks option values (recent >= 0, pooling kernel odd >= 1, nnls iters >= 0 and finite
/// lo <= hi, ridge lambda finite >= 0). Throws Error naming the option.
void validate_am_options(const AttentionMatchingOptions& options);

/// Names used in errors and specs: "attn"/"omp", "nnls-pg"/"nnls-exact"/"zero".
std::string key_selector_name(KeySelector selector);
std::string beta_fit_name(BetaFit beta);

/// A prepared Attention Matching fit for one head. The constructor validates the input, makes one
/// blocked pass over the original attention (row max m [n], mass Z [n], output Y [n, d], per-key
/// scores) and ranks the keys, so that compact(t) for many t reuses that work.
///
/// Recent window (options.recent = w > 0), with prefix keys 0..T-w-1 (set P) and window keys
/// T-w..T-1 (set W), E_ij = exp(S_ij - m_i) with m_i the row max over all T keys:
///   Z_i = Z^P_i + Z^W_i,  Y_i = (N^P_i + N^W_i) / Z_i,  N^X_i = sum_{j in X} E_ij V_j.
/// The window is kept verbatim (beta 0, own values), so the compacted head reproduces Y_i exactly
/// when the compacted prefix reproduces (a) the prefix mass Z^P_i and (b) the prefix's local output
/// Y^P_i = N^P_i / Z^P_i. Hence: beta is fitted with M = E[:, sel] against Z^P (not Z), and C2
/// against Y^P with the local softmax P over the kept prefix entries (with beta), each row weighted
/// by a_i = Z^P_i / Z_i, the prefix's share of query i's attention: when (a) holds, the output error
/// of query i is a_i (P_i C2 - Y^P_i), so the weighted fit minimises the error of the full output,
/// i.e. it fits the prefix's unnormalised contribution N^P_i / Z_i. With w = 0 this is plain AM
/// (a_i = 1). Budget t > w: t - w prefix keys + the w window keys; t <= w: the last t keys only.
/// The input's K/V/Q pointers are borrowed and must outlive the matcher.
/// Throws Error on invalid input (NaN/Inf in K, V or Q; head_dim <= 0; negative sizes) or options.
class AttentionMatcher {
 public:
  /// max_t: the largest budget compact/select will be asked for (OMP's order is computed only up to
  /// it); -1 = up to T.
  explicit AttentionMatcher(const HeadCompactionInput& in, const AttentionMatchingOptions& options = {},
                            int max_t = -1);

  /// Prefix key indices (0..T-w-1; all keys when w = 0) in selection order: by decreasing score
  /// (ties: lower index first) for the Attention selector, OMP's pick order for Omp (length
  /// min(T - w, max_t - w)). Empty when there are no keys or no reference queries, and for the
  /// paper's OMP loop (options.paper_omp(): select(t) runs it for each t).
  const std::vector<int>& ranking() const { return ranking_; }
  /// Attention statistics of the original head (all T keys) on the reference queries.
  const HeadAttentionStats& stats() const { return stats_; }

  /// The t kept key indices in context order (see the recent window above). With the paper's OMP
  /// loop, when drops leave fewer than t - w prefix keys, the latest unselected prefix keys fill the
  /// budget (kvcompact keeps every budget exact). Throws Error unless
  /// 0 <= t <= T (and t <= max_t for OMP), or when prefix keys are needed and there are no queries.
  std::vector<int> select(int t) const;

  /// Full AM: select(t), then fit(selected). t == 0 gives an empty head; t == T reproduces the
  /// head (beta ~ 0, C2 ~ V when the queries determine it). Throws as select and fit.
  CompactedHead compact(int t) const;

  /// Fits beta and C2 for a given key subset (indices distinct, sorted, in [0, T)); indices in the
  /// recent window are kept verbatim, the others (sel, k of them) are fitted:
  ///   M = E[:, sel] [n, k];  w = nnls(M, Z^P) (options.beta);  beta = log w in [lo, hi]
  ///   P = softmax_row(S[:, sel] + beta) [n, k];  C2 = fit_values(diag(a) P, diag(a) Y^P).
  /// Returns the head with C1 = K[sel]. Throws Error on bad indices, missing queries, or a
  /// non-finite / float-overflowing C2.
  CompactedHead fit(const std::vector<int>& selected) const;

  /// Nested budgets (an influence sweep calls compact(t) for many t <= max_t on one head): computes
  /// once the Gram matrix G = E_R^T E_R [m, m] and b = E_R^T Z^P [m] of the exp-scores E_R [n, m]
  /// of the first m = min(max_t - w, T - w) ranked prefix keys, so that every later nnls-pg beta fit
  /// whose keys lie among them takes its normal equations as a sub-block of G instead of an
  /// O(n k^2) product (same numbers to rounding; tests/attention_matching_test.cpp). Holds m^2
  /// doubles until drop_shared_gram. No-op for the paper's OMP loop, other beta fits, or no
  /// queries. Not thread-safe against concurrent fits on the same matcher.
  void share_gram(int max_t);
  /// Frees what share_gram holds; fits compute their Gram matrices again.
  void drop_shared_gram();

 private:
  /// exp(S[:, cols] - m_i) in double [n, k] from the cols' float32 logits [n, k] (fit's M).
  std::vector<double> exp_scores(const std::vector<float>& logits, std::size_t k) const;
  /// Y^P [n, d]: the full head's output when every key is compacted (no copy), else out_target_.
  const std::vector<double>& out_target() const { return prefix_ == in_.T ? stats_.output : out_target_; }

  HeadCompactionInput in_;
  AttentionMatchingOptions options_;
  HeadAttentionStats stats_;
  int prefix_ = 0;                  // T - w (>= 0): keys that are compacted
  std::vector<double> mass_target_; // Z^P [n]
  std::vector<double> out_target_;  // Y^P [n, d] when a recent window is kept (else empty)
  std::vector<double> row_weight_;  // a [n] (empty = all ones)
  std::vector<int> ranking_;
  std::vector<int> gram_pos_;       // [prefix_]: key -> row of gram_, -1 when not shared
  std::vector<double> gram_, gram_b_;  // share_gram's G [m, m] and b [m]
  std::size_t gram_m_ = 0;
};

/// One-shot AM compaction of a head to t entries (see AttentionMatcher::compact).
CompactedHead compact_attention_matching(const HeadCompactionInput& in, int t,
                                         const AttentionMatchingOptions& options = {});

/// The `attn-nofit` ablation: AM's key selection (options' select / score / pool / recent) with
/// beta = 0 and the original values, i.e. compact_attention_matching with beta zero and c2
/// direct. Needs reference queries when t > 0. Throws as compact_attention_matching.
CompactedHead compact_attn_nofit(const HeadCompactionInput& in, int t, const AttentionMatchingOptions& options = {});

}  // namespace kvcompact
