// Attention Matching (arXiv 2602.16284) and its no-fit ablation as compaction-method plug-ins:
// families "am" and "attn-nofit" (the same key selection with beta 0 and the original values).
#pragma once

#include "compaction/attention_matching.h"
#include "compaction/method.h"

namespace kvcompact {

/// A configured am / attn-nofit method.
class AmMethod final : public Method {
 public:
  /// fit = false: attn-nofit (options.beta and options.c2 are ignored: beta 0, original values).
  AmMethod(const MethodInfo& info, const AttentionMatchingOptions& options, bool fit);

  /// The options as parsed (for attn-nofit, beta and c2 keep their defaults).
  const AttentionMatchingOptions& options() const { return options_; }
  /// The options compact() runs with (attn-nofit: beta zero, c2 direct).
  AttentionMatchingOptions effective_options() const;
  bool fits() const { return fit_; }

  std::vector<std::string> settings() const override;
  bool needs_reference_queries() const override { return true; }
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override;
  /// One AttentionMatcher (attention pass and key ranking) for every budget up to max_budget.
  std::unique_ptr<PreparedHead> prepare(const HeadCompactionInput& in, int max_budget,
                                        std::uint64_t seed) const override;

 private:
  AttentionMatchingOptions options_;
  bool fit_;
};

}  // namespace kvcompact
