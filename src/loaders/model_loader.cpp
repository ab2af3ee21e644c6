// load_model and load_gguf_model (loaders/model_loader.h): dispatch on the file name to the
// llama2.c checkpoint reader or the GGUF reader, and map GGUF `llama` tensors/metadata onto
// ModelConfig/ModelWeights.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "io/hf_tokenizer.h"
#include "loaders/llama2c_checkpoint.h"
#include "io/spm_tokenizer.h"
#include "loaders/families/families.h"
#include "loaders/hf_loader.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {

namespace {

bool ends_with_ci(const std::string& s, const std::string& suffix) {
  if (s.size() < suffix.size()) return false;
  return std::equal(suffix.rbegin(), suffix.rend(), s.rbegin(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
}

/// An int metadata value that must be in [1, 2^31).
int positive_int(const GgufFile& f, const std::string& key) {
  const std::int64_t v = f.get_int(key);
  if (v <= 0 || v > INT32_MAX) throw Error(fmt::format("{}: metadata {} = {} is not a positive int32", f.path(), key, v));
  return static_cast<int>(v);
}

/// Reads tensor `name`, checks its ggml dims equal `dims` ([in, out] for a matrix W[out, in]) and
/// that every value is finite; returns float32 data.
std::vector<float> gguf_tensor(const GgufFile& f, const std::string& name,
                               const std::vector<std::uint64_t>& dims) {
  const GgufTensorInfo& t = f.tensor(name);
  if (t.dims != dims) {
    auto str = [](const std::vector<std::uint64_t>& d) { return fmt::format("[{}]", fmt::join(d, ", ")); };
    throw Error(fmt::format("{}: tensor {} has shape {}, expected {}", f.path(), name, str(t.dims),
                            str(dims)));
  }
  std::vector<float> v = f.tensor_f32(t);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (!std::isfinite(v[i])) {
      throw Error(fmt::format("{}: tensor {} has a non-finite value at index {}", f.path(), name, i));
    }
  }
  return v;
}

/// A GGUF weight matrix W[out, in] (ggml dims {in, out}): F32 copied to an owned vector (checked
/// finite); every other type ggml_weight_type decodes (F16, BF16, Q4_0 ... Q8_1, Q2_K ... Q6_K)
/// kept in its storage type as a view into the mapped file.
WeightMatrix gguf_matrix(const GgufFile& f, const std::string& name, std::uint64_t in, std::uint64_t out) {
  const GgufTensorInfo& t = f.tensor(name);
  const std::optional<WeightType> wt = ggml_weight_type(t.type);
  if (!wt)
    throw Error(fmt::format("{}: tensor {} has unsupported type {} (supported: {})", f.path(), name,
                            ggml_type_name(t.type), ggml_weight_type_names()));
  if (*wt == WeightType::F32) return WeightMatrix(gguf_tensor(f, name, {in, out}));
  if (t.dims != std::vector<std::uint64_t>{in, out})
    throw Error(fmt::format("{}: tensor {} has shape [{}], expected [{}, {}]", f.path(), name,
                            fmt::join(t.dims, ", "), in, out));
  return WeightMatrix::view(*wt, f.tensor_bytes(t), static_cast<std::int64_t>(out), static_cast<std::int64_t>(in));
}

bool same_matrix(const WeightMatrix& a, const WeightMatrix& b) {
  return a.type() == b.type() && a.byte_size() == b.byte_size() &&
         std::memcmp(a.bytes(), b.bytes(), a.byte_size()) == 0;
}

/// GGUF `llama`, `qwen2`, `qwen3`, `gemma3` architectures -> config + weights (+ SPM tokenizer).
/// Metadata keys are prefixed by the architecture name; the family mappings in loaders/families/
/// read RoPE, biases, norms and layer kinds. qwen2 has attn_{q,k,v}.bias; qwen3 and gemma3 have
/// attn_q_norm / attn_k_norm [head_dim]; gemma3 has post_attention_norm / post_ffw_norm [dim].
Model load_gguf_decoder(std::shared_ptr<GgufFile> fp, const std::string& arch, bool load_tokenizer) {
  const GgufFile& f = *fp;
  Model m;
  m.path = f.path();
  ModelConfig& c = m.config;
  c.architecture = arch;
  const std::string a = arch + ".";
  c.dim = positive_int(f, a + "embedding_length");
  c.hidden_dim = positive_int(f, a + "feed_forward_length");
  c.n_layers = positive_int(f, a + "block_count");
  c.n_heads = positive_int(f, a + "attention.head_count");
  c.n_kv_heads = f.has(a + "attention.head_count_kv") ? positive_int(f, a + "attention.head_count_kv") : c.n_heads;
  c.max_seq_len = positive_int(f, a + "context_length");
  c.norm_eps = static_cast<float>(f.get_float(a + "attention.layer_norm_rms_epsilon"));
  if (c.n_heads % c.n_kv_heads != 0) {
    throw Error(fmt::format("{}: head_count {} is not divisible by head_count_kv {}", f.path(), c.n_heads,
                            c.n_kv_heads));
  }
  if (f.has(a + "attention.key_length")) {
    c.head_dim = positive_int(f, a + "attention.key_length");
    if (f.has(a + "attention.value_length") && positive_int(f, a + "attention.value_length") != c.head_dim) {
      throw Error(fmt::format("{}: attention.value_length differs from key_length (unsupported)", f.path()));
    }
  } else {
    if (c.dim % c.n_heads != 0) {
      throw Error(fmt::format("{}: embedding_length {} is not divisible by head_count {}", f.path(), c.dim,
                              c.n_heads));
    }
    c.head_dim = c.dim / c.n_heads;
  }
  if (c.head_dim % 2 != 0) throw Error(fmt::format("{}: head size {} is odd (RoPE needs pairs)", f.path(), c.head_dim));
  const std::int64_t rope_dims = f.get_int_or(a + "rope.dimension_count", c.head_dim);
  if (rope_dims != c.head_dim) {
    throw Error(fmt::format("{}: {}rope.dimension_count {} != head size {} (partial RoPE unsupported)",
                            f.path(), a, rope_dims, c.head_dim));
  }
  // Family mapping (loaders/families/): RoPE base and scaling, biases, norms, layer kinds.
  if (arch == "gemma3") gguf_gemma3_family(f, c);
  else if (arch == "qwen2" || arch == "qwen3") gguf_qwen_family(f, c);
  else gguf_llama_family(f, c);
  if (!(c.norm_eps > 0.0f) || !std::isfinite(c.rope_theta) || !(c.rope_theta > 0.0f)) {
    throw Error(fmt::format("{}: bad rms epsilon {} or rope freq_base {}", f.path(), c.norm_eps, c.rope_theta));
  }
  // Sizes from the metadata are checked against the file before anything is allocated for them:
  // the projections' widths must fit an int, and every layer needs its 9 blk.N.* tensors.
  if (static_cast<std::int64_t>(c.n_heads) * c.head_dim > INT32_MAX) {
    throw Error(fmt::format("{}: head_count {} x head size {} is too large", f.path(), c.n_heads, c.head_dim));
  }
  if (static_cast<std::uint64_t>(c.n_layers) * 9 > f.tensors().size()) {
    throw Error(fmt::format("{}: {}block_count {} needs at least {} layer tensors, the file has {} tensors",
                            f.path(), a, c.n_layers, static_cast<std::uint64_t>(c.n_layers) * 9,
                            f.tensors().size()));
  }

  if (load_tokenizer) {
    m.tokenizer = load_gguf_tokenizer(f);
    c.vocab_size = m.tokenizer->vocab_size();
  } else {
    const GgufTensorInfo& e = f.tensor("token_embd.weight");
    if (e.dims.size() != 2 || e.dims[1] == 0 || e.dims[1] > INT32_MAX)
      throw Error(fmt::format("{}: tensor token_embd.weight is not a matrix", f.path()));
    c.vocab_size = static_cast<int>(e.dims[1]);
  }

  const std::uint64_t D = c.dim, H = c.hidden_dim, V = c.vocab_size, Q = c.q_dim(), KV = c.kv_dim(),
                      HD = c.head_dim;
  ModelWeights& w = m.weights;
  w.token_embedding = gguf_matrix(f, "token_embd.weight", D, V);
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = fmt::format("blk.{}.", l);
    LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
    lw.attn_norm = gguf_tensor(f, p + "attn_norm.weight", {D});
    lw.wq = gguf_matrix(f, p + "attn_q.weight", D, Q);
    lw.wk = gguf_matrix(f, p + "attn_k.weight", D, KV);
    lw.wv = gguf_matrix(f, p + "attn_v.weight", D, KV);
    lw.wo = gguf_matrix(f, p + "attn_output.weight", Q, D);
    if (c.attention_qkv_bias) {
      lw.bq = gguf_tensor(f, p + "attn_q.bias", {Q});
      lw.bk = gguf_tensor(f, p + "attn_k.bias", {KV});
      lw.bv = gguf_tensor(f, p + "attn_v.bias", {KV});
    }
    if (c.qk_norm) {
      lw.q_norm = gguf_tensor(f, p + "attn_q_norm.weight", {HD});
      lw.k_norm = gguf_tensor(f, p + "attn_k_norm.weight", {HD});
    }
    lw.ffn_norm = gguf_tensor(f, p + "ffn_norm.weight", {D});
    if (c.layer(l).norm == NormPlacement::PrePost) {  // gemma3 (norm +1 folded in by the converter)
      lw.attn_post_norm = gguf_tensor(f, p + "post_attention_norm.weight", {D});
      lw.ffn_post_norm = gguf_tensor(f, p + "post_ffw_norm.weight", {D});
    }
    lw.w_gate = gguf_matrix(f, p + "ffn_gate.weight", D, H);
    lw.w_down = gguf_matrix(f, p + "ffn_down.weight", H, D);
    lw.w_up = gguf_matrix(f, p + "ffn_up.weight", D, H);
  }
  w.final_norm = gguf_tensor(f, "output_norm.weight", {D});
  // rope_freqs.weight [head_dim/2] (Llama 3.1/3.2): llama.cpp divides each RoPE frequency by it.
  if (const GgufTensorInfo* rf = f.find_tensor("rope_freqs.weight")) {
    (void)rf;
    for (int l = 0; l < c.n_layers; ++l)
      if (c.layer(l).rope)
        throw Error(fmt::format("{}: tensor rope_freqs.weight with per-layer RoPE ({}) is unsupported", f.path(), arch));
    c.rope_scaling.freq_factors = gguf_tensor(f, "rope_freqs.weight", {HD / 2});
    for (float x : c.rope_scaling.freq_factors)
      if (!(x > 0.0f)) throw Error(fmt::format("{}: tensor rope_freqs.weight has a non-positive factor {}", f.path(), x));
  }
  c.tied_classifier = true;
  if (f.find_tensor("output.weight") != nullptr) {
    WeightMatrix cls = gguf_matrix(f, "output.weight", D, V);
    // A stored bit-exact copy of the embedding (llama.cpp's convert-llama2c-to-ggml writes one)
    // is a tied classifier.
    if (!same_matrix(cls, w.token_embedding)) {
      w.classifier = std::move(cls);
      c.tied_classifier = false;
    }
  }
  m.storage.push_back(std::move(fp));
  return m;
}

}  // namespace

Model load_gguf_model(const std::string& path, bool load_tokenizer) {
  auto f = std::make_shared<GgufFile>(path);
  const std::string& arch = f->get_string("general.architecture");
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "gemma3")
    return load_gguf_decoder(f, arch, load_tokenizer);
  throw Error(fmt::format("{}: unsupported GGUF architecture '{}' (supported: llama, qwen2, qwen3, gemma3)", path, arch));
}

namespace {

std::string find_llama2c_tokenizer(const std::string& model_path) {
  namespace fs = std::filesystem;
  fs::path dir = fs::path(model_path).parent_path();
  if (dir.empty()) dir = ".";
  for (const char* name : {"tok512.bin", "tokenizer.bin"}) {
    fs::path p = dir / name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
  }
  throw Error(fmt::format("{}: no tokenizer given and neither tok512.bin nor tokenizer.bin found in "
                          "folder {}", model_path, dir.string()));
}

}  // namespace

Model load_model(const std::string& path, const std::string& tokenizer_path) {
  if (path.empty()) throw Error("model path is empty (give a .gguf, llama2.c .bin or Hugging Face checkpoint folder)");
  if (is_hf_checkpoint_dir(path)) {
    if (!tokenizer_path.empty()) {
      throw Error(fmt::format("{}: a Hugging Face checkpoint folder uses its tokenizer.json; drop the "
                              "tokenizer option ({})", path, tokenizer_path));
    }
    return load_hf_model(path);
  }
  if (ends_with_ci(path, ".gguf")) {
    if (!tokenizer_path.empty()) {
      throw Error(fmt::format("{}: a GGUF model carries its own vocabulary; drop the tokenizer option "
                              "({})", path, tokenizer_path));
    }
    return load_gguf_model(path);
  }
  Llama2cCheckpoint ck = read_llama2c_checkpoint(path);
  const std::string tok = tokenizer_path.empty() ? find_llama2c_tokenizer(path) : tokenizer_path;
  Model m;
  m.path = path;
  if (ends_with_ci(tok, ".json") || std::filesystem::is_directory(tok)) {
    m.tokenizer = load_hf_tokenizer(tok);  // a Hugging Face tokenizer.json (or its folder)
    if (m.tokenizer->vocab_size() > ck.config.vocab_size) {
      throw Error(fmt::format("{}: tokenizer has {} tokens, model {} only has {}", tok, m.tokenizer->vocab_size(), path,
                              ck.config.vocab_size));
    }
  } else {
    m.tokenizer = read_llama2c_tokenizer(tok, ck.config.vocab_size);
  }
  m.config = ck.config;
  m.weights = std::move(ck.weights);
  return m;
}


}  // namespace kvcompact
