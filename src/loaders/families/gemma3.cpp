// Gemma 3 (text): config.json (Gemma3ForCausalLM / model_type gemma3_text, transformers 5.2
// Gemma3TextConfig) and GGUF `gemma3` metadata (llama.cpp src/models/gemma3.cpp) -> ModelConfig.
//
// Every layer: RMSNorm before and after attention and MLP (NormPlacement::PrePost), QK-norm,
// GeGLU with tanh GELU, HalfSplit RoPE; embeddings times sqrt(hidden_size) (rounded to float, as
// transformers' float32 embed_scale and ggml_scale); tied classifier by default. Sliding layers
// use the window and the local RoPE base (no scaling); global layers the global base and the
// global RoPE scaling (e.g. linear factor 8 for 4B and up). Checkpoint RMSNorm weights w are
// applied as (1 + w): the HF loader adds 1 (ModelConfig::norm_weight_shift), GGUF files have it
// folded in already (convert_hf_to_gguf Gemma3Model.norm_shift).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "loaders/families/families.h"

namespace kvcompact {

namespace {

void gemma3_common(ModelConfig& c, const std::vector<bool>& sliding, int window, const RopeSpec& local,
                   const RopeSpec& global, float attention_scale) {
  c.rope_style = RopeStyle::HalfSplit;
  c.qk_norm = true;
  c.attention_qkv_bias = c.attention_out_bias = false;
  c.embedding_scale = static_cast<float>(std::sqrt(static_cast<double>(c.dim)));
  c.rope_theta = global.theta;
  c.rope_scaling = global.scaling;
  c.layers.assign(static_cast<std::size_t>(c.n_layers), LayerSpec{});
  for (int l = 0; l < c.n_layers; ++l) {
    LayerSpec& s = c.layers[static_cast<std::size_t>(l)];
    s.norm = NormPlacement::PrePost;
    s.mlp = MlpKind::GeGLUTanh;
    s.attention_scale = attention_scale;
    if (sliding[static_cast<std::size_t>(l)]) {
      s.attention = AttentionKind::Sliding;
      s.window = window;
      s.rope = local;
    } else {
      s.rope = global;
    }
  }
}

}  // namespace

void hf_gemma3_family(const HfConfigReader& r, ModelConfig& c) {
  const nlohmann::json& j = r.j;
  hf_check_activation(r, "gelu_pytorch_tanh");
  if (r.present("attn_logit_softcapping")) r.fail("field attn_logit_softcapping is not implemented (Gemma 2 style)");
  if (r.bool_or("use_bidirectional_attention", false)) r.fail("field use_bidirectional_attention = true is unsupported");
  if (r.bool_or("attention_bias", false)) r.fail("field attention_bias = true is unsupported for Gemma 3");
  c.tied_classifier = r.bool_or("tie_word_embeddings", true);
  c.norm_weight_shift = 1.0f;  // Gemma3RMSNorm: x_normed * (1 + w)
  if (r.present("final_logit_softcapping")) {
    c.final_logit_softcap = static_cast<float>(r.number_or(j, "final_logit_softcapping", 0.0));
    if (!(c.final_logit_softcap > 0.0f)) r.fail("field final_logit_softcapping is not positive");
  }
  const double qpas = r.number_or(j, "query_pre_attn_scalar", 256.0);
  if (!(qpas > 0.0)) r.fail(fmt::format("field query_pre_attn_scalar = {} is not positive", qpas));
  const float attention_scale = static_cast<float>(std::pow(qpas, -0.5));

  // Layer kinds: layer_types, else sliding_window_pattern (layer i slides unless (i+1) % n == 0).
  std::vector<bool> sliding(static_cast<std::size_t>(c.n_layers));
  if (r.present("layer_types")) {
    const nlohmann::json& t = j["layer_types"];
    if (!t.is_array() || static_cast<int>(t.size()) != c.n_layers)
      r.fail(fmt::format("field layer_types is not a list of {} layer types", c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
      const std::string k = t[l].is_string() ? t[l].get<std::string>() : "";
      if (k != "sliding_attention" && k != "full_attention")
        r.fail(fmt::format("field layer_types[{}] = {} is not full_attention or sliding_attention", l, t[l].dump()));
      sliding[static_cast<std::size_t>(l)] = k == "sliding_attention";
    }
  } else if (r.present("sliding_window_pattern")) {
    const int n = r.positive_int("sliding_window_pattern");
    for (int l = 0; l < c.n_layers; ++l) sliding[static_cast<std::size_t>(l)] = (l + 1) % n != 0;
  } else {
    r.fail("fields layer_types and sliding_window_pattern are both missing (Gemma 3 needs the layer pattern)");
  }
  bool any_sliding = false;
  for (bool b : sliding) any_sliding = any_sliding || b;
  const int window = any_sliding ? hf_sliding_window(r) : 0;
  if (c.max_seq_len > 0 && window > c.max_seq_len)
    r.fail(fmt::format("field sliding_window = {} is larger than the context length max_position_embeddings = {}",
                       window, c.max_seq_len));

  // RoPE: rope_parameters {full_attention: {...}, sliding_attention: {...}} (transformers 5.x), or
  // rope_theta (global, default 1e6) + rope_local_base_freq (10000) + rope_scaling (global only).
  RopeSpec global{1000000.0f, {}}, local{10000.0f, {}};
  global.theta = static_cast<float>(r.number_or(j, "rope_theta", 1000000.0));
  local.theta = static_cast<float>(r.number_or(j, "rope_local_base_freq", 10000.0));
  const nlohmann::json* rp = r.present("rope_parameters") ? &j["rope_parameters"] : nullptr;
  if (rp && !rp->is_object()) r.fail("field rope_parameters is not an object");
  if (rp && (rp->contains("full_attention") || rp->contains("sliding_attention"))) {
    for (const char* kind : {"full_attention", "sliding_attention"}) {
      if (!rp->contains(kind) || (*rp)[kind].is_null()) continue;
      const nlohmann::json& o = (*rp)[kind];
      if (!o.is_object()) r.fail(fmt::format("field rope_parameters.{} is not an object", kind));
      RopeSpec& dst = std::string(kind) == "full_attention" ? global : local;
      dst.theta = static_cast<float>(r.number_or(o, "rope_theta", dst.theta));
      dst.scaling = hf_rope_scaling(r, o, fmt::format("rope_parameters.{}", kind), c.max_seq_len);
    }
  } else if (rp) {
    global.theta = static_cast<float>(r.number_or(*rp, "rope_theta", global.theta));
    global.scaling = hf_rope_scaling(r, *rp, "rope_parameters", c.max_seq_len);
  }
  if (r.present("rope_scaling")) {
    if (!j["rope_scaling"].is_object()) r.fail("field rope_scaling is not an object or null");
    global.scaling = hf_rope_scaling(r, j["rope_scaling"], "rope_scaling", c.max_seq_len);
  }
  for (const RopeSpec* s : {&global, &local})
    if (!(s->theta > 0.0f) || !std::isfinite(s->theta)) r.fail(fmt::format("RoPE theta {} is not positive", s->theta));
  gemma3_common(c, sliding, window, local, global, attention_scale);
}

void gguf_gemma3_family(const GgufFile& f, ModelConfig& c) {
  // llama.cpp llama_model_gemma3::load_arch_hparams.
  const std::string key = "gemma3.attention.sliding_window";
  if (!f.has(key)) throw Error(fmt::format("{}: metadata {} is missing (Gemma 3 needs its window)", f.path(), key));
  const std::int64_t w = f.get_int(key);
  if (w <= 0 || w > INT32_MAX) throw Error(fmt::format("{}: metadata {} = {} is not a positive int32", f.path(), key, w));
  if (c.max_seq_len > 0 && w > c.max_seq_len)
    throw Error(fmt::format("{}: metadata {} = {} is larger than the context length gemma3.context_length = {}",
                            f.path(), key, w, c.max_seq_len));
  // Pattern: gemma3.attention.sliding_window_pattern, a per-layer bool array or a period n (layer
  // i slides when i % n < n - 1); llama.cpp's default period is 6 (convert_hf_to_gguf does not
  // write the key for Gemma 3).
  std::vector<bool> sliding(static_cast<std::size_t>(c.n_layers));
  const std::string pk = "gemma3.attention.sliding_window_pattern";
  const GgufValue* pv = f.has(pk) ? &f.value(pk) : nullptr;
  if (pv && pv->type == GgufValueType::ARRAY) {
    if (static_cast<int>(pv->array.size()) != c.n_layers)
      throw Error(fmt::format("{}: metadata {} has {} entries for {} layers", f.path(), pk, pv->array.size(), c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
      const GgufValue& e = pv->array[static_cast<std::size_t>(l)];
      if (e.type != GgufValueType::BOOL) throw Error(fmt::format("{}: metadata {} is not a bool array", f.path(), pk));
      sliding[static_cast<std::size_t>(l)] = e.i != 0;
    }
  } else {
    const std::int64_t n = pv ? f.get_int(pk) : 6;
    if (n < 0 || n > INT32_MAX) throw Error(fmt::format("{}: metadata {} = {} is negative", f.path(), pk, n));
    for (int l = 0; l < c.n_layers; ++l) sliding[static_cast<std::size_t>(l)] = n == 0 || l % n < n - 1;
  }
  RopeSpec global, local;
  global.theta = static_cast<float>(f.get_float_or("gemma3.rope.freq_base", 10000.0));
  global.scaling = gguf_rope_scaling(f, "gemma3", c.max_seq_len);
  local.theta = static_cast<float>(f.get_float_or("gemma3.rope.freq_base_swa", 10000.0));
  for (const RopeSpec* s : {&global, &local})
    if (!(s->theta > 0.0f) || !std::isfinite(s->theta))
      throw Error(fmt::format("{}: gemma3 RoPE base {} is not positive", f.path(), s->theta));
  c.final_logit_softcap = static_cast<float>(f.get_float_or("gemma3.final_logit_softcapping", 0.0));
  if (!(c.final_logit_softcap >= 0.0f))
    throw Error(fmt::format("{}: metadata gemma3.final_logit_softcapping is negative", f.path()));
  // llama.cpp: 1/sqrt(n_embd / n_head) for the 27B model (62 layers), else 1/sqrt(head_dim).
  const float scale = c.n_layers == 62 ? 1.0f / std::sqrt(static_cast<float>(c.dim / c.n_heads))
                                       : 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  gemma3_common(c, sliding, static_cast<int>(w), local, global, scale);
}

}  // namespace kvcompact
