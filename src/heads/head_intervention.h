// Head interventions (ablations) applied inside the forward pass, in prefill and in decoding.
#pragma once

#include <string>
#include <vector>

#include "heads/head_means.h"
#include "heads/head_set.h"
#include "core/config.h"
#include "model/transformer.h"

namespace kvcompact {

/// What replaces a masked head's attention output (before the output projection).
enum class Ablation {
  Zero,     ///< zeros
  Mean,     ///< the head's mean output over a reference text set (HeadMeans)
  Uniform,  ///< uniform attention over the visible entries: scores q.k/sqrt(d) replaced by 0, so
            ///< weights are softmax(beta) (equal weights for an ordinary, uncompacted cache)
  Scale,    ///< the output multiplied by a factor in (0, 1] (Cognitive Mirrors' head_Intervener,
            ///< which scales the o_proj input of the masked heads; 1e-4 there)
};

/// Which rows of a forward call an intervention edits.
enum class MaskPositions {
  All,   ///< every row (prefill, teacher forcing and decoding alike)
  Last,  ///< only the call's last row: in prefill + token-by-token decoding (generate_answer) the
         ///< prompt's last token and every generated token, as pyvene's `b[0, -1] *= mask` on
         ///< o_proj.input inside model.generate does in the Cognitive Mirrors code
};

/// The scale factor of Ablation::Scale when none is given.
inline constexpr double kDefaultAblationScale = 1e-4;

/// An ablation with its parameter.
struct AblationSpec {
  Ablation ablation = Ablation::Zero;
  double scale = kDefaultAblationScale;  ///< Ablation::Scale: the factor, in (0, 1]
};

/// "zero" | "mean" | "uniform" | "scale". Throws Error naming the text otherwise.
Ablation parse_ablation(const std::string& text);
/// "zero" | "mean" | "uniform" | "scale" | "scale:F" (F a number in (0, 1]; "scale" alone is
/// kDefaultAblationScale). Throws Error naming the text for another name, and naming the value
/// for a factor that is not a number or outside (0, 1].
AblationSpec parse_ablation_spec(const std::string& text);
std::string to_string(Ablation ablation);
/// "zero" | "mean" | "uniform" | "scale:F" (F printed in its shortest round-trip form, e.g.
/// "scale:0.0001"): the text parse_ablation_spec reads back.
std::string to_string(const AblationSpec& spec);
/// "all" | "last". Throws Error naming the text otherwise.
MaskPositions parse_mask_positions(const std::string& text);
std::string to_string(MaskPositions positions);

/// Options of a HeadIntervention beyond the ablation kind.
struct HeadInterventionOptions {
  double scale = kDefaultAblationScale;      ///< Ablation::Scale: the factor, in (0, 1]
  MaskPositions positions = MaskPositions::All;
};

/// A ForwardObserver that overwrites the attention output of the chosen query heads in every
/// forward call it is passed to (prefill, teacher forcing and token-by-token decoding alike).
/// Other observer calls are forwarded to `inner` (if set), which sees the edited output.
/// GQA: masking a KV head means masking all query heads of its group (parse_head_set).
class HeadIntervention : public ForwardObserver {
 public:
  /// heads: query heads to mask (each in range, else Error). `means` is required for
  /// Ablation::Mean (shape checked against config, else Error) and must outlive this object.
  /// options.scale must lie in (0, 1] for Ablation::Scale (else Error naming it); with
  /// options.positions Last only the last row of each forward call is edited.
  HeadIntervention(const ModelConfig& config, std::vector<QueryHeadId> heads, Ablation ablation,
                   const HeadMeans* means = nullptr, ForwardObserver* inner = nullptr,
                   HeadInterventionOptions options = {});

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
  HeadInterventionOptions options_;
};

}  // namespace kvcompact
