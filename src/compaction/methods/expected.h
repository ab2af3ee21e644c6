// ExpectedAttention (kvpress ExpectedAttentionPress) as a compaction-method plug-in.
#pragma once

#include "compaction/expected_attention.h"
#include "compaction/method.h"

namespace kvcompact {

/// A configured expected method.
class ExpectedMethod final : public Method {
 public:
  ExpectedMethod(const MethodInfo& info, const ExpectedAttentionOptions& options) : Method(info), options_(options) {}
  const ExpectedAttentionOptions& options() const { return options_; }
  std::vector<std::string> settings() const override;
  bool needs_context_queries() const override { return true; }
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;

 private:
  ExpectedAttentionOptions options_;
};

}  // namespace kvcompact
