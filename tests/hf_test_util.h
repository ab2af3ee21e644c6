// Test helpers for Hugging Face checkpoints: write config.json + safetensors folders with random
// (or given) weights in F32 / F16 / BF16. Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/safetensors.h"
#include "core/half.h"

namespace kvcompact::testing {

/// A fresh scratch folder under KVC_TEST_TMP.
inline std::string hf_tmp_dir(const std::string& name) {
  namespace fs = std::filesystem;
  fs::path p = fs::path(KVC_TEST_TMP) / "hf" / name;
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

/// One named float tensor to be written in some dtype.
struct HfTensor {
  std::string name;
  std::vector<std::int64_t> shape;
  std::vector<float> values;
};

/// Encodes values as "F32", "F16" or "BF16" bytes.
inline std::vector<std::uint8_t> encode_dtype(const std::vector<float>& v, const std::string& dtype) {
  std::vector<std::uint8_t> out;
  if (dtype == "F32") {
    out.resize(v.size() * 4);
    std::memcpy(out.data(), v.data(), out.size());
  } else {
    out.resize(v.size() * 2);
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::uint16_t h = dtype == "F16" ? f32_to_f16(v[i]) : f32_to_bf16(v[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  }
  return out;
}

/// Writes tensors (all in `dtype`) to `path` as one safetensors file.
inline void write_hf_tensors(const std::string& path, const std::vector<HfTensor>& ts, const std::string& dtype) {
  std::vector<std::vector<std::uint8_t>> bytes;
  std::vector<SafetensorsWriteTensor> w;
  for (const auto& t : ts) bytes.push_back(encode_dtype(t.values, dtype));
  for (std::size_t i = 0; i < ts.size(); ++i)
    w.push_back({ts[i].name, dtype, ts[i].shape, bytes[i].data(), bytes[i].size()});
  write_safetensors(path, w, {{"format", "pt"}});
}

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

/// Shape of a small random checkpoint.
struct HfSpec {
  std::string arch = "LlamaForCausalLM";  ///< or Qwen2ForCausalLM, Qwen3ForCausalLM, Mistral...
  int hidden = 32, intermediate = 48, layers = 2, heads = 4, kv_heads = 2, head_dim = 0, vocab = 50;
  bool tied = false;
  bool attention_bias = false;  ///< config attention_bias (Llama/Qwen3)
  nlohmann::json rope_scaling = nullptr;
  double rope_theta = 10000.0;
};

/// config.json text for a spec.
inline nlohmann::json hf_config_json(const HfSpec& s) {
  nlohmann::json j = {{"architectures", {s.arch}},
                      {"hidden_size", s.hidden},
                      {"intermediate_size", s.intermediate},
                      {"num_hidden_layers", s.layers},
                      {"num_attention_heads", s.heads},
                      {"num_key_value_heads", s.kv_heads},
                      {"vocab_size", s.vocab},
                      {"rms_norm_eps", 1e-6},
                      {"rope_theta", s.rope_theta},
                      {"max_position_embeddings", 4096},
                      {"tie_word_embeddings", s.tied},
                      {"attention_bias", s.attention_bias},
                      {"hidden_act", "silu"},
                      {"bos_token_id", 1},
                      {"eos_token_id", {2, 3}},
                      {"rope_scaling", s.rope_scaling}};
  if (s.head_dim > 0) j["head_dim"] = s.head_dim;
  return j;
}

/// The random tensors of a spec (names as transformers writes them), deterministic by seed.
inline std::vector<HfTensor> random_hf_tensors(const HfSpec& s, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::int64_t D = s.hidden, H = s.intermediate, hd = s.head_dim > 0 ? s.head_dim : s.hidden / s.heads,
                     Q = s.heads * hd, KV = s.kv_heads * hd, V = s.vocab;
  const bool qwen2 = s.arch == "Qwen2ForCausalLM", qwen3 = s.arch == "Qwen3ForCausalLM";
  auto rnd = [&](std::vector<std::int64_t> shape, float a, float center = 0.0f) {
    std::int64_t n = 1;
    for (auto d : shape) n *= d;
    std::uniform_real_distribution<float> u(-a, a);
    HfTensor t{"", shape, std::vector<float>(static_cast<std::size_t>(n))};
    for (auto& x : t.values) x = center + u(rng);
    return t;
  };
  auto mat = [&](std::int64_t out, std::int64_t in) { return rnd({out, in}, std::sqrt(3.0f / static_cast<float>(in))); };
  auto named = [](HfTensor t, std::string n) { t.name = std::move(n); return t; };
  std::vector<HfTensor> ts;
  ts.push_back(named(rnd({V, D}, 1.0f), "model.embed_tokens.weight"));
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    ts.push_back(named(rnd({D}, 0.1f, 1.0f), p + "input_layernorm.weight"));
    ts.push_back(named(rnd({D}, 0.1f, 1.0f), p + "post_attention_layernorm.weight"));
    ts.push_back(named(mat(Q, D), p + "self_attn.q_proj.weight"));
    ts.push_back(named(mat(KV, D), p + "self_attn.k_proj.weight"));
    ts.push_back(named(mat(KV, D), p + "self_attn.v_proj.weight"));
    ts.push_back(named(mat(D, Q), p + "self_attn.o_proj.weight"));
    if (qwen2 || s.attention_bias) {
      ts.push_back(named(rnd({Q}, 0.5f), p + "self_attn.q_proj.bias"));
      ts.push_back(named(rnd({KV}, 0.5f), p + "self_attn.k_proj.bias"));
      ts.push_back(named(rnd({KV}, 0.5f), p + "self_attn.v_proj.bias"));
    }
    if (!qwen2 && s.attention_bias) ts.push_back(named(rnd({D}, 0.5f), p + "self_attn.o_proj.bias"));
    if (qwen3) {
      ts.push_back(named(rnd({hd}, 0.5f, 1.0f), p + "self_attn.q_norm.weight"));
      ts.push_back(named(rnd({hd}, 0.5f, 1.0f), p + "self_attn.k_norm.weight"));
    }
    ts.push_back(named(mat(H, D), p + "mlp.gate_proj.weight"));
    ts.push_back(named(mat(H, D), p + "mlp.up_proj.weight"));
    ts.push_back(named(mat(D, H), p + "mlp.down_proj.weight"));
  }
  ts.push_back(named(rnd({D}, 0.1f, 1.0f), "model.norm.weight"));
  if (!s.tied) ts.push_back(named(mat(V, D), "lm_head.weight"));
  return ts;
}

/// Writes config.json + model.safetensors for a random spec into a fresh folder; returns it.
inline std::string write_random_hf_checkpoint(const std::string& name, const HfSpec& s, const std::string& dtype,
                                              std::uint64_t seed = 7) {
  const std::string dir = hf_tmp_dir(name);
  write_text(dir + "/config.json", hf_config_json(s).dump(2));
  write_hf_tensors(dir + "/model.safetensors", random_hf_tensors(s, seed), dtype);
  return dir;
}

}  // namespace kvcompact::testing
