// ExpectedAttention (kvpress ExpectedAttentionPress) as a compaction-method plug-in.
#pragma once

#include "compaction/expected_attention.h"
#include "compaction/method.h"

#include <string>
#include <vector>

namespace kvcompact {

/// ExpectedAttention's keys (future, sink, cov, vnorm, eps) in canonical order, for the schemas of
/// expected and of adakv's expected scorer; `prefix` starts each description.
std::vector<MethodOption> expected_option_schema(const std::string& prefix);
/// Reads those keys from `s` over the defaults. Throws Error (MethodSettings::fail) on bad values.
ExpectedAttentionOptions parse_expected_options(const MethodSettings& s);
/// Appends the settings of `e` that differ from the defaults, as "key=value", in canonical order.
void append_expected_settings(const ExpectedAttentionOptions& e, std::vector<std::string>& items);

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
