// AdaKV (see adakv.h).
#include "compaction/adakv.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <tuple>

#include <fmt/format.h>

#include "compaction/key_selection.h"
#include "core/error.h"

namespace kvcompact {

std::vector<double> snapkv_press_scores(const HeadCompactionInput& in, const SnapKvOptions& options) {
  if (options.window < 1) throw Error(fmt::format("adakv: observation window {} must be >= 1", options.window));
  if (in.T < 2) throw Error(fmt::format("adakv: a context of {} entries is too short for SnapKV scores", in.T));
  SnapKvOptions o = options;
  o.window = std::min(options.window, in.T - 1);
  std::vector<double> s = snapkv_scores(in, o);
  const double norm = static_cast<double>(o.window) * in.group_size;
  double mx = -HUGE_VAL;
  for (double& x : s) mx = std::max(mx, x /= norm);
  s.resize(static_cast<std::size_t>(in.T), mx + 1.0);
  return s;
}

std::pair<int, int> adakv_forced_range(const AdaKvOptions& options, int T) {
  if (options.scorer == AdaKvScorer::Expected) return {0, std::min(options.expected.n_sink, T)};
  const int w = std::max(0, std::min(options.snapkv.window, T - 1));
  return {T - w, T};
}

void adakv_raise_forced(std::vector<std::vector<double>>& head_scores, const AdaKvOptions& options) {
  double mx = -HUGE_VAL;
  for (const auto& s : head_scores)
    for (double x : s) mx = std::max(mx, x);
  for (auto& s : head_scores) {
    const auto [first, last] = adakv_forced_range(options, static_cast<int>(s.size()));
    for (int j = first; j < last; ++j) s[static_cast<std::size_t>(j)] = mx;
  }
}

std::vector<std::vector<int>> adakv_select(const std::vector<std::vector<double>>& head_scores,
                                           const std::vector<int>& budgets, double alpha) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) throw Error(fmt::format("adakv: alpha {} is outside [0, 1]", alpha));
  const std::size_t H = head_scores.size();
  if (budgets.size() != H) throw Error(fmt::format("adakv: {} budgets for {} heads", budgets.size(), H));
  std::vector<std::vector<int>> sel(H);
  std::vector<std::vector<char>> taken(H);
  std::vector<std::tuple<double, std::size_t, int>> rest;  // (score, head, index)
  long long left = 0;
  for (std::size_t h = 0; h < H; ++h) {
    const int T = static_cast<int>(head_scores[h].size()), b = budgets[h];
    if (b < 0 || b > T) throw Error(fmt::format("adakv: head {} cannot keep {} of {} entries", h, b, T));
    int safe = static_cast<int>(std::floor(b * alpha));
    if (alpha > 0.0 && b > 0) safe = std::max(1, safe);
    const std::vector<int> ranking = rank_keys(head_scores[h]);
    taken[h].assign(static_cast<std::size_t>(T), 0);
    for (int i = 0; i < safe; ++i) {
      sel[h].push_back(ranking[static_cast<std::size_t>(i)]);
      taken[h][static_cast<std::size_t>(ranking[static_cast<std::size_t>(i)])] = 1;
    }
    for (int j = 0; j < T; ++j)
      if (!taken[h][static_cast<std::size_t>(j)]) rest.emplace_back(head_scores[h][static_cast<std::size_t>(j)], h, j);
    left += b - safe;
  }
  std::stable_sort(rest.begin(), rest.end(), [](const auto& x, const auto& y) {
    if (std::get<0>(x) != std::get<0>(y)) return std::get<0>(x) > std::get<0>(y);
    if (std::get<1>(x) != std::get<1>(y)) return std::get<1>(x) < std::get<1>(y);
    return std::get<2>(x) < std::get<2>(y);
  });
  for (long long i = 0; i < left; ++i) sel[std::get<1>(rest[static_cast<std::size_t>(i)])].push_back(std::get<2>(rest[static_cast<std::size_t>(i)]));
  for (auto& s : sel) std::sort(s.begin(), s.end());
  return sel;
}

}  // namespace kvcompact
