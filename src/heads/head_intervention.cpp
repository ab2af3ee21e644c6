#include "heads/head_intervention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace kvcompact {

Ablation parse_ablation(const std::string& text) {
  if (text == "zero") return Ablation::Zero;
  if (text == "mean") return Ablation::Mean;
  if (text == "uniform") return Ablation::Uniform;
  if (text == "scale") return Ablation::Scale;
  throw Error(fmt::format("unknown ablation \"{}\" (expected zero, mean, uniform or scale[:F])", text));
}

AblationSpec parse_ablation_spec(const std::string& text) {
  AblationSpec spec;
  if (text.rfind("scale:", 0) != 0) {
    spec.ablation = parse_ablation(text);
    return spec;
  }
  spec.ablation = Ablation::Scale;
  const std::string value = text.substr(6);
  const char* begin = value.c_str();
  char* end = nullptr;
  errno = 0;
  const double f = value.empty() ? std::nan("") : std::strtod(begin, &end);
  if (value.empty() || end != begin + value.size() || errno != 0 || !std::isfinite(f))
    throw Error(fmt::format("ablation \"{}\": the scale factor \"{}\" is not a number", text, value));
  if (!(f > 0.0 && f <= 1.0))
    throw Error(fmt::format("ablation \"{}\": the scale factor {} is outside (0, 1]", text, value));
  if (f < 1e-30)  // float32 outputs times f would underflow to 0 (or denormals): that is zero ablation
    throw Error(fmt::format("ablation \"{}\": the scale factor {} is below 1e-30, where float32 head outputs "
                            "underflow to 0 (use --ablation zero)",
                            text, value));
  spec.scale = f;
  return spec;
}

std::string to_string(const AblationSpec& spec) {
  if (spec.ablation == Ablation::Scale) return fmt::format("scale:{}", spec.scale);
  return to_string(spec.ablation);
}

MaskPositions parse_mask_positions(const std::string& text) {
  if (text == "all") return MaskPositions::All;
  if (text == "last") return MaskPositions::Last;
  throw Error(fmt::format("unknown mask positions \"{}\" (expected last or all)", text));
}

std::string to_string(MaskPositions positions) { return positions == MaskPositions::Last ? "last" : "all"; }

std::string to_string(Ablation ablation) {
  switch (ablation) {
    case Ablation::Zero: return "zero";
    case Ablation::Mean: return "mean";
    case Ablation::Uniform: return "uniform";
    case Ablation::Scale: return "scale";
  }
  return "?";
}

HeadIntervention::HeadIntervention(const ModelConfig& config, std::vector<QueryHeadId> heads,
                                   Ablation ablation, const HeadMeans* means,
                                   ForwardObserver* inner, HeadInterventionOptions options)
    : config_(config), heads_(std::move(heads)), by_layer_(config.n_layers), ablation_(ablation),
      means_(means), inner_(inner), options_(options) {
  if (ablation_ == Ablation::Scale && !(options_.scale > 0.0 && options_.scale <= 1.0))
    throw Error(fmt::format("head intervention: scale factor {} is outside (0, 1]", options_.scale));
  for (const QueryHeadId& h : heads_) {
    if (h.layer < 0 || h.layer >= config.n_layers || h.head < 0 || h.head >= config.n_heads)
      throw Error(fmt::format("head intervention: head {} is outside the model ({} layers x {} heads)",
                              query_head_name(h), config.n_layers, config.n_heads));
    by_layer_[h.layer].push_back(h.head);
  }
  if (ablation_ == Ablation::Mean) {
    if (means_ == nullptr) throw Error("head intervention: mean ablation needs head means (--head-means)");
    if (means_->n_layers != config.n_layers || means_->n_heads != config.n_heads ||
        means_->head_dim != config.head_dim)
      throw Error(fmt::format(
          "head intervention: head means are for {} layers x {} heads x head_dim {}, the model has "
          "{} x {} x {}",
          means_->n_layers, means_->n_heads, means_->head_dim, config.n_layers, config.n_heads,
          config.head_dim));
  }
}

void HeadIntervention::on_queries(const QueryView& v) {
  if (inner_) inner_->on_queries(v);
}

void HeadIntervention::on_layer_input(const LayerInputView& v) {
  if (inner_) inner_->on_layer_input(v);
}

void HeadIntervention::on_attention_output(const AttentionContext& ctx, HeadRows<float> att) {
  const std::vector<int>& masked = by_layer_[ctx.layer];
  const int hd = ctx.head_dim(), n = ctx.n_tokens();
  const int group = ctx.group_size();
  std::vector<double> acc;
  const int first_row = options_.positions == MaskPositions::Last ? std::max(0, n - 1) : 0;
  const float factor = static_cast<float>(options_.scale);
  for (int h : masked) {
    for (int i = first_row; i < n; ++i) {
      float* out = att.head(i, h).data();
      switch (ablation_) {
        case Ablation::Zero:
          std::fill(out, out + hd, 0.0f);
          break;
        case Ablation::Scale:
          for (int d = 0; d < hd; ++d) out[d] *= factor;
          break;
        case Ablation::Mean: {
          const float* m = means_->head(ctx.layer, h);
          std::copy(m, m + hd, out);
          break;
        }
        case Ablation::Uniform: {
          // weights softmax(beta_j) over the visible entries j = lo .. L - n + i
          const AttentionHeadView& v = ctx.heads[h / group];
          const int visible = v.length - n + i + 1;
          const int lo = first_visible(v, n, i);  // sliding-window layers: only the window
          float bmax = -INFINITY;
          for (int j = lo; j < visible; ++j) bmax = std::max(bmax, v.beta[j]);
          acc.assign(hd, 0.0);
          double total = 0;
          for (int j = lo; j < visible; ++j) {
            const double w = std::exp(static_cast<double>(v.beta[j]) - bmax);
            total += w;
            const float* val = v.values + static_cast<std::size_t>(j) * hd;
            for (int d = 0; d < hd; ++d) acc[d] += w * val[d];
          }
          for (int d = 0; d < hd; ++d) out[d] = static_cast<float>(acc[d] / total);
          break;
        }
      }
    }
  }
  if (inner_) inner_->on_attention_output(ctx, att);
}

}  // namespace kvcompact
