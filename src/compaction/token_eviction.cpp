// SnapKV, StreamingLLM, H2O and PyramidKV baselines (see token_eviction.h).
#include "compaction/token_eviction.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include <fmt/format.h>

#include "compaction/baselines.h"
#include "compaction/head_attention.h"
#include "core/error.h"

namespace kvcompact {
namespace {

void check_t(const HeadCompactionInput& in, int t, const char* where) {
  validate_head_input(in, where);
  if (t < 0 || t > in.T) throw Error(fmt::format("{}: cannot keep {} of {} entries", where, t, in.T));
}

std::vector<int> range(int first, int count) {
  std::vector<int> v(static_cast<std::size_t>(std::max(count, 0)));
  std::iota(v.begin(), v.end(), first);
  return v;
}

// The k highest-scoring indices of scores (ties: lower index), plus `extra` appended, sorted.
std::vector<int> top_plus(const std::vector<double>& scores, int k, std::vector<int> extra) {
  std::vector<int> sel = top_keys(rank_keys(scores), k);
  sel.insert(sel.end(), extra.begin(), extra.end());
  std::sort(sel.begin(), sel.end());
  return sel;
}

}  // namespace

std::vector<double> causal_attention_votes(const HeadCompactionInput& in, int first_pos, int key_count) {
  const char* where = "context attention";
  validate_head_input(in, where);
  if (in.group_size < 1)
    throw Error(fmt::format("{}: group size {} must be >= 1", where, in.group_size));
  if (first_pos < 0 || first_pos > in.T || key_count < 0 || key_count > in.T)
    throw Error(fmt::format("{}: positions from {} / {} keys outside the context of {}", where,
                            first_pos, key_count, in.T));
  const std::size_t T = static_cast<std::size_t>(in.T), g = static_cast<std::size_t>(in.group_size),
                    D = static_cast<std::size_t>(in.head_dim);
  std::vector<double> votes(static_cast<std::size_t>(key_count), 0.0);
  if (first_pos == in.T || key_count == 0) return votes;
  if (in.context_queries == nullptr)
    throw Error(fmt::format("{}: the method needs the context queries, which were not given", where));
  const float* cq = in.context_queries + static_cast<std::size_t>(first_pos) * g * D;
  for (std::size_t i = 0; i < (T - static_cast<std::size_t>(first_pos)) * g * D; ++i)
    if (!std::isfinite(cq[i]))
      throw Error(fmt::format("{}: context query entry {} is not finite", where,
                              static_cast<std::size_t>(first_pos) * g * D + i));
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> a(T);
  for (std::size_t pos = static_cast<std::size_t>(first_pos); pos < T; ++pos) {
    for (std::size_t h = 0; h < g; ++h) {
      const float* q = in.context_queries + (pos * g + h) * D;
      double m = -HUGE_VAL;
      for (std::size_t j = 0; j <= pos; ++j) {
        const float* k = in.keys + j * D;
        double acc = 0.0;
        for (std::size_t c = 0; c < D; ++c) acc += static_cast<double>(q[c]) * k[c];
        a[j] = scale * acc;
        m = std::max(m, a[j]);
      }
      double z = 0.0;
      for (std::size_t j = 0; j <= pos; ++j) {
        a[j] = std::exp(a[j] - m);
        z += a[j];
      }
      const std::size_t upto = std::min(pos + 1, static_cast<std::size_t>(key_count));
      for (std::size_t j = 0; j < upto; ++j) votes[j] += a[j] / z;
    }
  }
  return votes;
}

std::vector<double> snapkv_scores(const HeadCompactionInput& in, const SnapKvOptions& options) {
  if (options.window < 1)
    throw Error(fmt::format("snapkv: observation window {} must be >= 1", options.window));
  const int w = std::min(options.window, std::max(in.T, 0));
  return pool_scores(causal_attention_votes(in, in.T - w, in.T - w), options.pool);
}

CompactedHead compact_snapkv(const HeadCompactionInput& in, int t, const SnapKvOptions& options) {
  check_t(in, t, "snapkv compaction");
  if (options.window < 1)
    throw Error(fmt::format("snapkv: observation window {} must be >= 1", options.window));
  if (options.pool.kind != PoolKind::None && (options.pool.kernel < 1 || options.pool.kernel % 2 == 0))
    throw Error(fmt::format("snapkv: pool kernel {} must be odd and >= 1", options.pool.kernel));
  const int w = std::min(options.window, in.T);
  if (t <= w) return head_from_selection(in, range(in.T - t, t));
  return head_from_selection(in, top_plus(snapkv_scores(in, options), t - w, range(in.T - w, w)));
}

CompactedHead compact_streaming(const HeadCompactionInput& in, int t, int sink) {
  check_t(in, t, "streaming compaction");
  if (sink < 0) throw Error(fmt::format("streaming: sink = {} must be >= 0", sink));
  const int s = std::min(sink, t);
  std::vector<int> sel = range(0, s);
  const std::vector<int> tail = range(in.T - (t - s), t - s);
  sel.insert(sel.end(), tail.begin(), tail.end());
  return head_from_selection(in, sel);
}

std::vector<double> h2o_scores(const HeadCompactionInput& in) {
  return causal_attention_votes(in, 0, in.T);
}

CompactedHead compact_h2o(const HeadCompactionInput& in, int t, double recent) {
  check_t(in, t, "h2o compaction");
  if (!(recent >= 0.0 && recent <= 1.0))
    throw Error(fmt::format("h2o: recent fraction {} is outside [0, 1]", recent));
  const int r = std::min(t, static_cast<int>(std::floor(recent * t + 1e-9)));
  if (r == t) return head_from_selection(in, range(in.T - t, t));
  std::vector<double> scores = h2o_scores(in);
  scores.resize(static_cast<std::size_t>(in.T - r));
  return head_from_selection(in, top_plus(scores, t - r, range(in.T - r, r)));
}

std::vector<double> pyramid_layer_shares(int n_layers, double beta, double mean) {
  if (n_layers < 1) throw Error(fmt::format("pyramidkv: {} layers (need >= 1)", n_layers));
  if (!std::isfinite(beta) || beta < 1.0) throw Error(fmt::format("pyramidkv: beta {} must be finite and >= 1", beta));
  const std::size_t L = static_cast<std::size_t>(n_layers);
  std::vector<double> share(L, mean);
  if (L == 1) return share;
  // In units of `mean`, as the authors' code: min = t/beta, max = 2t - min, step (max - min)/(L - 1).
  // (Scaling a unit-mean shape by t afterwards would round ties such as 29.5 / 10.5 differently.)
  const double lo = mean / beta, hi = 2.0 * mean - lo, step = (hi - lo) / static_cast<double>(L - 1);
  for (std::size_t l = 0; l < L; ++l) share[l] = hi - static_cast<double>(l) * step;
  return share;
}

std::vector<int> pyramid_budgets_for(int n_layers, int T, int t, double beta) {
  if (n_layers < 1) throw Error(fmt::format("pyramidkv: {} layers (need >= 1)", n_layers));
  if (T < 0 || t < 0 || t > T)
    throw Error(fmt::format("pyramidkv: cannot keep {} of {} entries", t, T));
  if (!std::isfinite(beta) || beta < 1.0)
    throw Error(fmt::format("pyramidkv: beta {} must be finite and >= 1", beta));
  const std::size_t L = static_cast<std::size_t>(n_layers);
  std::vector<int> b(L, t);
  if (L == 1 || t == 0) return b;
  const std::vector<double> share = pyramid_layer_shares(n_layers, beta, t);
  std::vector<double> frac(L);
  long long sum = 0;
  for (std::size_t l = 0; l < L; ++l) {
    const double x = share[l];
    b[l] = static_cast<int>(std::floor(x + 1e-9));
    frac[l] = x - b[l];
    sum += b[l];
  }
  long long left = static_cast<long long>(L) * t - sum;  // largest remainder rounding
  std::vector<std::size_t> order(L);
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return frac[x] > frac[y]; });
  for (std::size_t k = 0; left > 0; k = (k + 1) % L, --left) ++b[order[k]];
  for (; left < 0; ++left) --b[*std::max_element(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return b[x] < b[y]; })];
  // Cap at T; the excess goes to the lowest layers with room.
  long long excess = 0;
  for (int& x : b)
    if (x > T) {
      excess += x - T;
      x = T;
    }
  for (std::size_t l = 0; excess > 0; l = (l + 1) % L)
    if (b[l] < T) {
      ++b[l];
      --excess;
    }
  // At least one entry per layer.
  for (std::size_t l = 0; l < L; ++l)
    if (b[l] < 1) {
      auto big = std::max_element(b.begin(), b.end());
      --*big;
      b[l] = 1;
    }
  return b;
}

std::vector<int> pyramid_budgets(int n_layers, int T, double ratio, double beta) {
  return pyramid_budgets_for(n_layers, T, kept_entries(ratio, T), beta);
}

}  // namespace kvcompact
