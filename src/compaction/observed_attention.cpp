// ObservedAttention (see observed_attention.h).
#include "compaction/observed_attention.h"

#include <cstddef>

#include "compaction/score_eviction.h"
#include "compaction/token_eviction.h"

namespace kvcompact {

std::vector<double> observed_attention_scores(const HeadCompactionInput& in) {
  std::vector<double> s = causal_attention_votes(in, 0, in.T);
  for (std::size_t j = 0; j < s.size(); ++j)
    s[j] /= static_cast<double>(in.group_size) * static_cast<double>(in.T - static_cast<int>(j));
  return s;
}

CompactedHead compact_observed_attention(const HeadCompactionInput& in, int t) {
  if (t == 0) return compact_top_scores(in, std::vector<double>(static_cast<std::size_t>(in.T), 0.0), 0);
  return compact_top_scores(in, observed_attention_scores(in), t);
}

}  // namespace kvcompact
