// StreamingLLM (arXiv 2309.17453) as a compaction-method plug-in: attention sinks + recent keys.
#pragma once

#include "compaction/method.h"

namespace kvcompact {

/// A configured streaming method.
class StreamingMethod final : public Method {
 public:
  StreamingMethod(const MethodInfo& info, int sink) : Method(info), sink_(sink) {}
  int sink() const { return sink_; }  ///< attention-sink keys kept first (>= 0; default 4)
  std::vector<std::string> settings() const override;
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;

 private:
  int sink_;
};

}  // namespace kvcompact
