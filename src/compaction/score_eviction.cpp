// Score-based eviction (see score_eviction.h).
#include "compaction/score_eviction.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include <fmt/format.h>

#include "compaction/baselines.h"
#include "compaction/head_attention.h"
#include "compaction/key_selection.h"
#include "core/error.h"

namespace kvcompact {

CompactedHead compact_top_scores(const HeadCompactionInput& in, const std::vector<double>& scores, int t) {
  validate_head_input(in, "score eviction");
  if (scores.size() != static_cast<std::size_t>(in.T))
    throw Error(fmt::format("score eviction: {} scores for {} entries", scores.size(), in.T));
  if (t < 0 || t > in.T) throw Error(fmt::format("score eviction: cannot keep {} of {} entries", t, in.T));
  return head_from_selection(in, top_keys(rank_keys(scores), t));
}

std::vector<double> position_attention(const HeadCompactionInput& in, int pos) {
  validate_head_input(in, "context attention");
  if (pos < 0 || pos >= in.T)
    throw Error(fmt::format("context attention: position {} outside the context of {}", pos, in.T));
  if (in.context_queries == nullptr)
    throw Error("context attention: the method needs the context queries, which were not given");
  if (in.group_size < 1) throw Error(fmt::format("context attention: group size {} must be >= 1", in.group_size));
  const std::size_t D = static_cast<std::size_t>(in.head_dim), g = static_cast<std::size_t>(in.group_size),
                    n = static_cast<std::size_t>(pos) + 1;
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  std::vector<double> out(n, 0.0), a(n);
  for (std::size_t h = 0; h < g; ++h) {
    const float* q = in.context_queries + (static_cast<std::size_t>(pos) * g + h) * D;
    double m = -HUGE_VAL;
    for (std::size_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (std::size_t c = 0; c < D; ++c) acc += static_cast<double>(q[c]) * in.keys[j * D + c];
      if (!std::isfinite(acc)) throw Error(fmt::format("context attention: query {} gives a non-finite logit", pos));
      a[j] = scale * acc;
      m = std::max(m, a[j]);
    }
    double z = 0.0;
    for (std::size_t j = 0; j < n; ++j) z += (a[j] = std::exp(a[j] - m));
    for (std::size_t j = 0; j < n; ++j) out[j] += a[j] / z / static_cast<double>(g);
  }
  return out;
}

}  // namespace kvcompact
