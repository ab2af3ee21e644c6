#include "io/hf_config.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "io/error.h"

namespace kvcompact {

using json = nlohmann::json;

namespace {

struct Reader {
  const json& j;
  const std::string& name;

  [[noreturn]] void fail(const std::string& msg) const { throw Error(fmt::format("{}: {}", name, msg)); }
  bool present(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int positive_int(const char* key) const {
    if (!present(key)) fail(fmt::format("field {} is missing", key));
    return positive_int_of(j[key], key);
  }
  int positive_int_of(const json& v, const char* key) const {
    if (!v.is_number_integer()) fail(fmt::format("field {} is not an integer", key));
    const std::int64_t x = v.get<std::int64_t>();
    if (x <= 0 || x > INT32_MAX) fail(fmt::format("field {} = {} is not a positive int32", key, x));
    return static_cast<int>(x);
  }
  int positive_int_or(const char* key, int fallback) const { return present(key) ? positive_int(key) : fallback; }
  double number_or(const json& obj, const char* key, double fallback) const {
    if (!obj.contains(key) || obj[key].is_null()) return fallback;
    if (!obj[key].is_number()) fail(fmt::format("field {} is not a number", key));
    return obj[key].get<double>();
  }
  bool bool_or(const char* key, bool fallback) const {
    if (!present(key)) return fallback;
    if (!j[key].is_boolean()) fail(fmt::format("field {} is not true/false", key));
    return j[key].get<bool>();
  }
};

}  // namespace

ModelConfig parse_hf_config(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  if (!j.is_object()) throw Error(fmt::format("{}: not a JSON object", name));
  const Reader r{j, name};

  std::string arch;
  if (r.present("architectures")) {
    if (!j["architectures"].is_array() || j["architectures"].empty() || !j["architectures"][0].is_string())
      r.fail("field architectures is not a non-empty list of names");
    arch = j["architectures"][0].get<std::string>();
  }
  std::string model_type;
  if (r.present("model_type")) {
    if (!j["model_type"].is_string()) r.fail("field model_type is not a string");
    model_type = j["model_type"].get<std::string>();
  }
  std::string kind;  // llama, mistral, qwen2, qwen3
  if (arch == "LlamaForCausalLM") kind = "llama";
  else if (arch == "MistralForCausalLM") kind = "mistral";
  else if (arch == "Qwen2ForCausalLM") kind = "qwen2";
  else if (arch == "Qwen3ForCausalLM") kind = "qwen3";
  else if (arch.empty() && (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3"))
    kind = model_type;
  else
    r.fail(fmt::format("unsupported architecture '{}' (model_type '{}'); supported: LlamaForCausalLM, "
                       "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM",
                       arch, model_type));

  ModelConfig c;
  c.architecture = kind;
  c.dim = r.positive_int("hidden_size");
  c.hidden_dim = r.positive_int("intermediate_size");
  c.n_layers = r.positive_int("num_hidden_layers");
  c.n_heads = r.positive_int("num_attention_heads");
  c.n_kv_heads = r.positive_int_or("num_key_value_heads", c.n_heads);
  c.vocab_size = r.positive_int("vocab_size");
  c.max_seq_len = r.positive_int_or("max_position_embeddings", 2048);
  if (c.n_heads % c.n_kv_heads != 0)
    r.fail(fmt::format("num_attention_heads {} is not a multiple of num_key_value_heads {}", c.n_heads, c.n_kv_heads));
  if (r.present("head_dim")) {
    c.head_dim = r.positive_int("head_dim");
  } else {
    if (c.dim % c.n_heads != 0)
      r.fail(fmt::format("hidden_size {} is not a multiple of num_attention_heads {} (and no head_dim)", c.dim, c.n_heads));
    c.head_dim = c.dim / c.n_heads;
  }
  if (c.head_dim % 2 != 0) r.fail(fmt::format("head_dim {} is odd (RoPE needs pairs)", c.head_dim));
  c.norm_eps = static_cast<float>(r.number_or(j, "rms_norm_eps", 1e-6));
  if (!(c.norm_eps > 0.0f) || !std::isfinite(c.norm_eps)) r.fail(fmt::format("field rms_norm_eps = {} is not positive", c.norm_eps));

  if (r.present("hidden_act")) {
    if (!j["hidden_act"].is_string() || j["hidden_act"].get<std::string>() != "silu")
      r.fail(fmt::format("field hidden_act = {} is unsupported (only silu)", j["hidden_act"].dump()));
  }
  if (r.bool_or("mlp_bias", false)) r.fail("field mlp_bias = true is unsupported");
  if (kind == "qwen2" && r.bool_or("use_sliding_window", false)) r.fail("field use_sliding_window = true is unsupported");
  if (r.present("partial_rotary_factor") && r.number_or(j, "partial_rotary_factor", 1.0) != 1.0)
    r.fail("field partial_rotary_factor != 1 is unsupported (partial RoPE)");

  // RoPE: rope_theta (top level or rope_parameters) and rope_scaling (or rope_parameters).
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
    const json& s = *scaling;
    std::string type = "default";
    for (const char* key : {"rope_type", "type"})
      if (s.contains(key) && !s[key].is_null()) {
        if (!s[key].is_string()) r.fail(fmt::format("field rope_scaling.{} is not a string", key));
        type = s[key].get<std::string>();
        break;
      }
    RopeScaling& rs = c.rope_scaling;
    if (type == "default") {
      rs.type = RopeScalingType::None;
    } else if (type == "linear" || type == "llama3") {
      if (!s.contains("factor")) r.fail(fmt::format("rope_scaling ({}) has no factor", type));
      rs.factor = static_cast<float>(r.number_or(s, "factor", 1.0));
      if (!(rs.factor > 0.0f)) r.fail(fmt::format("field rope_scaling.factor = {} is not positive", rs.factor));
      if (type == "linear") {
        rs.type = RopeScalingType::Linear;
      } else {
        rs.type = RopeScalingType::Llama3;
        for (const char* key : {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"})
          if (!s.contains(key) || !s[key].is_number()) r.fail(fmt::format("rope_scaling (llama3) lacks a numeric {}", key));
        rs.low_freq_factor = static_cast<float>(s["low_freq_factor"].get<double>());
        rs.high_freq_factor = static_cast<float>(s["high_freq_factor"].get<double>());
        rs.original_max_position_embeddings = r.positive_int_of(s["original_max_position_embeddings"],
                                                                "rope_scaling.original_max_position_embeddings");
        if (!(rs.low_freq_factor > 0.0f) || !(rs.high_freq_factor > rs.low_freq_factor))
          r.fail(fmt::format("rope_scaling (llama3) needs 0 < low_freq_factor ({}) < high_freq_factor ({})",
                             rs.low_freq_factor, rs.high_freq_factor));
      }
    } else {
      r.fail(fmt::format("unsupported rope_scaling type '{}' (supported: default, linear, llama3)", type));
    }
  }
  c.rope_style = RopeStyle::HalfSplit;
  c.tied_classifier = r.bool_or("tie_word_embeddings", false);
  const bool attention_bias = r.bool_or("attention_bias", false);
  if (kind == "qwen2") {
    c.attention_qkv_bias = true;
    c.attention_out_bias = false;
  } else {
    c.attention_qkv_bias = attention_bias;
    c.attention_out_bias = attention_bias;
  }
  c.qk_norm = kind == "qwen3";

  if (r.present("bos_token_id")) {
    if (!j["bos_token_id"].is_number_integer()) r.fail("field bos_token_id is not an integer");
    c.bos_token_id = j["bos_token_id"].get<int>();
  }
  if (r.present("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number_integer()) {
      c.eos_token_ids.push_back(e.get<int>());
    } else if (e.is_array()) {
      for (const json& x : e) {
        if (!x.is_number_integer()) r.fail("field eos_token_id holds a non-integer");
        c.eos_token_ids.push_back(x.get<int>());
      }
    } else {
      r.fail("field eos_token_id is not an integer or a list");
    }
  }
  for (int id : c.eos_token_ids)
    if (id < 0 || id >= c.vocab_size) r.fail(fmt::format("eos_token_id {} is outside the vocabulary of {}", id, c.vocab_size));
  if (c.bos_token_id >= c.vocab_size || c.bos_token_id < -1)
    r.fail(fmt::format("bos_token_id {} is outside the vocabulary of {}", c.bos_token_id, c.vocab_size));
  return c;
}

ModelConfig read_hf_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  return parse_hf_config(ss.str(), path);
}

}  // namespace kvcompact
