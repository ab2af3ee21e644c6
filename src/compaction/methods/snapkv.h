// SnapKV (arXiv 2404.14469) as a compaction-method plug-in, and PyramidKV (arXiv 2406.02069) as
// SnapKV's selection under the pyramid per-layer budget policy (as kvpress composes them).
#pragma once

#include "compaction/method.h"
#include "compaction/token_eviction.h"

namespace kvcompact {

/// A configured snapkv method (also the selection of pyramidkv).
class SnapKvMethod : public Method {
 public:
  SnapKvMethod(const MethodInfo& info, const SnapKvOptions& options) : Method(info), options_(options) {}
  const SnapKvOptions& options() const { return options_; }
  std::vector<std::string> settings() const override;
  bool needs_context_queries() const override { return true; }
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;

 private:
  SnapKvOptions options_;
};

/// A configured pyramidkv method: SnapKV in every head, budgets pyramid_budgets_for(L, T, t, beta).
class PyramidKvMethod final : public SnapKvMethod {
 public:
  PyramidKvMethod(const MethodInfo& info, const SnapKvOptions& options, double beta)
      : SnapKvMethod(info, options), beta_(beta) {}
  double beta() const { return beta_; }
  std::vector<std::string> settings() const override;
  int budget(int t, int T, int layer, int n_layers) const override;

 private:
  double beta_;
};

}  // namespace kvcompact
