// Attention Matching per-head fit (see attention_matching.h).
#include "compaction/attention_matching.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <numeric>

#include <cblas.h>
#include <fmt/format.h>

#include "compaction/baselines.h"
#include "compaction/least_squares.h"
#include "compaction/omp_selection.h"
#include "core/error.h"
#include "ops/vexp.h"

namespace kvcompact {

void validate_am_options(const AttentionMatchingOptions& o) {
  if (o.recent < 0) throw Error(fmt::format("attention matching: recent = {} must be >= 0", o.recent));
  if (o.pool.kind != PoolKind::None && (o.pool.kernel < 1 || o.pool.kernel % 2 == 0))
    throw Error(fmt::format("attention matching: pool kernel {} must be odd and >= 1", o.pool.kernel));
  if (o.nnls.iters < 0)
    throw Error(fmt::format("attention matching: nnls iters = {} must be >= 0", o.nnls.iters));
  if (!std::isfinite(o.nnls.lo) || !std::isfinite(o.nnls.hi) || o.nnls.lo > o.nnls.hi)
    throw Error(fmt::format("attention matching: beta bounds lo = {}, hi = {} are not a finite "
                            "interval",
                            o.nnls.lo, o.nnls.hi));
  if (!std::isfinite(o.c2.lambda) || o.c2.lambda < 0.0)
    throw Error(fmt::format("attention matching: ridge lambda {} must be finite and >= 0", o.c2.lambda));
}

std::string key_selector_name(KeySelector selector) {
  return selector == KeySelector::Omp ? "omp" : "attn";
}

std::string beta_fit_name(BetaFit beta) {
  switch (beta) {
    case BetaFit::NnlsPg: return "nnls-pg";
    case BetaFit::NnlsExact: return "nnls-exact";
    case BetaFit::Zero: return "zero";
  }
  return "nnls-pg";
}

AttentionMatcher::AttentionMatcher(const HeadCompactionInput& in, const AttentionMatchingOptions& options,
                                   int max_t)
    : in_(in), options_(options) {
  validate_head_input(in_, "attention matching");
  validate_am_options(options_);
  const int T = in_.T, n = in_.n_queries, w = options_.recent;
  prefix_ = std::max(0, T - w);
  stats_.n_queries = n;
  stats_.T = T;
  stats_.head_dim = in_.head_dim;
  if (T == 0 || n == 0) return;
  // The float32 path: |s q . k| <= sqrt(d) max|q| max|k| =: B, and a float32 logit is off by up to
  // ~B * 6e-8 nats, so past B = 1e8 exp(S - m) can be off by e^6 or overflow (real heads: B < 1e6).
  auto max_abs = [](const float* p, std::size_t count) {
    float m = 0.0f;
#pragma omp simd reduction(max : m)
    for (std::size_t i = 0; i < count; ++i) m = std::max(m, std::fabs(p[i]));
    return static_cast<double>(m);
  };
  const std::size_t D = static_cast<std::size_t>(in_.head_dim);
  const double qmax = max_abs(in_.queries, static_cast<std::size_t>(n) * D),
               kmax = max_abs(in_.keys, static_cast<std::size_t>(T) * D);
  if (qmax * kmax * std::sqrt(static_cast<double>(in_.head_dim)) > 1e8)
    throw Error(fmt::format("attention matching: logits may overflow float32 or lose all precision (max |Q| = {:g}, "
                            "max |K| = {:g}, head_dim {}): rescale the queries or keys",
                            qmax, kmax, in_.head_dim));
  stats_ = compute_head_attention_f32(in_);
  const std::size_t N = static_cast<std::size_t>(n);
  if (prefix_ == T) {
    mass_target_ = stats_.mass;  // the output target is stats_.output itself (out_target())
  } else if (prefix_ > 0) {
    HeadCompactionInput pre = in_;
    pre.T = prefix_;
    const HeadAttentionStats ps = compute_head_attention_f32(pre);
    mass_target_.resize(N);
    row_weight_.resize(N);
    for (std::size_t i = 0; i < N; ++i) {
      mass_target_[i] = ps.mass[i] * std::exp(ps.row_max[i] - stats_.row_max[i]);
      row_weight_[i] = mass_target_[i] / stats_.mass[i];
    }
    out_target_ = ps.output;
  }
  if (prefix_ == 0) return;
  const int want = max_t < 0 ? T : std::min(max_t, T);
  if (options_.paper_omp()) return;  // select(t) runs the paper's loop for each t
  if (options_.selector == KeySelector::Omp) {
    const int steps = std::clamp(want - w, 0, prefix_);
    ranking_ = omp_key_order(in_, stats_.row_max, mass_target_, prefix_, steps);
  } else {
    std::vector<double> scores = key_scores(stats_, options_.score);
    scores.resize(static_cast<std::size_t>(prefix_));
    ranking_ = rank_keys(pool_scores(scores, options_.pool));
  }
}

std::vector<int> AttentionMatcher::select(int t) const {
  const int T = in_.T, w = options_.recent;
  if (t < 0 || t > T)
    throw Error(fmt::format("attention matching: cannot keep {} of {} entries", t, T));
  if (t == 0) return {};
  std::vector<int> sel;
  if (t <= w) {  // only the last t keys
    sel.resize(static_cast<std::size_t>(t));
    std::iota(sel.begin(), sel.end(), T - t);
    return sel;
  }
  const int k = t - std::min(w, T);  // prefix keys to choose (> 0 here)
  if (in_.n_queries == 0)
    throw Error("attention matching: no reference queries to score the keys with");
  if (options_.paper_omp()) {
    const std::vector<double> E = omp_exp_scores(in_, stats_.row_max, prefix_);
    OmpOptions o;
    o.refit = options_.omp_refit;
    o.nnls = options_.nnls;
    o.progressive = options_.omp_progressive;
    o.drop_below = options_.omp_drop;
    sel = omp_select(E.data(), in_.n_queries, prefix_, mass_target_.data(), k, o);
    std::vector<char> in_sel(static_cast<std::size_t>(prefix_), 0);
    for (int j : sel) in_sel[static_cast<std::size_t>(j)] = 1;
    for (int j = prefix_ - 1; j >= 0 && static_cast<int>(sel.size()) < k; --j)
      if (!in_sel[static_cast<std::size_t>(j)]) sel.push_back(j);  // keys ran out: latest ones fill
    std::sort(sel.begin(), sel.end());
    for (int j = prefix_; j < T; ++j) sel.push_back(j);
    return sel;
  }
  if (static_cast<std::size_t>(k) > ranking_.size())
    throw Error(fmt::format("attention matching: OMP order was computed for {} keys, {} asked",
                            ranking_.size(), k));
  sel = top_keys(ranking_, k);
  for (int j = prefix_; j < T; ++j) sel.push_back(j);
  return sel;
}

CompactedHead AttentionMatcher::compact(int t) const {
  const std::vector<int> sel = select(t);
  if (sel.empty()) return {};
  return fit(sel);
}

CompactedHead AttentionMatcher::fit(const std::vector<int>& selected) const {
  const char* where = "attention matching fit";
  if (selected.empty()) return {};
  for (std::size_t j = 0; j < selected.size(); ++j) {
    if (selected[j] < 0 || selected[j] >= in_.T)
      throw Error(fmt::format("{}: index {} outside the context [0, {})", where, selected[j], in_.T));
    if (j > 0 && selected[j] <= selected[j - 1])
      throw Error(fmt::format("{}: selected indices are not distinct and sorted", where));
  }
  CompactedHead head = head_from_selection(in_, selected);  // C1, verbatim values, beta 0
  std::vector<int> fitted;  // prefix part
  for (int idx : selected)
    if (idx < prefix_) fitted.push_back(idx);
  if (fitted.empty()) return head;
  if (in_.n_queries == 0) throw Error(fmt::format("{}: no reference queries", where));
  const int n = in_.n_queries, k = static_cast<int>(fitted.size()), d = in_.head_dim;
  const std::size_t N = static_cast<std::size_t>(n), K = static_cast<std::size_t>(k),
                    D = static_cast<std::size_t>(d);

  // beta: M = exp(S[:, sel] - m_i) [n, k] against the prefix mass Z^P [n]. Logits and exp in
  // float32 as in the paper's code; the solves in double.
  const std::vector<float> logits = selected_logits_f32(in_, fitted);
  std::vector<double> buf = exp_scores(logits, K);
  std::vector<float> row(K);
  // share_gram: G = M^T M and b = M^T Z^P are sub-blocks of the shared ones when every key is there.
  std::vector<double> shared_g, shared_b;
  if (gram_m_ > 0 && options_.beta == BetaFit::NnlsPg &&
      std::all_of(fitted.begin(), fitted.end(), [&](int j) { return gram_pos_[static_cast<std::size_t>(j)] >= 0; })) {
    shared_g.resize(K * K);
    shared_b.resize(K);
    for (std::size_t a = 0; a < K; ++a) {
      const std::size_t pa = static_cast<std::size_t>(gram_pos_[static_cast<std::size_t>(fitted[a])]);
      shared_b[a] = gram_b_[pa];
      for (std::size_t c = 0; c < K; ++c)
        shared_g[a * K + c] = gram_[pa * gram_m_ + static_cast<std::size_t>(gram_pos_[static_cast<std::size_t>(fitted[c])])];
    }
  }
  std::vector<double> w;
  switch (options_.beta) {
    case BetaFit::NnlsPg:
      w = bounded_nnls(buf.data(), n, k, mass_target_.data(), options_.nnls, shared_g.empty() ? nullptr : shared_g.data(),
                       shared_b.empty() ? nullptr : shared_b.data());
      break;
    case BetaFit::NnlsExact: {
      w = nnls_active_set(buf.data(), n, k, mass_target_.data());
      const double lo = std::exp(options_.nnls.lo), hi = std::exp(options_.nnls.hi);
      for (double& x : w) x = std::clamp(x, lo, hi);
      break;
    }
    case BetaFit::Zero: w.assign(K, 1.0); break;
  }
  std::vector<double> beta(K);
  for (std::size_t j = 0; j < K; ++j) beta[j] = std::log(w[j]);

  std::vector<double> C2(K * D);
  if (options_.c2.kind == ValueFit::Direct) {
    for (std::size_t j = 0; j < K; ++j)
      for (std::size_t c = 0; c < D; ++c) C2[j * D + c] = in_.values[static_cast<std::size_t>(fitted[j]) * D + c];
  } else {
    // P = softmax_row(S[:, sel] + beta) [n, k] (float32), rows weighted by a_i; target a_i Y^P_i.
    std::vector<double> weighted;  // a_i Y^P_i, only when rows are weighted
    if (!row_weight_.empty()) weighted = out_target();
    std::vector<float> fbeta(beta.begin(), beta.end());
    for (std::size_t i = 0; i < N; ++i) {
      for (std::size_t j = 0; j < K; ++j) row[j] = logits[i * K + j] + fbeta[j];
      const double z = exp_shifted_sum(row.data(), K, max_value(row.data(), K));
      const double a = row_weight_.empty() ? 1.0 : row_weight_[i];
      double* p = buf.data() + i * K;
      for (std::size_t j = 0; j < K; ++j) p[j] = row[j] * (a / z);
      if (!row_weight_.empty())
        for (std::size_t c = 0; c < D; ++c) weighted[i * D + c] *= a;
    }
    C2 = fit_values(buf.data(), n, k, row_weight_.empty() ? out_target().data() : weighted.data(), d, options_.c2);
  }
  constexpr double kFloatMax = static_cast<double>(std::numeric_limits<float>::max());
  std::size_t r = 0;
  for (std::size_t j = 0; j < selected.size(); ++j) {
    if (selected[j] >= prefix_) continue;
    head.beta[j] = static_cast<float>(beta[r]);
    for (std::size_t c = 0; c < D; ++c) {
      const double v = C2[r * D + c];
      if (!std::isfinite(v) || std::fabs(v) > kFloatMax)
        throw Error(fmt::format("{}: fitted value C2 entry {} is not a finite float", where, r * D + c));
      head.values[j * D + c] = static_cast<float>(v);
    }
    ++r;
  }
  return head;
}

std::vector<double> AttentionMatcher::exp_scores(const std::vector<float>& logits, std::size_t k) const {
  const std::size_t N = static_cast<std::size_t>(in_.n_queries);
  // All rows shifted in one float buffer, one exp pass, then widened (the same float32 values as
  // row by row).
  std::vector<float> shifted(N * k);
  for (std::size_t i = 0; i < N; ++i) {
    const float m = static_cast<float>(stats_.row_max[i]);
    const float* l = logits.data() + i * k;
    float* r = shifted.data() + i * k;
    for (std::size_t j = 0; j < k; ++j) r[j] = l[j] - m;
  }
  exp_inplace(shifted.data(), shifted.size());
  return std::vector<double>(shifted.begin(), shifted.end());
}

void AttentionMatcher::share_gram(int max_t) {
  drop_shared_gram();
  if (options_.beta != BetaFit::NnlsPg || options_.paper_omp() || in_.n_queries == 0 || prefix_ == 0) return;
  const int w = std::min(options_.recent, in_.T);
  const std::size_t m = static_cast<std::size_t>(std::clamp(std::min(max_t, in_.T) - w, 0, static_cast<int>(ranking_.size())));
  if (m == 0) return;
  std::vector<int> keys(ranking_.begin(), ranking_.begin() + static_cast<std::ptrdiff_t>(m));
  std::sort(keys.begin(), keys.end());
  const std::vector<double> E = exp_scores(selected_logits_f32(in_, keys), m);
  const int n = in_.n_queries, M = static_cast<int>(m);
  gram_ = gram_matrix(E.data(), n, M);
  gram_b_.assign(m, 0.0);
  cblas_dgemv(CblasRowMajor, CblasTrans, n, M, 1.0, E.data(), M, mass_target_.data(), 1, 0.0, gram_b_.data(), 1);
  gram_pos_.assign(static_cast<std::size_t>(prefix_), -1);
  for (std::size_t r = 0; r < m; ++r) gram_pos_[static_cast<std::size_t>(keys[r])] = static_cast<int>(r);
  gram_m_ = m;
}

void AttentionMatcher::drop_shared_gram() {
  gram_m_ = 0;
  std::vector<int>().swap(gram_pos_);
  std::vector<double>().swap(gram_);
  std::vector<double>().swap(gram_b_);
}

CompactedHead compact_attention_matching(const HeadCompactionInput& in, int t,
                                         const AttentionMatchingOptions& options) {
  if (t < 0 || t > std::max(in.T, 0))
    throw Error(fmt::format("attention matching: cannot keep {} of {} entries", t, in.T));
  return AttentionMatcher(in, options, t).compact(t);
}

CompactedHead compact_attn_nofit(const HeadCompactionInput& in, int t, const AttentionMatchingOptions& options) {
  AttentionMatchingOptions o = options;
  o.beta = BetaFit::Zero;
  o.c2.kind = ValueFit::Direct;
  return compact_attention_matching(in, t, o);
}

}  // namespace kvcompact
