// The "knorm" plug-in: the keys of smallest L2 norm (knorm.h; kvpress KnormPress).
#include "compaction/knorm.h"
#include "compaction/method.h"

namespace kvcompact {

MethodEntry knorm_method() {
  static const MethodInfo info{"knorm", "Knorm (arXiv 2406.11430, kvpress KnormPress): the keys of smallest L2 norm; no keys", {}};
  return simple_method(info, [](const HeadCompactionInput& in, int b, std::uint64_t) { return compact_knorm(in, b); });
}

}  // namespace kvcompact
