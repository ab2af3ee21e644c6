// Hugging Face checkpoints end to end: stories260K converted to an HF Llama folder gives the
// llama2.c loader's logits; random Llama-3 / Qwen2 / Qwen3 checkpoints in F32, F16 and BF16 run
// and match a plain double-precision reference forward written here (biases, QK-norm, llama3
// RoPE scaling, rotate_half); bad folders throw Error naming the file and tensor.
#include "loaders/hf_loader.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <numbers>

#include "hf_test_util.h"
#include "core/error.h"
#include "test_util.h"
#include "loaders/llama2c_checkpoint.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "core/dequant.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using namespace kvcompact::testing;
namespace fs = std::filesystem;

// ---- plain reference forward (token at a time, double) -------------------------------------

double w_at(const WeightMatrix& W, std::int64_t r, std::int64_t c, std::int64_t cols) {
  return weight_element_ref(W, r, c, cols);
}

std::vector<double> matvec(const WeightMatrix& W, const std::vector<double>& x, int out) {
  const int in = static_cast<int>(x.size());
  std::vector<double> y(out, 0.0);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) y[o] += w_at(W, o, i, in) * x[i];
  return y;
}

void rms(std::vector<double>& x, std::size_t off, std::size_t n, const std::vector<float>& w, double eps) {
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  const double s = 1.0 / std::sqrt(ss / n + eps);
  for (std::size_t i = 0; i < n; ++i) x[off + i] = w[i] * x[off + i] * s;
}

// Inverse frequencies written from the transformers formulas (independent of ops/rope.cpp).
std::vector<double> ref_inv_freq(const ModelConfig& c) {
  const int hd = c.head_dim;
  std::vector<double> f(hd / 2);
  for (int j = 0; j < hd / 2; ++j) f[j] = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * j / hd);
  const RopeScaling& s = c.rope_scaling;
  if (s.type == RopeScalingType::Linear)
    for (auto& x : f) x /= s.factor;
  if (s.type == RopeScalingType::Llama3)
    for (auto& x : f) {
      const double wavelen = 2 * std::numbers::pi / x;
      const double lo_w = s.original_max_position_embeddings / s.low_freq_factor;
      const double hi_w = s.original_max_position_embeddings / s.high_freq_factor;
      if (wavelen > lo_w) {
        x = x / s.factor;
      } else if (wavelen >= hi_w) {
        const double sm = (s.original_max_position_embeddings / wavelen - s.low_freq_factor) /
                          (s.high_freq_factor - s.low_freq_factor);
        x = (1 - sm) * x / s.factor + sm * x;
      }
    }
  return f;
}

std::vector<std::vector<double>> ref_forward(const ModelConfig& c, const ModelWeights& w, const std::vector<int>& toks) {
  const int D = c.dim, hd = c.head_dim, nh = c.n_heads, nkv = c.n_kv_heads, Hd = c.hidden_dim;
  const std::vector<double> inv = ref_inv_freq(c);
  std::vector<std::vector<std::vector<double>>> K(c.n_layers), Vc(c.n_layers);  // [layer][pos][kv_dim]
  std::vector<std::vector<double>> logits;
  for (std::size_t t = 0; t < toks.size(); ++t) {
    std::vector<double> x(D);
    for (int i = 0; i < D; ++i) x[i] = w_at(w.token_embedding, toks[t], i, D);
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights& L = w.layers[l];
      std::vector<double> xn = x;
      rms(xn, 0, D, L.attn_norm, c.norm_eps);
      auto q = matvec(L.wq, xn, nh * hd), k = matvec(L.wk, xn, nkv * hd), v = matvec(L.wv, xn, nkv * hd);
      if (c.attention_qkv_bias) {
        for (int i = 0; i < nh * hd; ++i) q[i] += L.bq[i];
        for (int i = 0; i < nkv * hd; ++i) k[i] += L.bk[i], v[i] += L.bv[i];
      }
      if (c.qk_norm) {
        for (int h = 0; h < nh; ++h) rms(q, h * hd, hd, L.q_norm, c.norm_eps);
        for (int h = 0; h < nkv; ++h) rms(k, h * hd, hd, L.k_norm, c.norm_eps);
      }
      auto rope = [&](std::vector<double>& vec, int heads) {
        for (int h = 0; h < heads; ++h)
          for (int j = 0; j < hd / 2; ++j) {
            const double ang = static_cast<double>(t) * inv[j];
            const int a = h * hd + j, b = h * hd + j + hd / 2;  // rotate_half pairs
            const double v0 = vec[a], v1 = vec[b];
            vec[a] = v0 * std::cos(ang) - v1 * std::sin(ang);
            vec[b] = v0 * std::sin(ang) + v1 * std::cos(ang);
          }
      };
      rope(q, nh);
      rope(k, nkv);
      K[l].push_back(k);
      Vc[l].push_back(v);
      std::vector<double> att(nh * hd, 0.0);
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv);
        std::vector<double> sc(t + 1);
        double mx = -1e300;
        for (std::size_t j = 0; j <= t; ++j) {
          double s = 0;
          for (int i = 0; i < hd; ++i) s += q[h * hd + i] * K[l][j][g * hd + i];
          sc[j] = s / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, sc[j]);
        }
        double z = 0;
        for (auto& s : sc) z += (s = std::exp(s - mx));
        for (std::size_t j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += sc[j] / z * Vc[l][j][g * hd + i];
      }
      auto o = matvec(L.wo, att, D);
      for (int i = 0; i < D; ++i) x[i] += o[i] + (c.attention_out_bias ? L.bo[i] : 0.0);
      xn = x;
      rms(xn, 0, D, L.ffn_norm, c.norm_eps);
      auto g = matvec(L.w_gate, xn, Hd), u = matvec(L.w_up, xn, Hd);
      for (int i = 0; i < Hd; ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      auto d = matvec(L.w_down, g, D);
      for (int i = 0; i < D; ++i) x[i] += d[i];
    }
    rms(x, 0, D, w.final_norm, c.norm_eps);
    logits.push_back(matvec(w.classifier_matrix(), x, c.vocab_size));
  }
  return logits;
}

// Max |a - b| over all logits, and max |b|.
std::pair<double, double> compare(const std::vector<float>& fast, const std::vector<std::vector<double>>& ref) {
  double diff = 0, scale = 0;
  std::size_t V = ref[0].size();
  for (std::size_t t = 0; t < ref.size(); ++t)
    for (std::size_t v = 0; v < V; ++v) {
      diff = std::max(diff, std::abs(fast[t * V + v] - ref[t][v]));
      scale = std::max(scale, std::abs(ref[t][v]));
    }
  return {diff, scale};
}

std::vector<float> run_all(const Model& m, const std::vector<int>& toks) {
  Transformer tr(m.config, m.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  return tr.forward(toks, cache, o);
}

HfLoadOptions no_tok() {
  HfLoadOptions o;
  o.load_tokenizer = false;
  return o;
}

// ---- stories260K as an HF Llama checkpoint -------------------------------------------------

// transformers convert_llama_weights_to_hf.py `permute`:
// w.view(n_heads, dim1 / n_heads / 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2).
std::vector<float> hf_permute(const std::vector<float>& w, int n_heads, int dim1, int dim2) {
  const int hd = dim1 / n_heads, half = hd / 2;
  std::vector<float> out(w.size());
  for (int h = 0; h < n_heads; ++h)
    for (int i = 0; i < half; ++i)
      for (int j = 0; j < 2; ++j)
        std::copy_n(w.begin() + (static_cast<std::size_t>(h) * hd + 2 * i + j) * dim2, dim2,
                    out.begin() + (static_cast<std::size_t>(h) * hd + j * half + i) * dim2);
  return out;
}

TEST(HfModel, Stories260KConvertedToHfLlamaGivesTheSameLogits) {
  const std::string bin = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin";
  Llama2cCheckpoint ck = read_llama2c_checkpoint(bin);
  const ModelConfig& c = ck.config;
  const ModelWeights& w = ck.weights;
  std::vector<HfTensor> ts;
  const std::int64_t D = c.dim, H = c.hidden_dim, Q = c.q_dim(), KV = c.kv_dim(), V = c.vocab_size;
  ts.push_back({"model.embed_tokens.weight", {V, D}, w.token_embedding.f32()});
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const LayerWeights& L = w.layers[l];
    ts.push_back({p + "input_layernorm.weight", {D}, L.attn_norm});
    ts.push_back({p + "post_attention_layernorm.weight", {D}, L.ffn_norm});
    ts.push_back({p + "self_attn.q_proj.weight", {Q, D}, hf_permute(L.wq, c.n_heads, c.q_dim(), c.dim)});
    ts.push_back({p + "self_attn.k_proj.weight", {KV, D}, hf_permute(L.wk, c.n_kv_heads, c.kv_dim(), c.dim)});
    ts.push_back({p + "self_attn.v_proj.weight", {KV, D}, L.wv.f32()});
    ts.push_back({p + "self_attn.o_proj.weight", {D, Q}, L.wo.f32()});
    ts.push_back({p + "mlp.gate_proj.weight", {H, D}, L.w_gate.f32()});
    ts.push_back({p + "mlp.up_proj.weight", {H, D}, L.w_up.f32()});
    ts.push_back({p + "mlp.down_proj.weight", {D, H}, L.w_down.f32()});
  }
  ts.push_back({"model.norm.weight", {D}, w.final_norm});
  const std::string dir = hf_tmp_dir("stories260k_hf");
  write_hf_tensors(dir + "/model.safetensors", ts, "F32");
  nlohmann::json cfg = {{"architectures", {"LlamaForCausalLM"}}, {"model_type", "llama"},
                        {"hidden_size", c.dim}, {"intermediate_size", c.hidden_dim},
                        {"num_hidden_layers", c.n_layers}, {"num_attention_heads", c.n_heads},
                        {"num_key_value_heads", c.n_kv_heads}, {"vocab_size", c.vocab_size},
                        {"rms_norm_eps", 1e-5}, {"rope_theta", 10000.0}, {"max_position_embeddings", 512},
                        {"tie_word_embeddings", true}, {"hidden_act", "silu"}, {"bos_token_id", 1},
                        {"eos_token_id", 2}, {"rope_scaling", nullptr}};
  write_text(dir + "/config.json", cfg.dump());

  Model hf = load_hf_model(dir, no_tok());
  EXPECT_EQ(hf.config.rope_style, RopeStyle::HalfSplit);
  EXPECT_TRUE(hf.config.tied_classifier);
  EXPECT_TRUE(hf.weights.layers[0].wq.is_view());  // mapped, not copied
  const std::vector<int> toks = {1, 403, 407, 261, 378, 432, 360, 280, 294, 426, 2, 99, 17, 300};
  Model orig;
  orig.config = c;
  orig.weights = std::move(ck.weights);
  const std::vector<float> a = run_all(orig, toks), b = run_all(hf, toks);
  ASSERT_EQ(a.size(), b.size());
  float diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::abs(a[i] - b[i]));
  EXPECT_LT(diff, 1e-4f);
  // Without the permutation's counterpart (interleaved RoPE on HF rows) the logits differ.
  hf.config.rope_style = RopeStyle::Interleaved;
  const std::vector<float> wrong = run_all(hf, toks);
  float d2 = 0;
  for (std::size_t i = 0; i < a.size(); ++i) d2 = std::max(d2, std::abs(a[i] - wrong[i]));
  EXPECT_GT(d2, 1e-2f);
}

// ---- random Llama-3 / Qwen2 / Qwen3 checkpoints in three dtypes -----------------------------

struct Case {
  const char* name;
  HfSpec spec;
};

std::vector<Case> cases() {
  HfSpec llama3;
  llama3.arch = "LlamaForCausalLM";
  llama3.rope_theta = 500000.0;
  // Small original context so that all three llama3 regimes occur: head_dim 8, theta 5e5 gives
  // wavelengths 6.3 (kept, < 100), 167 (smoothed), 4443 and 1.2e5 (divided, > 400).
  llama3.rope_scaling = {{"rope_type", "llama3"}, {"factor", 8.0}, {"low_freq_factor", 1.0},
                         {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 400}};
  llama3.tied = true;
  llama3.attention_bias = true;
  HfSpec qwen2;
  qwen2.arch = "Qwen2ForCausalLM";
  qwen2.rope_theta = 1e6;
  HfSpec qwen3;
  qwen3.arch = "Qwen3ForCausalLM";
  qwen3.head_dim = 16;  // explicit, != hidden / heads
  qwen3.tied = true;
  qwen3.rope_theta = 1e6;
  return {{"llama3", llama3}, {"qwen2", qwen2}, {"qwen3", qwen3}};
}

TEST(HfModel, RandomCheckpointsMatchPlainReferenceInAllDtypes) {
  const std::vector<int> toks = {1, 5, 17, 42, 3, 9, 0, 33, 21, 48, 7, 12};
  for (const Case& cs : cases()) {
    std::vector<float> f32_logits;
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      SCOPED_TRACE(std::string(cs.name) + " " + dtype);
      const std::string dir = write_random_hf_checkpoint(std::string(cs.name) + "_" + dtype, cs.spec, dtype);
      Model m = load_hf_model(dir, no_tok());
      EXPECT_EQ(m.weights.layers[0].wq.type(),
                std::string(dtype) == "F32" ? WeightType::F32 : std::string(dtype) == "F16" ? WeightType::F16 : WeightType::BF16);
      const std::vector<float> fast = run_all(m, toks);
      const auto [diff, scale] = compare(fast, ref_forward(m.config, m.weights, toks));
      EXPECT_GT(scale, 0.5);
      EXPECT_LT(diff, 1e-5 * std::max(1.0, scale) * 10) << "max |logit| " << scale;
      if (std::string(dtype) == "F32") {
        f32_logits = fast;
      } else {
        // Rounded weights change the logits, but by little.
        double d = 0, s = 0;
        for (std::size_t i = 0; i < fast.size(); ++i) {
          d = std::max(d, static_cast<double>(std::abs(fast[i] - f32_logits[i])));
          s = std::max(s, static_cast<double>(std::abs(f32_logits[i])));
        }
        EXPECT_GT(d, 0.0);
        EXPECT_LT(d, 2e-2 * s);
      }
    }
  }
}

TEST(HfModel, ConfigFeaturesReachTheModel) {
  auto cs = cases();
  Model l3 = load_hf_model(write_random_hf_checkpoint("feat_llama3", cs[0].spec, "F32"), no_tok());
  EXPECT_EQ(l3.config.rope_scaling.type, RopeScalingType::Llama3);
  EXPECT_TRUE(l3.config.attention_qkv_bias && l3.config.attention_out_bias);
  EXPECT_EQ(l3.weights.layers[1].bo.size(), 32u);
  Model q2 = load_hf_model(write_random_hf_checkpoint("feat_qwen2", cs[1].spec, "BF16"), no_tok());
  EXPECT_TRUE(q2.config.attention_qkv_bias);
  EXPECT_FALSE(q2.config.attention_out_bias);
  EXPECT_FALSE(q2.config.tied_classifier);
  EXPECT_EQ(q2.weights.classifier.type(), WeightType::BF16);
  Model q3 = load_hf_model(write_random_hf_checkpoint("feat_qwen3", cs[2].spec, "F16"), no_tok());
  EXPECT_TRUE(q3.config.qk_norm);
  EXPECT_EQ(q3.config.head_dim, 16);
  EXPECT_EQ(q3.weights.layers[0].q_norm.size(), 16u);
  EXPECT_EQ(q3.config.eos_token_ids, (std::vector<int>{2, 3}));
  // Turning a feature off changes the logits (each one is really applied).
  const std::vector<int> toks = {4, 8, 15, 16, 23, 42};
  const auto base = run_all(q3, toks);
  q3.config.qk_norm = false;
  for (auto& L : q3.weights.layers) L.q_norm.clear(), L.k_norm.clear();
  const auto off = run_all(q3, toks);
  double d = 0;
  for (std::size_t i = 0; i < base.size(); ++i) d = std::max(d, static_cast<double>(std::abs(base[i] - off[i])));
  EXPECT_GT(d, 1e-3);
  const auto b3 = run_all(l3, toks);
  l3.config.rope_scaling.type = RopeScalingType::None;
  const auto n3 = run_all(l3, toks);
  d = 0;
  for (std::size_t i = 0; i < b3.size(); ++i) d = std::max(d, static_cast<double>(std::abs(b3[i] - n3[i])));
  EXPECT_GT(d, 1e-4);
}

TEST(HfModel, ShardedCheckpointLoads) {
  HfSpec s = cases()[2].spec;
  const std::string dir = hf_tmp_dir("sharded");
  write_text(dir + "/config.json", hf_config_json(s).dump());
  auto ts = random_hf_tensors(s, 7);
  const std::size_t half = ts.size() / 2;
  std::vector<HfTensor> a(ts.begin(), ts.begin() + half), b(ts.begin() + half, ts.end());
  write_hf_tensors(dir + "/model-00001-of-00002.safetensors", a, "BF16");
  write_hf_tensors(dir + "/model-00002-of-00002.safetensors", b, "BF16");
  nlohmann::json idx = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  for (const auto& t : a) idx["weight_map"][t.name] = "model-00001-of-00002.safetensors";
  for (const auto& t : b) idx["weight_map"][t.name] = "model-00002-of-00002.safetensors";
  write_text(dir + "/model.safetensors.index.json", idx.dump());
  Model sharded = load_hf_model(dir, no_tok());
  Model single = load_hf_model(write_random_hf_checkpoint("single", s, "BF16"), no_tok());
  const std::vector<int> toks = {3, 1, 4, 1, 5, 9, 2, 6};
  EXPECT_EQ(run_all(sharded, toks), run_all(single, toks));
  EXPECT_EQ(sharded.storage.size(), 1u);
}

// ---- bad input ----------------------------------------------------------------------------

using testing::expect_error;

TEST(HfModel, BadCheckpointsThrowErrorNamingFileAndTensor) {
  HfSpec s = cases()[1].spec;  // qwen2
  {  // missing tensor
    const std::string dir = hf_tmp_dir("missing");
    write_text(dir + "/config.json", hf_config_json(s).dump());
    auto ts = random_hf_tensors(s, 1);
    ts.erase(std::remove_if(ts.begin(), ts.end(), [](auto& t) { return t.name == "model.layers.1.self_attn.k_proj.bias"; }), ts.end());
    write_hf_tensors(dir + "/model.safetensors", ts, "F32");
    expect_error([&] { load_hf_model(dir, no_tok()); }, {"missing", "model.layers.1.self_attn.k_proj.bias", dir});
  }
  {  // wrong shape
    const std::string dir = hf_tmp_dir("shape");
    write_text(dir + "/config.json", hf_config_json(s).dump());
    auto ts = random_hf_tensors(s, 1);
    for (auto& t : ts)
      if (t.name == "model.layers.0.mlp.up_proj.weight") t.shape = {32, 48};
    write_hf_tensors(dir + "/model.safetensors", ts, "F32");
    expect_error([&] { load_hf_model(dir, no_tok()); },
                 {"model.safetensors", "model.layers.0.mlp.up_proj.weight", "[32, 48]", "[48, 32]"});
  }
  {  // unsupported dtype I64
    const std::string dir = hf_tmp_dir("i64");
    write_text(dir + "/config.json", hf_config_json(s).dump());
    auto ts = random_hf_tensors(s, 1);
    std::vector<std::vector<std::uint8_t>> bytes;
    std::vector<SafetensorsWriteTensor> w;
    for (const auto& t : ts) {
      const bool bad = t.name == "model.norm.weight";
      bytes.push_back(bad ? std::vector<std::uint8_t>(t.values.size() * 8, 0) : encode_dtype(t.values, "F32"));
    }
    for (std::size_t i = 0; i < ts.size(); ++i)
      w.push_back({ts[i].name, ts[i].name == "model.norm.weight" ? "I64" : "F32", ts[i].shape, bytes[i].data(), bytes[i].size()});
    write_safetensors(dir + "/model.safetensors", w);
    expect_error([&] { load_hf_model(dir, no_tok()); }, {"model.safetensors", "model.norm.weight", "I64"});
  }
  {  // non-finite norm
    const std::string dir = hf_tmp_dir("nan");
    write_text(dir + "/config.json", hf_config_json(s).dump());
    auto ts = random_hf_tensors(s, 1);
    for (auto& t : ts)
      if (t.name == "model.layers.0.input_layernorm.weight") t.values[3] = NAN;
    write_hf_tensors(dir + "/model.safetensors", ts, "BF16");
    expect_error([&] { load_hf_model(dir, no_tok()); }, {"model.layers.0.input_layernorm.weight", "non-finite"});
  }
  {  // no safetensors at all
    const std::string dir = hf_tmp_dir("empty");
    write_text(dir + "/config.json", hf_config_json(s).dump());
    expect_error([&] { load_hf_model(dir, no_tok()); }, {dir, "model.safetensors"});
  }
  // load_model dispatches a folder with config.json to the HF loader (and needs tokenizer.json).
  const std::string dir = write_random_hf_checkpoint("dispatch", s, "F32");
  expect_error([&] { load_model(dir); }, {"tokenizer.json"});
  expect_error([&] { load_model(dir, "tok512.bin"); }, {dir, "tokenizer"});
}

}}  // namespace
}  // namespace kvcompact
