// TOVA (see tova.h).
#include "compaction/tova.h"

#include <algorithm>
#include <cstddef>

#include <fmt/format.h>

#include "compaction/score_eviction.h"
#include "core/error.h"

namespace kvcompact {

std::vector<double> tova_head_scores(const HeadCompactionInput& in) {
  if (in.T <= 0) return {};
  std::vector<double> s = position_attention(in, in.T - 1);
  s.back() = 0.0;
  double mx = 0.0;
  for (std::size_t j = 0; j + 1 < s.size(); ++j) mx = std::max(mx, s[j]);
  s.back() = mx + 1.0;
  return s;
}

std::vector<double> tova_layer_scores(const std::vector<std::vector<double>>& head_scores) {
  if (head_scores.empty()) return {};
  std::vector<double> out(head_scores.front().size(), 0.0);
  for (const auto& h : head_scores) {
    if (h.size() != out.size())
      throw Error(fmt::format("tova: KV heads of one layer have {} and {} entries", out.size(), h.size()));
    for (std::size_t j = 0; j < out.size(); ++j) out[j] += h[j] / static_cast<double>(head_scores.size());
  }
  return out;
}

}  // namespace kvcompact
