// Attention-score key ranking (see key_selection.h).
#include "compaction/key_selection.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <numeric>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

SelectionScore parse_selection_score(const std::string& name) {
  if (name == "rms") return SelectionScore::Rms;
  if (name == "mean") return SelectionScore::Mean;
  if (name == "max") return SelectionScore::Max;
  throw Error(fmt::format("selection score '{}' is unknown (expected rms, mean or max)", name));
}

std::string selection_score_name(SelectionScore score) {
  switch (score) {
    case SelectionScore::Rms: return "rms";
    case SelectionScore::Mean: return "mean";
    case SelectionScore::Max: return "max";
  }
  return "unknown";
}

std::vector<double> key_scores(const HeadAttentionStats& stats, SelectionScore score) {
  const std::size_t T = static_cast<std::size_t>(stats.T);
  std::vector<double> s(T, 0.0);
  if (stats.n_queries <= 0) return s;
  const double inv_n = 1.0 / static_cast<double>(stats.n_queries);
  for (std::size_t j = 0; j < T; ++j) {
    switch (score) {
      case SelectionScore::Rms: s[j] = std::sqrt(stats.attn_sumsq[j] * inv_n); break;
      case SelectionScore::Mean: s[j] = stats.attn_sum[j] * inv_n; break;
      case SelectionScore::Max: s[j] = stats.attn_max[j]; break;
    }
  }
  return s;
}

std::vector<double> pool_scores(const std::vector<double>& scores, const ScorePooling& pooling) {
  for (std::size_t j = 0; j < scores.size(); ++j)
    if (std::isnan(scores[j])) throw Error(fmt::format("score pooling: score of key {} is NaN", j));
  if (pooling.kind == PoolKind::None) return scores;
  if (pooling.kernel < 1 || pooling.kernel % 2 == 0)
    throw Error(fmt::format("score pooling: kernel size {} must be odd and >= 1", pooling.kernel));
  const std::ptrdiff_t T = static_cast<std::ptrdiff_t>(scores.size()), h = pooling.kernel / 2;
  std::vector<double> out(scores.size());
  for (std::ptrdiff_t j = 0; j < T; ++j) {
    const std::ptrdiff_t a = std::max<std::ptrdiff_t>(0, j - h), b = std::min(T - 1, j + h);
    double acc = pooling.kind == PoolKind::Max ? scores[static_cast<std::size_t>(a)] : 0.0;
    for (std::ptrdiff_t i = a; i <= b; ++i) {
      const double v = scores[static_cast<std::size_t>(i)];
      acc = pooling.kind == PoolKind::Max ? std::max(acc, v) : acc + v;
    }
    out[static_cast<std::size_t>(j)] =
        pooling.kind == PoolKind::Max ? acc : acc / static_cast<double>(pooling.kernel);
  }
  return out;
}

std::string pooling_name(const ScorePooling& pooling) {
  switch (pooling.kind) {
    case PoolKind::None: return "none";
    case PoolKind::Avg: return fmt::format("avg:{}", pooling.kernel);
    case PoolKind::Max: return fmt::format("max:{}", pooling.kernel);
  }
  return "none";
}

std::vector<int> rank_keys(const std::vector<double>& scores) {
  for (std::size_t j = 0; j < scores.size(); ++j)
    if (std::isnan(scores[j])) throw Error(fmt::format("key ranking: score of key {} is NaN", j));
  std::vector<int> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return scores[static_cast<std::size_t>(a)] > scores[static_cast<std::size_t>(b)]; });
  return order;
}

std::vector<int> top_keys(const std::vector<int>& ranking, int t) {
  if (t < 0 || static_cast<std::size_t>(t) > ranking.size())
    throw Error(fmt::format("key selection: cannot keep {} of {} keys", t, ranking.size()));
  std::vector<int> sel(ranking.begin(), ranking.begin() + t);
  std::sort(sel.begin(), sel.end());
  return sel;
}

}  // namespace kvcompact
