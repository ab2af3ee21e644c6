// The "recent" plug-in: the last t keys, original values (baselines.h).
#include "compaction/baselines.h"
#include "compaction/method.h"

namespace kvcompact {

MethodEntry recent_method() {
  static const MethodInfo info{"recent", "the last t keys; no keys", {}};
  return simple_method(info, [](const HeadCompactionInput& in, int b, std::uint64_t) { return compact_recent(in, b); });
}

}  // namespace kvcompact
