// H2O (arXiv 2306.14048) as a compaction-method plug-in: heavy hitters + recent keys.
#pragma once

#include "compaction/method.h"

namespace kvcompact {

/// A configured h2o method.
class H2oMethod final : public Method {
 public:
  H2oMethod(const MethodInfo& info, double recent) : Method(info), recent_(recent) {}
  double recent() const { return recent_; }  ///< fraction of the budget kept as recent keys, [0, 1]
  std::vector<std::string> settings() const override;
  bool needs_context_queries() const override { return true; }
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;

 private:
  double recent_;
};

}  // namespace kvcompact
