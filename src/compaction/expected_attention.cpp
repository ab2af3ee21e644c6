// ExpectedAttention (see expected_attention.h).
#include "compaction/expected_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "compaction/head_attention.h"
#include "compaction/score_eviction.h"
#include "core/error.h"

namespace kvcompact {
namespace {

// Dimension pair j of a head: (2j, 2j+1) interleaved (GGML), (j, j + d/2) half-split (Hugging Face).
std::pair<std::size_t, std::size_t> pair_dims(std::size_t j, std::size_t D, bool half_split) {
  return half_split ? std::pair{j, j + D / 2} : std::pair{2 * j, 2 * j + 1};
}

}  // namespace

std::vector<double> expected_attention_scores(const HeadCompactionInput& in, const ExpectedAttentionOptions& o) {
  const char* where = "expected attention";
  validate_head_input(in, where);
  if (o.n_future < 1 || o.n_sink < 0)
    throw Error(fmt::format("{}: n_future {} must be >= 1 and n_sink {} >= 0", where, o.n_future, o.n_sink));
  if (in.T <= o.n_sink)
    throw Error(fmt::format("{}: the context of {} entries must be longer than n_sink = {}", where, in.T, o.n_sink));
  if (in.context_queries == nullptr) throw Error(fmt::format("{}: the method needs the context queries", where));
  if (in.rope_inv_freq == nullptr) throw Error(fmt::format("{}: the method needs the RoPE frequencies", where));
  if (in.group_size < 1 || in.head_dim % 2 != 0)
    throw Error(fmt::format("{}: group size {} / head_dim {} invalid", where, in.group_size, in.head_dim));
  const std::size_t D = static_cast<std::size_t>(in.head_dim), g = static_cast<std::size_t>(in.group_size),
                    T = static_cast<std::size_t>(in.T), S = static_cast<std::size_t>(o.n_sink), half = D / 2;
  const std::size_t n = T - S;  // statistics over positions S..T-1; keys S..T-1 scored

  // Mean RoPE rotation over the future positions: per pair, [[c, -s], [s, c]].
  std::vector<double> cbar(half, 0.0), sbar(half, 0.0);
  for (std::size_t j = 0; j < half; ++j) {
    const double w = in.rope_inv_freq[j];
    for (int p = in.T; p < in.T + o.n_future; ++p) {
      cbar[j] += std::cos(p * w);
      sbar[j] += std::sin(p * w);
    }
    cbar[j] /= o.n_future;
    sbar[j] /= o.n_future;
  }
  // R as a dense matrix [D, D].
  std::vector<double> R(D * D, 0.0);
  for (std::size_t j = 0; j < half; ++j) {
    const auto [a, b] = pair_dims(j, D, in.rope_half_split);
    R[a * D + a] = cbar[j];
    R[a * D + b] = -sbar[j];
    R[b * D + a] = sbar[j];
    R[b * D + b] = cbar[j];
  }

  std::vector<double> mean_attn(n, 0.0), q(D), mu(D), cov(D * D), rmu(D), tmp(D * D), rcov(D * D), z(n);
  std::vector<double> pre(n * D);
  for (std::size_t h = 0; h < g; ++h) {
    // Un-rotate the context queries (position p rotated by p * inv_freq).
    std::fill(mu.begin(), mu.end(), 0.0);
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t p = S + i;
      const float* src = in.context_queries + (p * g + h) * D;
      for (std::size_t c = 0; c < D; ++c) q[c] = src[c];
      for (std::size_t j = 0; j < half; ++j) {
        const auto [a, b] = pair_dims(j, D, in.rope_half_split);
        const double ang = static_cast<double>(p) * in.rope_inv_freq[j], c = std::cos(ang), s = std::sin(ang);
        const double xa = q[a], xb = q[b];
        q[a] = xa * c + xb * s;
        q[b] = -xa * s + xb * c;
      }
      for (std::size_t c = 0; c < D; ++c) {
        pre[i * D + c] = q[c];
        mu[c] += q[c] / static_cast<double>(n);
      }
    }
    std::fill(cov.begin(), cov.end(), 0.0);
    if (o.use_covariance) {
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t a = 0; a < D; ++a) {
          const double xa = pre[i * D + a] - mu[a];
          for (std::size_t b = 0; b < D; ++b) cov[a * D + b] += xa * (pre[i * D + b] - mu[b]);
        }
      for (double& x : cov) x /= static_cast<double>(n);
    }
    // R mu and R cov R^T.
    for (std::size_t a = 0; a < D; ++a) {
      double acc = 0.0;
      for (std::size_t b = 0; b < D; ++b) acc += R[a * D + b] * mu[b];
      rmu[a] = acc;
    }
    if (o.use_covariance) {
      for (std::size_t a = 0; a < D; ++a)
        for (std::size_t b = 0; b < D; ++b) {
          double acc = 0.0;
          for (std::size_t c = 0; c < D; ++c) acc += R[a * D + c] * cov[c * D + b];
          tmp[a * D + b] = acc;
        }
      for (std::size_t a = 0; a < D; ++a)
        for (std::size_t b = 0; b < D; ++b) {
          double acc = 0.0;
          for (std::size_t c = 0; c < D; ++c) acc += tmp[a * D + c] * R[b * D + c];
          rcov[a * D + b] = acc;
        }
    }
    double m = -HUGE_VAL;
    for (std::size_t i = 0; i < n; ++i) {
      const float* k = in.keys + (S + i) * D;
      double lin = 0.0, quad = 0.0;
      for (std::size_t a = 0; a < D; ++a) lin += rmu[a] * k[a];
      if (o.use_covariance)
        for (std::size_t a = 0; a < D; ++a) {
          double acc = 0.0;
          for (std::size_t b = 0; b < D; ++b) acc += rcov[a * D + b] * k[b];
          quad += k[a] * acc;
        }
      z[i] = lin / std::sqrt(static_cast<double>(D)) + quad / static_cast<double>(D) / 2.0;
      m = std::max(m, z[i]);
    }
    double sum = 0.0;
    for (std::size_t i = 0; i < n; ++i) sum += (z[i] = std::exp(z[i] - m));
    for (std::size_t i = 0; i < n; ++i) mean_attn[i] += z[i] / sum / static_cast<double>(g);
  }
  std::vector<double> scores(T);
  double mx = -HUGE_VAL;
  for (std::size_t i = 0; i < n; ++i) {
    double s = mean_attn[i];
    if (o.use_vnorm) {
      double vv = 0.0;
      for (std::size_t c = 0; c < D; ++c) vv += static_cast<double>(in.values[(S + i) * D + c]) * in.values[(S + i) * D + c];
      s = (s + o.epsilon) * std::sqrt(vv);
    }
    scores[S + i] = s;
    mx = std::max(mx, s);
  }
  for (std::size_t j = 0; j < S; ++j) scores[j] = mx + 1.0;
  return scores;
}

CompactedHead compact_expected_attention(const HeadCompactionInput& in, int t, const ExpectedAttentionOptions& o) {
  return compact_top_scores(in, expected_attention_scores(in, o), t);
}

}  // namespace kvcompact
