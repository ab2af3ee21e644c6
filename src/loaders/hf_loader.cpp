#include "loaders/hf_loader.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "loaders/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/safetensors.h"
#include "core/dequant.h"

namespace kvcompact {

namespace fs = std::filesystem;

bool is_hf_checkpoint_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_regular_file(fs::path(path) / "config.json", ec);
}

namespace {

WeightType weight_type_of(const SafetensorsTensor& t) {
  if (t.dtype == "F32") return WeightType::F32;
  if (t.dtype == "F16") return WeightType::F16;
  if (t.dtype == "BF16") return WeightType::BF16;
  throw Error(fmt::format("{}: tensor {} has unsupported dtype {} (supported: F32, F16, BF16)", t.file,
                          t.name, t.dtype));
}

const SafetensorsTensor& need(const SafetensorsCheckpoint& ck, const std::string& name,
                              const std::vector<std::int64_t>& shape, const std::string& arch) {
  const SafetensorsTensor* t = ck.find(name);
  if (!t) throw Error(fmt::format("{}: tensor {} is missing (needed by {})", ck.folder(), name, arch));
  if (t->shape != shape)
    throw Error(fmt::format("{}: tensor {} has shape [{}], expected [{}]", t->file, name,
                            fmt::join(t->shape, ", "), fmt::join(shape, ", ")));
  weight_type_of(*t);
  return *t;
}

WeightMatrix matrix(const SafetensorsCheckpoint& ck, const std::string& name, std::int64_t rows,
                    std::int64_t cols, const std::string& arch) {
  const SafetensorsTensor& t = need(ck, name, {rows, cols}, arch);
  const WeightType type = weight_type_of(t);
  if (type == WeightType::F32 && reinterpret_cast<std::uintptr_t>(t.data) % alignof(float) != 0) {
    std::vector<float> v(static_cast<std::size_t>(rows * cols));
    std::memcpy(v.data(), t.data, v.size() * sizeof(float));
    return WeightMatrix(std::move(v));
  }
  return WeightMatrix::view(type, t.data, rows, cols);
}

std::vector<float> vector_f32(const SafetensorsCheckpoint& ck, const std::string& name, std::int64_t n,
                              const std::string& arch) {
  const SafetensorsTensor& t = need(ck, name, {n}, arch);
  std::vector<float> v(static_cast<std::size_t>(n));
  dequantize_row(weight_type_of(t), t.data, v.data(), n);
  for (std::size_t i = 0; i < v.size(); ++i)
    if (!std::isfinite(v[i]))
      throw Error(fmt::format("{}: tensor {} has a non-finite value at index {}", t.file, name, i));
  return v;
}

}  // namespace

Model load_hf_model(const std::string& folder, const HfLoadOptions& options) {
  if (!is_hf_checkpoint_dir(folder))
    throw Error(fmt::format("{}: not a Hugging Face checkpoint folder (no config.json)", folder));
  Model m;
  m.path = folder;
  m.config = read_hf_config((fs::path(folder) / "config.json").string());
  const ModelConfig& c = m.config;
  auto ck = std::make_shared<SafetensorsCheckpoint>(folder);
  const std::string& arch = c.architecture;
  const std::int64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, Q = c.q_dim(), KV = c.kv_dim(),
                     HD = c.head_dim;
  ModelWeights& w = m.weights;
  // RMSNorm weights as applied: stored + norm_weight_shift (Gemma: 1 + w, added in float32 as
  // Gemma3RMSNorm's `1.0 + self.weight.float()`).
  auto norm = [&](const std::string& name, std::int64_t n) {
    std::vector<float> v = vector_f32(*ck, name, n, arch);
    if (c.norm_weight_shift != 0.0f)
      for (float& x : v) x += c.norm_weight_shift;
    return v;
  };
  w.token_embedding = matrix(*ck, "model.embed_tokens.weight", V, D, arch);
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("model.layers.{}.", l);
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    L.attn_norm = norm(p + "input_layernorm.weight", D);
    if (c.layer(l).norm == NormPlacement::PrePost) {  // Gemma 3
      L.attn_post_norm = norm(p + "post_attention_layernorm.weight", D);
      L.ffn_norm = norm(p + "pre_feedforward_layernorm.weight", D);
      L.ffn_post_norm = norm(p + "post_feedforward_layernorm.weight", D);
    } else {
      L.ffn_norm = norm(p + "post_attention_layernorm.weight", D);
    }
    L.wq = matrix(*ck, p + "self_attn.q_proj.weight", Q, D, arch);
    L.wk = matrix(*ck, p + "self_attn.k_proj.weight", KV, D, arch);
    L.wv = matrix(*ck, p + "self_attn.v_proj.weight", KV, D, arch);
    L.wo = matrix(*ck, p + "self_attn.o_proj.weight", D, Q, arch);
    if (c.attention_qkv_bias) {
      L.bq = vector_f32(*ck, p + "self_attn.q_proj.bias", Q, arch);
      L.bk = vector_f32(*ck, p + "self_attn.k_proj.bias", KV, arch);
      L.bv = vector_f32(*ck, p + "self_attn.v_proj.bias", KV, arch);
    }
    if (c.attention_out_bias) L.bo = vector_f32(*ck, p + "self_attn.o_proj.bias", D, arch);
    if (c.qk_norm) {
      L.q_norm = norm(p + "self_attn.q_norm.weight", HD);
      L.k_norm = norm(p + "self_attn.k_norm.weight", HD);
    }
    L.w_gate = matrix(*ck, p + "mlp.gate_proj.weight", H, D, arch);
    L.w_up = matrix(*ck, p + "mlp.up_proj.weight", H, D, arch);
    L.w_down = matrix(*ck, p + "mlp.down_proj.weight", D, H, arch);
  }
  w.final_norm = norm("model.norm.weight", D);
  if (!c.tied_classifier) w.classifier = matrix(*ck, "lm_head.weight", V, D, arch);
  m.storage.push_back(ck);
  if (options.load_tokenizer) m.tokenizer = load_hf_tokenizer(folder);
  return m;
}

}  // namespace kvcompact
