// hf_rope_scaling and gguf_rope_scaling (loaders/families/families.h, loaders/hf_config_reader.h).
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"
#include "loaders/families/families.h"

namespace kvcompact {

using json = nlohmann::json;

RopeScaling hf_rope_scaling(const HfConfigReader& r, const json& s, const std::string& where,
                            int max_position_embeddings) {
  RopeScaling rs;
  std::string type = "default";
  for (const char* key : {"rope_type", "type"})
    if (s.contains(key) && !s[key].is_null()) {
      if (!s[key].is_string()) r.fail(fmt::format("field {}.{} is not a string", where, key));
      type = s[key].get<std::string>();
      break;
    }
  if (type == "default") return rs;
  if (type != "linear" && type != "llama3" && type != "yarn")
    r.fail(fmt::format("{} type '{}' is not implemented (supported: default, linear, llama3, yarn)", where, type));
  if (!s.contains("factor") || !s["factor"].is_number()) r.fail(fmt::format("{} ({}) has no numeric factor", where, type));
  rs.factor = static_cast<float>(s["factor"].get<double>());
  if (!(rs.factor > 0.0f) || !std::isfinite(rs.factor))
    r.fail(fmt::format("field {}.factor = {} is not positive", where, rs.factor));
  auto original = [&] {
    if (!s.contains("original_max_position_embeddings") || s["original_max_position_embeddings"].is_null())
      return max_position_embeddings;  // transformers' standardize_rope_params default
    return r.positive_int_of(s["original_max_position_embeddings"],
                             (where + ".original_max_position_embeddings").c_str());
  };
  if (type == "linear") {
    rs.type = RopeScalingType::Linear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::Llama3;
    for (const char* key : {"low_freq_factor", "high_freq_factor"})
      if (!s.contains(key) || !s[key].is_number()) r.fail(fmt::format("{} (llama3) lacks a numeric {}", where, key));
    rs.low_freq_factor = static_cast<float>(s["low_freq_factor"].get<double>());
    rs.high_freq_factor = static_cast<float>(s["high_freq_factor"].get<double>());
    rs.original_max_position_embeddings = original();
    if (!(rs.low_freq_factor > 0.0f) || !(rs.high_freq_factor > rs.low_freq_factor))
      r.fail(fmt::format("{} (llama3) needs 0 < low_freq_factor ({}) < high_freq_factor ({})", where,
                         rs.low_freq_factor, rs.high_freq_factor));
  } else {
    rs.type = RopeScalingType::Yarn;
    rs.original_max_position_embeddings = original();
    // beta_fast / beta_slow: `or` defaults in transformers (0 or null -> default)
    const double bf = r.number_or(s, "beta_fast", 0.0), bs = r.number_or(s, "beta_slow", 0.0);
    rs.beta_fast = bf != 0.0 ? static_cast<float>(bf) : 32.0f;
    rs.beta_slow = bs != 0.0 ? static_cast<float>(bs) : 1.0f;
    if (s.contains("truncate") && !s["truncate"].is_null()) {
      if (!s["truncate"].is_boolean()) r.fail(fmt::format("field {}.truncate is not true/false", where));
      rs.truncate = s["truncate"].get<bool>();
    }
    auto mscale_of = [](double scale, double m) { return scale <= 1 ? 1.0 : 0.1 * m * std::log(scale) + 1.0; };
    const double af = r.number_or(s, "attention_factor", 0.0);
    const double ms = r.number_or(s, "mscale", 0.0), msa = r.number_or(s, "mscale_all_dim", 0.0);
    if (af != 0.0) {
      rs.attention_factor = static_cast<float>(af);
    } else if (ms != 0.0 && msa != 0.0) {
      rs.attention_factor = static_cast<float>(mscale_of(rs.factor, ms) / mscale_of(rs.factor, msa));
    } else {
      rs.attention_factor = static_cast<float>(mscale_of(rs.factor, 1.0));
    }
    if (!(rs.attention_factor > 0.0f) || !std::isfinite(rs.attention_factor))
      r.fail(fmt::format("{} (yarn) attention factor {} is not positive", where, rs.attention_factor));
  }
  return rs;
}

RopeScaling gguf_rope_scaling(const GgufFile& f, const std::string& arch, int context_length) {
  const std::string a = arch + ".rope.";
  RopeScaling rs;
  double factor = 0.0;
  if (f.has(a + "scaling.factor")) factor = f.get_float(a + "scaling.factor");
  else if (f.has(a + "scale_linear")) factor = f.get_float(a + "scale_linear");
  if (factor < 0.0 || !std::isfinite(factor))
    throw Error(fmt::format("{}: metadata {}scaling.factor = {} is negative", f.path(), a, factor));
  const std::string type = f.has(a + "scaling.type") ? f.get_string(a + "scaling.type") : "linear";
  if (type == "none") return rs;
  if (type != "linear" && type != "yarn")
    throw Error(fmt::format("{}: metadata {}scaling.type '{}' is not implemented (supported: none, linear, yarn)",
                            f.path(), a, type));
  if (factor == 0.0 || factor == 1.0) {
    if (type == "linear") return rs;
  }
  rs.factor = factor == 0.0 ? 1.0f : static_cast<float>(factor);
  if (type == "linear") {
    rs.type = RopeScalingType::Linear;
    return rs;
  }
  if (f.has(a + "scaling.yarn_log_multiplier") && f.get_float(a + "scaling.yarn_log_multiplier") != 0.0)
    throw Error(fmt::format("{}: metadata {}scaling.yarn_log_multiplier is not implemented", f.path(), a));
  rs.type = RopeScalingType::Yarn;
  const std::int64_t orig = f.get_int_or(a + "scaling.original_context_length", context_length);
  if (orig <= 0 || orig > INT32_MAX)
    throw Error(fmt::format("{}: metadata {}scaling.original_context_length = {} is not positive", f.path(), a, orig));
  rs.original_max_position_embeddings = static_cast<int>(orig);
  rs.beta_fast = static_cast<float>(f.get_float_or(a + "scaling.yarn_beta_fast", 32.0));
  rs.beta_slow = static_cast<float>(f.get_float_or(a + "scaling.yarn_beta_slow", 1.0));
  // llama.cpp: cos/sin times get_mscale(factor) (ggml's 1 + 0.1 ln(factor)) times rope.scaling.attn_factor.
  const double base = rs.factor <= 1.0f ? 1.0 : 0.1 * std::log(static_cast<double>(rs.factor)) + 1.0;
  rs.attention_factor = static_cast<float>(base * f.get_float_or(a + "scaling.attn_factor", 1.0));
  return rs;
}

}  // namespace kvcompact

namespace kvcompact {

void hf_uniform_rope(const HfConfigReader& r, ModelConfig& c) {
  const json& j = r.j;
  const json* scaling = nullptr;
  double theta = r.number_or(j, "rope_theta", 10000.0);
  if (r.present("rope_parameters")) {
    if (!j["rope_parameters"].is_object()) r.fail("field rope_parameters is not an object");
    theta = r.number_or(j["rope_parameters"], "rope_theta", theta);
    scaling = &j["rope_parameters"];
  }
  if (r.present("rope_scaling")) {
    if (!j["rope_scaling"].is_object()) r.fail("field rope_scaling is not an object or null");
    scaling = &j["rope_scaling"];
  }
  c.rope_theta = static_cast<float>(theta);
  if (!(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta)) r.fail(fmt::format("field rope_theta = {} is not positive", theta));
  if (scaling) {
    int orig = c.max_seq_len;
    if (r.present("original_max_position_embeddings")) orig = r.positive_int("original_max_position_embeddings");
    c.rope_scaling = hf_rope_scaling(r, *scaling, scaling == &j["rope_scaling"] ? "rope_scaling" : "rope_parameters", orig);
  }
}

void hf_check_activation(const HfConfigReader& r, const std::string& expected) {
  for (const char* key : {"hidden_act", "hidden_activation"})
    if (r.present(key) && (!r.j[key].is_string() || r.j[key].get<std::string>() != expected))
      r.fail(fmt::format("field {} = {} is unsupported (only {})", key, r.j[key].dump(), expected));
}

void set_sliding(ModelConfig& c, int layer, int window) {
  if (c.layers.empty()) c.layers.resize(static_cast<std::size_t>(c.n_layers));
  LayerSpec& s = c.layers.at(static_cast<std::size_t>(layer));
  s.attention = AttentionKind::Sliding;
  s.window = window;
}

int hf_sliding_window(const HfConfigReader& r) {
  if (!r.present("sliding_window")) r.fail("field sliding_window is missing (needed for sliding-window layers)");
  return r.positive_int("sliding_window");
}

}  // namespace kvcompact
