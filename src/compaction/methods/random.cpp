// The "random" plug-in: t random keys (seeded), beta 0, original values (baselines.h).
#include "compaction/baselines.h"
#include "compaction/method.h"

namespace kvcompact {

MethodEntry random_method() {
  static const MethodInfo info{"random", "t random keys (seeded), beta 0, original values; no keys", {}};
  return simple_method(info, [](const HeadCompactionInput& in, int b, std::uint64_t seed) { return compact_random(in, b, seed); });
}

}  // namespace kvcompact
