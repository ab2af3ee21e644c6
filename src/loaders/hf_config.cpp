#include "loaders/hf_config.h"
#include "io/json_number.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "loaders/hf_config_reader.h"
#include "loaders/families/families.h"

namespace kvcompact {

using json = nlohmann::json;

ModelConfig parse_hf_config(const std::string& text, const std::string& name) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", name, e.what()));
  }
  if (!j.is_object()) throw Error(fmt::format("{}: not a JSON object", name));
  const HfConfigReader r{j, name};

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
  std::string kind;  // llama, mistral, qwen2, qwen3, gemma3
  if (arch == "LlamaForCausalLM") kind = "llama";
  else if (arch == "MistralForCausalLM") kind = "mistral";
  else if (arch == "Qwen2ForCausalLM") kind = "qwen2";
  else if (arch == "Qwen3ForCausalLM") kind = "qwen3";
  else if (arch == "Gemma3ForCausalLM") kind = "gemma3";
  else if (arch.empty() && (model_type == "llama" || model_type == "mistral" || model_type == "qwen2" || model_type == "qwen3"))
    kind = model_type;
  else if (arch.empty() && model_type == "gemma3_text")
    kind = "gemma3";
  else
    r.fail(fmt::format("unsupported architecture '{}' (model_type '{}'); supported: LlamaForCausalLM, "
                       "MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, Gemma3ForCausalLM (text)",
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

  if (r.bool_or("mlp_bias", false)) r.fail("field mlp_bias = true is unsupported");
  if (r.present("partial_rotary_factor") && r.number_or(j, "partial_rotary_factor", 1.0) != 1.0)
    r.fail("field partial_rotary_factor != 1 is unsupported (partial RoPE)");
  c.rope_style = RopeStyle::HalfSplit;  // transformers' rotate_half
  if (kind == "gemma3") hf_gemma3_family(r, c);
  else if (kind == "qwen2" || kind == "qwen3") hf_qwen_family(r, c);
  else hf_llama_family(r, c);

  if (r.present("bos_token_id")) {
    const auto bos = json_int(j["bos_token_id"]);
    if (!bos) r.fail("field bos_token_id is not an int32 integer");
    c.bos_token_id = *bos;
  }
  if (r.present("eos_token_id")) {
    const json& e = j["eos_token_id"];
    if (e.is_number()) {
      const auto eos = json_int(e);
      if (!eos) r.fail("field eos_token_id is not an int32 integer");
      c.eos_token_ids.push_back(*eos);
    } else if (e.is_array()) {
      for (const json& x : e) {
        const auto eos = json_int(x);
        if (!eos) r.fail("field eos_token_id holds a non-integer or one beyond int32");
        c.eos_token_ids.push_back(*eos);
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
