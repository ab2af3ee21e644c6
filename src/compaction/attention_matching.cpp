// Attention Matching per-head fit (see attention_matching.h).
#include "compaction/attention_matching.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include <fmt/format.h>

#include "compaction/baselines.h"
#include "compaction/least_squares.h"
#include "io/error.h"

namespace kvcompact {

AttentionMatcher::AttentionMatcher(const HeadCompactionInput& in, const AttentionMatchingOptions& options)
    : in_(in), options_(options) {
  validate_head_input(in_, "attention matching");
  if (in_.T > 0 && in_.n_queries > 0) {
    stats_ = compute_head_attention(in_);
    ranking_ = rank_keys(key_scores(stats_, options_.score));
  } else {
    stats_.n_queries = in_.n_queries;
    stats_.T = in_.T;
    stats_.head_dim = in_.head_dim;
  }
}

std::vector<int> AttentionMatcher::select(int t) const {
  if (t < 0 || t > in_.T)
    throw Error(fmt::format("attention matching: cannot keep {} of {} entries", t, in_.T));
  if (t == 0) return {};
  if (in_.n_queries == 0)
    throw Error("attention matching: no reference queries to score the keys with");
  return top_keys(ranking_, t);
}

CompactedHead AttentionMatcher::compact(int t) const {
  const std::vector<int> sel = select(t);
  if (sel.empty()) return {};
  return fit(sel);
}

CompactedHead AttentionMatcher::fit(const std::vector<int>& selected) const {
  const char* where = "attention matching fit";
  if (selected.empty()) return {};
  if (in_.n_queries == 0) throw Error(fmt::format("{}: no reference queries", where));
  for (std::size_t j = 0; j < selected.size(); ++j) {
    if (selected[j] < 0 || selected[j] >= in_.T)
      throw Error(fmt::format("{}: index {} outside the context [0, {})", where, selected[j], in_.T));
    if (j > 0 && selected[j] <= selected[j - 1])
      throw Error(fmt::format("{}: selected indices are not distinct and sorted", where));
  }
  const int n = in_.n_queries, t = static_cast<int>(selected.size()), d = in_.head_dim;
  const std::size_t N = static_cast<std::size_t>(n), Tt = static_cast<std::size_t>(t),
                    D = static_cast<std::size_t>(d);

  // beta: M = exp(S[:, sel] - m_i) [n, t] against target mass Z [n].
  std::vector<double> buf = selected_logits(in_, selected);
  for (std::size_t i = 0; i < N; ++i)
    for (std::size_t j = 0; j < Tt; ++j) buf[i * Tt + j] = std::exp(buf[i * Tt + j] - stats_.row_max[i]);
  const std::vector<double> w = bounded_nnls(buf.data(), n, t, stats_.mass.data(), options_.nnls);

  CompactedHead head = head_from_selection(in_, selected);
  for (std::size_t j = 0; j < Tt; ++j) head.beta[j] = static_cast<float>(std::log(w[j]));

  // C2: P = softmax_row(S[:, sel] + beta) [n, t]; min ||P C2 - Y||_F.
  buf = selected_logits(in_, selected);
  for (std::size_t i = 0; i < N; ++i) {
    double* p = buf.data() + i * Tt;
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t j = 0; j < Tt; ++j) {
      p[j] += std::log(w[j]);
      m = std::max(m, p[j]);
    }
    double z = 0.0;
    for (std::size_t j = 0; j < Tt; ++j) {
      p[j] = std::exp(p[j] - m);
      z += p[j];
    }
    for (std::size_t j = 0; j < Tt; ++j) p[j] /= z;
  }
  const std::vector<double> C2 =
      solve_least_squares(buf.data(), n, t, stats_.output.data(), d, options_.ls_rcond);
  constexpr double kFloatMax = static_cast<double>(std::numeric_limits<float>::max());
  for (std::size_t i = 0; i < Tt * D; ++i) {
    if (!std::isfinite(C2[i]) || std::fabs(C2[i]) > kFloatMax)
      throw Error(fmt::format("{}: fitted value C2 entry {} is not a finite float", where, i));
    head.values[i] = static_cast<float>(C2[i]);
  }
  return head;
}

CompactedHead compact_attention_matching(const HeadCompactionInput& in, int t,
                                         const AttentionMatchingOptions& options) {
  if (t < 0 || t > std::max(in.T, 0))
    throw Error(fmt::format("attention matching: cannot keep {} of {} entries", t, in.T));
  return AttentionMatcher(in, options).compact(t);
}

}  // namespace kvcompact
