// The streaming plug-in (see streaming.h; token_eviction.h).
#include "compaction/methods/streaming.h"

#include <fmt/format.h>

#include "compaction/token_eviction.h"

namespace kvcompact {
namespace {

const MethodInfo& info_schema() {
  static const MethodInfo value{"streaming", "StreamingLLM (arXiv 2309.17453): first S sink keys + the most recent keys",
                       {{"sink", "S", "S >= 0 (default 4)"}}};
  return value;
}

}  // namespace

std::vector<std::string> StreamingMethod::settings() const {
  if (sink_ == 4) return {};
  return {fmt::format("sink={}", sink_)};
}

CompactedHead StreamingMethod::compact(const HeadCompactionInput& in, int budget, std::uint64_t) const {
  return compact_streaming(in, budget, sink_);
}

MethodEntry streaming_method() {
  return {&info_schema(), [](const MethodSettings& s) -> std::shared_ptr<const Method> {
            return std::make_shared<StreamingMethod>(info_schema(), s.has("sink") ? s.integer("sink", "N", 0, 1 << 30) : 4);
          }};
}

}  // namespace kvcompact
