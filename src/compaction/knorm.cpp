// Knorm (see knorm.h).
#include "compaction/knorm.h"

#include <cmath>
#include <cstddef>

#include "compaction/head_attention.h"
#include "compaction/score_eviction.h"

namespace kvcompact {

std::vector<double> knorm_scores(const HeadCompactionInput& in) {
  validate_head_input(in, "knorm");
  const std::size_t D = static_cast<std::size_t>(in.head_dim);
  std::vector<double> s(static_cast<std::size_t>(in.T));
  for (std::size_t j = 0; j < s.size(); ++j) {
    double acc = 0.0;
    for (std::size_t c = 0; c < D; ++c) acc += static_cast<double>(in.keys[j * D + c]) * in.keys[j * D + c];
    s[j] = -std::sqrt(acc);
  }
  return s;
}

CompactedHead compact_knorm(const HeadCompactionInput& in, int t) {
  return compact_top_scores(in, knorm_scores(in), t);
}

}  // namespace kvcompact
