// AdaKV (arXiv 2407.11550, kvpress AdaKVPress) over kvpress's SnapKV scores as a layer-scoped
// compaction-method plug-in.
#pragma once

#include "compaction/adakv.h"
#include "compaction/method.h"

namespace kvcompact {

/// A configured adakv method.
class AdaKvMethod final : public Method {
 public:
  AdaKvMethod(const MethodInfo& info, const AdaKvOptions& options) : Method(info), options_(options) {}
  const AdaKvOptions& options() const { return options_; }
  std::vector<std::string> settings() const override;
  bool needs_context_queries() const override { return true; }
  bool layer_scoped() const override { return true; }
  /// Throws: adakv redistributes a layer's budget across its heads (use compact_cache).
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;
  std::vector<double> layer_head_scores(const HeadCompactionInput& in) const override;
  std::vector<std::vector<int>> layer_select(const std::vector<std::vector<double>>& head_scores,
                                             const std::vector<int>& budgets) const override;

 private:
  AdaKvOptions options_;
};

}  // namespace kvcompact
