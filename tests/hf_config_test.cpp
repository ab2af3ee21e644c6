// config.json -> ModelConfig for the four supported architectures (fields of published
// checkpoints: Llama-3.1-8B, Qwen2.5-0.5B, Qwen3-4B, Mistral-7B-v0.1), defaults, refusals, and
// the RoPE frequency scalings against hand-worked values.
#include "loaders/hf_config.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <numbers>

#include "core/error.h"
#include "test_util.h"
#include "ops/rope.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::expect_error;

const char* kLlama31 = R"({
  "architectures": ["LlamaForCausalLM"], "attention_bias": false, "attention_dropout": 0.0,
  "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009], "hidden_act": "silu",
  "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
  "max_position_embeddings": 131072, "mlp_bias": false, "model_type": "llama",
  "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8,
  "pretraining_tp": 1, "rms_norm_eps": 1e-05,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "rope_theta": 500000.0, "tie_word_embeddings": false, "torch_dtype": "bfloat16",
  "use_cache": true, "vocab_size": 128256})";

TEST(HfConfig, Llama31) {
  ModelConfig c = parse_hf_config(kLlama31, "config.json");
  EXPECT_EQ(c.architecture, "llama");
  EXPECT_EQ(c.dim, 4096);
  EXPECT_EQ(c.hidden_dim, 14336);
  EXPECT_EQ(c.n_layers, 32);
  EXPECT_EQ(c.n_heads, 32);
  EXPECT_EQ(c.n_kv_heads, 8);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.vocab_size, 128256);
  EXPECT_EQ(c.max_seq_len, 131072);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_style, RopeStyle::HalfSplit);
  EXPECT_FALSE(c.tied_classifier);
  EXPECT_FALSE(c.attention_qkv_bias || c.attention_out_bias || c.qk_norm);
  EXPECT_EQ(c.rope_scaling.type, RopeScalingType::Llama3);
  EXPECT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.high_freq_factor, 4.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
}

TEST(HfConfig, Qwen3Qwen2Mistral) {
  ModelConfig q3 = parse_hf_config(R"({"architectures":["Qwen3ForCausalLM"],"attention_bias":false,
    "bos_token_id":151643,"eos_token_id":151645,"head_dim":128,"hidden_act":"silu","hidden_size":2560,
    "intermediate_size":9728,"max_position_embeddings":40960,"model_type":"qwen3","num_attention_heads":32,
    "num_hidden_layers":36,"num_key_value_heads":8,"rms_norm_eps":1e-06,"rope_scaling":null,
    "rope_theta":1000000,"tie_word_embeddings":true,"vocab_size":151936})", "q3.json");
  EXPECT_EQ(q3.architecture, "qwen3");
  EXPECT_EQ(q3.head_dim, 128);  // explicit
  EXPECT_EQ(q3.q_dim(), 4096);  // != hidden_size
  EXPECT_TRUE(q3.qk_norm);
  EXPECT_TRUE(q3.tied_classifier);
  EXPECT_FALSE(q3.attention_qkv_bias);
  EXPECT_EQ(q3.rope_scaling.type, RopeScalingType::None);
  EXPECT_EQ(q3.eos_token_ids, (std::vector<int>{151645}));

  ModelConfig q2 = parse_hf_config(R"({"architectures":["Qwen2ForCausalLM"],"hidden_size":896,
    "intermediate_size":4864,"num_hidden_layers":24,"num_attention_heads":14,"num_key_value_heads":2,
    "rms_norm_eps":1e-06,"rope_theta":1000000.0,"tie_word_embeddings":true,"use_sliding_window":false,
    "vocab_size":151936,"max_position_embeddings":32768})", "q2.json");
  EXPECT_EQ(q2.head_dim, 64);
  EXPECT_TRUE(q2.attention_qkv_bias);
  EXPECT_FALSE(q2.attention_out_bias);
  EXPECT_FALSE(q2.qk_norm);

  ModelConfig m = parse_hf_config(R"({"architectures":["MistralForCausalLM"],"hidden_size":4096,
    "intermediate_size":14336,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8,
    "sliding_window":4096,"vocab_size":32000})", "m.json");
  EXPECT_EQ(m.architecture, "mistral");
  EXPECT_FLOAT_EQ(m.norm_eps, 1e-6f);      // default
  EXPECT_FLOAT_EQ(m.rope_theta, 10000.0f);  // default
  EXPECT_EQ(m.max_seq_len, 2048);           // default
  EXPECT_FALSE(m.tied_classifier);          // default
  EXPECT_EQ(m.bos_token_id, -1);
  EXPECT_TRUE(m.sliding(0) && m.sliding(31));  // Mistral's window applies to every layer
  EXPECT_EQ(m.layer(5).window, 4096);
  EXPECT_FALSE(q2.has_sliding_layers());        // use_sliding_window false

  ModelConfig d = parse_hf_config(R"({"model_type":"llama","hidden_size":64,"intermediate_size":172,
    "num_hidden_layers":5,"num_attention_heads":8,"vocab_size":512,"rope_scaling":{"type":"linear","factor":2.0}})", "d.json");
  EXPECT_EQ(d.n_kv_heads, 8);  // defaults to heads
  EXPECT_EQ(d.rope_scaling.type, RopeScalingType::Linear);
  EXPECT_EQ(d.rope_scaling.factor, 2.0f);
}

TEST(HfConfig, RefusalsNameTheField) {
  const std::string base = R"("hidden_size":64,"intermediate_size":96,"num_hidden_layers":2,"num_attention_heads":4,"vocab_size":10)";
  auto cfg = [&](const std::string& extra) { return "{" + base + "," + extra + "}"; };
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["GPT2LMHeadModel"])"), "c.json"); }, {"c.json", "GPT2LMHeadModel"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"rope_scaling":{"rope_type":"dynamic","factor":4})"), "c.json"); },
               {"c.json", "dynamic", "not implemented"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"rope_scaling":{"rope_type":"longrope","factor":4})"), "c.json"); },
               {"c.json", "longrope"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["Qwen2ForCausalLM"],"use_sliding_window":true)"), "c.json"); },
               {"c.json", "sliding_window"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"rope_scaling":{"rope_type":"llama3","factor":8})"), "c.json"); },
               {"c.json", "low_freq_factor"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"num_key_value_heads":3)"), "c.json"); },
               {"c.json", "num_key_value_heads 3"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"hidden_act":"gelu")"), "c.json"); },
               {"c.json", "hidden_act"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"mlp_bias":true)"), "c.json"); }, {"mlp_bias"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"eos_token_id":10)"), "c.json"); }, {"eos_token_id 10"});
  expect_error([&] { parse_hf_config(R"({"architectures":["LlamaForCausalLM"],"hidden_size":64})", "c.json"); },
               {"c.json", "intermediate_size"});
  expect_error([&] { parse_hf_config(cfg(R"("architectures":["LlamaForCausalLM"],"hidden_size":-1)").replace(1, 17, ""), "c.json"); },
               {"c.json"});
  expect_error([&] { parse_hf_config("{not json", "c.json"); }, {"c.json", "JSON"});
  expect_error([&] { read_hf_config("/nonexistent/config.json"); }, {"/nonexistent/config.json"});
}

TEST(HfConfig, RopeScalingFrequencies) {
  // head_dim 8, theta 10000: inv_freq = 1, 0.1, 0.01, 0.001.
  float f[4];
  RopeScaling none;
  rope_inv_freq(8, 10000.0f, none, f);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.1f);
  EXPECT_FLOAT_EQ(f[3], 0.001f);
  RopeScaling lin;
  lin.type = RopeScalingType::Linear;
  lin.factor = 4.0f;
  rope_inv_freq(8, 10000.0f, lin, f);
  EXPECT_FLOAT_EQ(f[1], 0.025f);
  // llama3, factor 8, low 1, high 4, original 1000: low_wavelen 1000, high_wavelen 250.
  // wavelengths 2pi*(1, 10, 100, 1000) = 6.28 (kept), 62.8 (kept), 628.3 (smoothed), 6283 (/8).
  // smoothed: s = (1000/628.32 - 1)/3 = 0.19718; f = (1 - s) * 0.01/8 + s * 0.01 = 0.0029754.
  RopeScaling l3;
  l3.type = RopeScalingType::Llama3;
  l3.factor = 8.0f;
  l3.low_freq_factor = 1.0f;
  l3.high_freq_factor = 4.0f;
  l3.original_max_position_embeddings = 1000;
  rope_inv_freq(8, 10000.0f, l3, f);
  EXPECT_FLOAT_EQ(f[0], 1.0f);
  EXPECT_FLOAT_EQ(f[1], 0.1f);
  const double s = (1000.0 / (2 * std::numbers::pi * 100) - 1.0) / 3.0;
  EXPECT_NEAR(s, 0.19718, 1e-5);
  EXPECT_NEAR(f[2], (1 - s) * 0.01 / 8 + s * 0.01, 1e-9);
  EXPECT_NEAR(f[2], 0.0029754, 1e-7);
  EXPECT_FLOAT_EQ(f[3], 0.000125f);
  // rope_angles with scaling uses these frequencies: position 3, pair 3 -> angle 3 * 0.000125.
  float c[4], sn[4];
  rope_angles(3, 1, 8, 10000.0f, l3, c, sn);
  EXPECT_NEAR(sn[3], std::sin(3 * 0.000125), 1e-7);
  EXPECT_NEAR(c[2], std::cos(3 * f[2]), 1e-7);
  l3.high_freq_factor = 1.0f;
  EXPECT_THROW(rope_inv_freq(8, 10000.0f, l3, f), Error);
}

}}  // namespace
}  // namespace kvcompact
