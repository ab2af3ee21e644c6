// Head interventions (ablations) applied inside the forward pass, in prefill and in decoding.
#pragma once

#include <string>
#include <vector>

#include "analysis/head_means.h"
#include "analysis/head_set.h"
#include "core/config.h"
#include "model/transformer.h"

namespace kvcompact {

/// What replaces a masked head's attention output (before the output projection).
enum class Ablation {
  Zero,     ///< zeros
  Mean,     ///< the head's mean output over a reference text set (HeadMeans)
  Uniform,  ///< uniform attention over the visible entries: scores q.k/sqrt(d) replaced by 0, so
            ///< weights are softmax(beta) (equal weights for an ordinary, uncompacted cache)
};

/// "zero" | "mean" | "uniform". Throws Error naming the text otherwise.
Ablation parse_ablation(const std::string& text);
std::string to_string(Ablation ablation);

/// A ForwardObserver that overwrites the attention output of the chosen query heads in every
/// forward call it is passed to (prefill, teacher forcing and token-by-token decoding alike).
/// Other observer calls are forwarded to `inner` (if set), which sees the edited output.
/// GQA: masking a KV head means masking all query heads of its group (parse_head_set).
class HeadIntervention : public ForwardObserver {
 public:
  /// heads: query heads to mask (each in range, else Error). `means` is required for
  /// Ablation::Mean (shape checked against config, else Error) and must outlive this object.
  HeadIntervention(const ModelConfig& config, std::vector<QueryHeadId> heads, Ablation ablation,
                   const HeadMeans* means = nullptr, ForwardObserver* inner = nullptr);

  void on_queries(const QueryView& v) override;
  void on_layer_input(const LayerInputView& v) override;
  void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override;

  const std::vector<QueryHeadId>& heads() const { return heads_; }

 private:
  const ModelConfig& config_;
  std::vector<QueryHeadId> heads_;
  std::vector<std::vector<int>> by_layer_;  ///< [n_layers] masked query heads
  Ablation ablation_;
  const HeadMeans* means_;
  ForwardObserver* inner_;
};

}  // namespace kvcompact
