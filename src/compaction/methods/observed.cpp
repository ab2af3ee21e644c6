// The "observed" plug-in: mean causal attention received (observed_attention.h; kvpress
// ObservedAttentionPress).
#include "compaction/method.h"
#include "compaction/observed_attention.h"

namespace kvcompact {

MethodEntry observed_method() {
  static const MethodInfo info{"observed",
                               "ObservedAttention (kvpress): causal attention received, divided by the number of\n"
                               "queries that see the key, group mean; no keys",
                               {}};
  return simple_method(
      info, [](const HeadCompactionInput& in, int b, std::uint64_t) { return compact_observed_attention(in, b); },
      /*needs_context_queries=*/true);
}

}  // namespace kvcompact
