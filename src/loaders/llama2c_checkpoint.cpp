// llama2.c checkpoint and tokenizer readers: see llama2c_checkpoint.h.
#include "loaders/llama2c_checkpoint.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <cstdlib>

#include <fmt/format.h>

#include "core/error.h"
#include "io/file_bytes.h"

namespace kvcompact {

namespace {

/// a * b, throwing Error (naming the file) on 64-bit overflow.
std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const std::string& path) {
  std::uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw Error(fmt::format("{}: header sizes overflow (corrupt header)", path));
  }
  return r;
}

std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, const std::string& path) {
  std::uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw Error(fmt::format("{}: header sizes overflow (corrupt header)", path));
  }
  return r;
}

/// Copies `n` float32 values named `what` from the reader, rejecting NaN/Inf.
std::vector<float> take_floats(ByteReader& r, std::size_t n, const char* what) {
  std::vector<float> v(n);
  if (n == 0) return v;
  const std::uint8_t* p = r.take(n * sizeof(float), what);
  std::memcpy(v.data(), p, n * sizeof(float));
  for (std::size_t i = 0; i < n; ++i) {
    if (!std::isfinite(v[i])) {
      throw Error(fmt::format("{}: tensor {} has a non-finite value at index {}", r.name(), what, i));
    }
  }
  return v;
}

}  // namespace

Llama2cCheckpoint read_llama2c_checkpoint(const std::string& path) {
  FileBytes file(path);
  ByteReader r(file.data(), file.size(), path);
  constexpr std::size_t kHeader = 7 * sizeof(std::int32_t);
  if (file.size() < kHeader) {
    throw Error(fmt::format("{}: too small for a llama2.c checkpoint: {} bytes, the header alone is {}",
                            path, file.size(), kHeader));
  }
  std::int32_t h[7];
  for (auto& x : h) x = r.read<std::int32_t>("header");
  const std::int32_t dim = h[0], hidden = h[1], n_layers = h[2], n_heads = h[3], n_kv = h[4],
                     vocab_raw = h[5], seq_len = h[6];
  const char* names[7] = {"dim", "hidden_dim", "n_layers", "n_heads", "n_kv_heads", "vocab_size",
                          "seq_len"};
  for (int i = 0; i < 7; ++i) {
    if (h[i] == 0 || (h[i] < 0 && i != 5) || h[i] == INT32_MIN) {
      throw Error(fmt::format("{}: bad llama2.c header: {} = {} (must be positive); not a llama2.c "
                              "checkpoint?", path, names[i], h[i]));
    }
  }
  if (dim % n_heads != 0) {
    throw Error(fmt::format("{}: bad llama2.c header: dim {} is not divisible by n_heads {}", path,
                            dim, n_heads));
  }
  if (n_heads % n_kv != 0) {
    throw Error(fmt::format("{}: bad llama2.c header: n_heads {} is not divisible by n_kv_heads {}",
                            path, n_heads, n_kv));
  }
  const std::int32_t hs = dim / n_heads;
  if (hs % 2 != 0) {
    throw Error(fmt::format("{}: bad llama2.c header: head size {} is odd (RoPE needs pairs)", path, hs));
  }
  const bool shared = vocab_raw > 0;
  const std::uint64_t vocab = static_cast<std::uint64_t>(std::llabs(vocab_raw));
  const std::uint64_t D = dim, H = hidden, L = n_layers, kv_dim = static_cast<std::uint64_t>(n_kv) * hs,
                      q_dim = static_cast<std::uint64_t>(n_heads) * hs, S = seq_len;

  // Expected float count, overflow-checked.
  std::uint64_t per_layer = 0;
  per_layer = checked_add(per_layer, 2 * D, path);                               // norms
  per_layer = checked_add(per_layer, checked_mul(q_dim, D, path), path);         // wq
  per_layer = checked_add(per_layer, 2 * checked_mul(kv_dim, D, path), path);    // wk, wv
  per_layer = checked_add(per_layer, checked_mul(D, q_dim, path), path);         // wo
  per_layer = checked_add(per_layer, 3 * checked_mul(H, D, path), path);         // w1, w2, w3
  std::uint64_t floats = checked_mul(vocab, D, path);
  floats = checked_add(floats, checked_mul(L, per_layer, path), path);
  floats = checked_add(floats, D, path);
  floats = checked_add(floats, checked_mul(S, static_cast<std::uint64_t>(hs), path), path);  // freq_cis
  if (!shared) floats = checked_add(floats, checked_mul(vocab, D, path), path);
  const std::uint64_t expected = checked_add(kHeader, checked_mul(floats, 4, path), path);
  if (expected != file.size()) {
    throw Error(fmt::format("{}: size mismatch: the llama2.c header (dim={}, hidden_dim={}, "
                            "n_layers={}, n_heads={}, n_kv_heads={}, vocab_size={}, seq_len={}) "
                            "implies {} bytes, the file has {} bytes",
                            path, dim, hidden, n_layers, n_heads, n_kv, vocab_raw, seq_len,
                            expected, file.size()));
  }

  Llama2cCheckpoint out;
  ModelConfig& c = out.config;
  c.architecture = "llama";
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv;
  c.head_dim = hs;
  c.vocab_size = static_cast<int>(vocab);
  c.max_seq_len = seq_len;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.rope_style = RopeStyle::Interleaved;
  c.tied_classifier = shared;

  ModelWeights& w = out.weights;
  w.token_embedding = take_floats(r, vocab * D, "token_embedding");
  w.layers.resize(static_cast<std::size_t>(L));
  // The file stores each tensor kind for all layers together: [L, ...].
  for (auto& l : w.layers) l.attn_norm = take_floats(r, D, "rms_att_weight");
  for (auto& l : w.layers) l.wq = take_floats(r, q_dim * D, "wq");
  for (auto& l : w.layers) l.wk = take_floats(r, kv_dim * D, "wk");
  for (auto& l : w.layers) l.wv = take_floats(r, kv_dim * D, "wv");
  for (auto& l : w.layers) l.wo = take_floats(r, D * q_dim, "wo");
  for (auto& l : w.layers) l.ffn_norm = take_floats(r, D, "rms_ffn_weight");
  for (auto& l : w.layers) l.w_gate = take_floats(r, H * D, "w1");
  for (auto& l : w.layers) l.w_down = take_floats(r, D * H, "w2");
  for (auto& l : w.layers) l.w_up = take_floats(r, H * D, "w3");
  w.final_norm = take_floats(r, D, "rms_final_weight");
  r.take(static_cast<std::size_t>(S * static_cast<std::uint64_t>(hs) * sizeof(float)),
         "freq_cis_real/freq_cis_imag");
  if (!shared) w.classifier = take_floats(r, vocab * D, "wcls");
  return out;
}

std::unique_ptr<SpmTokenizer> read_llama2c_tokenizer(const std::string& path, int vocab_size) {
  if (vocab_size <= 0) {
    throw Error(fmt::format("{}: tokenizer requested with vocab_size {} (must be positive)", path,
                            vocab_size));
  }
  FileBytes file(path);
  ByteReader r(file.data(), file.size(), path);
  const std::int32_t max_len = r.read<std::int32_t>("max_token_length");
  if (max_len <= 0) {
    throw Error(fmt::format("{}: bad tokenizer header: max_token_length = {} (must be positive)",
                            path, max_len));
  }
  std::vector<std::string> pieces;
  std::vector<float> scores;
  // Every entry takes at least 8 bytes: reserve no more than the file can hold (a huge vocab_size
  // then fails as a truncated file instead of allocating).
  const std::size_t fits = std::min(static_cast<std::size_t>(vocab_size), r.remaining() / 8);
  pieces.reserve(fits);
  scores.reserve(fits);
  for (int i = 0; i < vocab_size; ++i) {
    if (r.remaining() < 8) {
      throw Error(fmt::format("{}: truncated tokenizer: expected {} tokens, the file ends in token {} "
                              "(offset {} of {} bytes)", path, vocab_size, i, r.offset(), r.size()));
    }
    const float s = r.read<float>("token score");
    const std::int32_t len = r.read<std::int32_t>("token length");
    if (len < 0) {
      throw Error(fmt::format("{}: corrupt tokenizer: token {} has length {}", path, i, len));
    }
    if (static_cast<std::size_t>(len) > r.remaining()) {
      throw Error(fmt::format("{}: truncated tokenizer: token {} needs {} bytes at offset {}, only {} "
                              "left", path, i, len, r.offset(), r.remaining()));
    }
    if (!std::isfinite(s)) {
      throw Error(fmt::format("{}: corrupt tokenizer: token {} has a non-finite score", path, i));
    }
    scores.push_back(s);
    pieces.push_back(r.read_string(static_cast<std::size_t>(len), "token piece"));
  }
  if (r.remaining() != 0) {
    throw Error(fmt::format("{}: tokenizer has {} bytes left after {} tokens: its vocabulary does not "
                            "match the model's vocab_size {}", path, r.remaining(), vocab_size,
                            vocab_size));
  }
  return std::make_unique<SpmTokenizer>(std::move(pieces), std::move(scores), 1, 2, path);
}

}  // namespace kvcompact
