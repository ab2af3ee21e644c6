#include "loaders/kvc_file.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "io/atomic_file.h"
#include "core/error.h"
#include "io/file_bytes.h"
#include "core/model_fingerprint.h"

namespace kvcompact {
namespace {

constexpr std::size_t kMaxString = 4096;  // model name / method spec bytes

class Writer {
 public:
  template <typename T>
  void put(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    out.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void put_array(const T* p, std::size_t n) {
    out.append(reinterpret_cast<const char*>(p), n * sizeof(T));
  }
  void put_string(const std::string& s) {
    put(static_cast<uint32_t>(s.size()));
    out.append(s);
  }
  std::string out;
};

void require_finite(const std::vector<float>& a, const std::string& name, const char* what) {
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!std::isfinite(a[i]))
      throw Error(fmt::format("{}: {} element {} is not finite ({})", name, what, i, a[i]));
}

}  // namespace

uint64_t kvc_checksum(std::string_view bytes) { return fnv1a64(bytes.data(), bytes.size()); }

namespace {

std::string serialize_named(const KvcFile& f, const std::string& name) {
  const ModelConfig& c = f.config;
  const KVCache& cache = f.cache;
  if (cache.n_layers() != c.n_layers || cache.n_kv_heads() != c.n_kv_heads ||
      cache.head_dim() != c.head_dim)
    throw Error(fmt::format("{}: cache is {} layers x {} KV heads x head_dim {} but the config is {} x {} x {}",
                            name, cache.n_layers(), cache.n_kv_heads(), cache.head_dim(), c.n_layers,
                            c.n_kv_heads, c.head_dim));
  const std::size_t T = f.context_tokens.size();
  if (static_cast<std::size_t>(cache.next_position) != T)
    throw Error(fmt::format("{}: cache next_position {} != context length {}", name, cache.next_position, T));
  if (f.last_logits.size() != static_cast<std::size_t>(c.vocab_size))
    throw Error(fmt::format("{}: last_logits has {} values, vocabulary is {}", name, f.last_logits.size(), c.vocab_size));
  if (!(f.ratio >= 0.0 && f.ratio <= 1.0))
    throw Error(fmt::format("{}: ratio {} is outside [0, 1]", name, f.ratio));
  if (f.method.size() > kMaxString || f.model_name.size() > kMaxString)
    throw Error(fmt::format("{}: method or model name longer than {} bytes", name, kMaxString));
  require_finite(f.last_logits, name, "last_logits");

  Writer w;
  w.put_array(kKvcMagic, 8);
  w.put(kKvcVersion);
  w.put(uint32_t{0});  // reserved
  w.put(uint64_t{0});  // file size, patched below
  w.put(f.model_fingerprint);
  for (int v : {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size, c.max_seq_len})
    w.put(static_cast<int32_t>(v));
  w.put(c.rope_theta);
  w.put(c.norm_eps);
  w.put(static_cast<uint8_t>(c.rope_style == RopeStyle::HalfSplit ? 1 : 0));
  w.put(static_cast<uint8_t>(c.tied_classifier ? 1 : 0));
  w.put(uint16_t{0});  // reserved
  w.put_string(f.model_name);
  w.put_string(f.method);
  w.put(f.ratio);
  w.put(static_cast<uint32_t>(T));
  w.put_array(f.context_tokens.data(), T);
  w.put_array(f.last_logits.data(), f.last_logits.size());
  const std::size_t d = static_cast<std::size_t>(c.head_dim);
  for (int l = 0; l < c.n_layers; ++l) {
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const HeadCache& hc = cache.head(l, h);
      const std::size_t t = hc.length();
      if (hc.positions.size() != t || hc.keys.size() != t * d || hc.values.size() != t * d)
        throw Error(fmt::format("{}: head L{}H{} has arrays of unequal lengths", name, l, h));
      const std::string what = fmt::format("head L{}H{}", l, h);
      require_finite(hc.keys, name, (what + " keys").c_str());
      require_finite(hc.values, name, (what + " values").c_str());
      require_finite(hc.beta, name, (what + " beta").c_str());
      w.put(static_cast<uint32_t>(t));
      w.put_array(hc.positions.data(), t);
      w.put_array(hc.beta.data(), t);
      w.put_array(hc.keys.data(), t * d);
      w.put_array(hc.values.data(), t * d);
    }
  }
  const uint64_t total = w.out.size() + sizeof(uint64_t);
  std::memcpy(w.out.data() + 16, &total, sizeof total);
  w.put(kvc_checksum(w.out));
  return std::move(w.out);
}

}  // namespace

std::string serialize_kvc(const KvcFile& file) { return serialize_named(file, "kvc file"); }

KvcFile parse_kvc(std::string_view bytes, const std::string& name) {
  const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
  ByteReader r(data, bytes.size(), name);
  if (bytes.size() < 8 || std::memcmp(data, kKvcMagic, 8) != 0)
    throw Error(fmt::format("{}: not a kvcompact cache file (magic is not \"KVCOMPCT\")", name));
  r.take(8, "magic");
  const uint32_t version = r.read<uint32_t>("format version");
  if (version != kKvcVersion)
    throw Error(fmt::format("{}: format version {} is not supported (this build reads version {})", name,
                            version, kKvcVersion));
  r.read<uint32_t>("reserved");
  const uint64_t total = r.read<uint64_t>("file size");
  if (total != bytes.size())
    throw Error(fmt::format("{}: {}: header says {} bytes, file has {}", name,
                            bytes.size() < total ? "truncated" : "trailing bytes", total, bytes.size()));
  if (bytes.size() < r.offset() + 8)
    throw Error(fmt::format("{}: truncated: no room for the checksum", name));
  uint64_t stored;
  std::memcpy(&stored, data + bytes.size() - 8, 8);
  const uint64_t actual = kvc_checksum(bytes.substr(0, bytes.size() - 8));
  if (stored != actual)
    throw Error(fmt::format("{}: checksum mismatch (stored {}, computed {}): the file is corrupt", name,
                            fingerprint_hex(stored), fingerprint_hex(actual)));
  // Parse the body; the reader stops before the checksum.
  ByteReader b(data, bytes.size() - 8, name);
  b.seek(r.offset(), "header");

  KvcFile f;
  f.model_fingerprint = b.read<uint64_t>("model fingerprint");
  ModelConfig& c = f.config;
  int32_t nums[8];
  for (int32_t& v : nums) v = b.read<int32_t>("config");
  c.dim = nums[0], c.hidden_dim = nums[1], c.n_layers = nums[2], c.n_heads = nums[3];
  c.n_kv_heads = nums[4], c.head_dim = nums[5], c.vocab_size = nums[6], c.max_seq_len = nums[7];
  for (int i = 0; i < 7; ++i)
    if (nums[i] <= 0 || nums[i] > (1 << 24))
      throw Error(fmt::format("{}: config field {} is {} (must be in 1..2^24)", name, i, nums[i]));
  c.rope_theta = b.read<float>("rope_theta");
  c.norm_eps = b.read<float>("norm_eps");
  const uint8_t style = b.read<uint8_t>("rope style"), tied = b.read<uint8_t>("tied flag");
  if (style > 1 || tied > 1)
    throw Error(fmt::format("{}: rope style {} / tied flag {} must be 0 or 1", name, style, tied));
  c.rope_style = style ? RopeStyle::HalfSplit : RopeStyle::Interleaved;
  c.tied_classifier = tied != 0;
  b.read<uint16_t>("reserved");
  auto read_string = [&](const char* what) {
    const uint32_t n = b.read<uint32_t>(what);
    if (n > kMaxString) throw Error(fmt::format("{}: {} length {} exceeds {} bytes", name, what, n, kMaxString));
    return b.read_string(n, what);
  };
  f.model_name = read_string("model name");
  f.method = read_string("method");
  f.ratio = b.read<double>("ratio");
  if (!(f.ratio >= 0.0 && f.ratio <= 1.0))
    throw Error(fmt::format("{}: ratio {} is outside [0, 1]", name, f.ratio));
  const uint32_t T = b.read<uint32_t>("context length");
  // Fills `v` (already sized) from the next bytes; no memcpy for an empty array (its data() may be
  // null, and memcpy from/to null is undefined even for 0 bytes).
  auto read_into = [&](auto& v, const char* what) {
    const std::size_t nb = v.size() * sizeof(v[0]);
    const uint8_t* p = b.take(nb, what);
    if (nb != 0) std::memcpy(v.data(), p, nb);
  };
  b.need(static_cast<std::size_t>(T) * 4, "context tokens");
  f.context_tokens.resize(T);
  read_into(f.context_tokens, "context tokens");
  for (uint32_t i = 0; i < T; ++i)
    if (f.context_tokens[i] < 0 || f.context_tokens[i] >= c.vocab_size)
      throw Error(fmt::format("{}: context token {} is id {}, outside the vocabulary of {}", name, i,
                              f.context_tokens[i], c.vocab_size));
  const std::size_t V = static_cast<std::size_t>(c.vocab_size);
  b.need(V * 4, "last logits");
  f.last_logits.resize(V);
  read_into(f.last_logits, "last logits");
  require_finite(f.last_logits, name, "last_logits");

  const std::size_t d = static_cast<std::size_t>(c.head_dim);
  // Every head needs at least its 4-byte length: bound the head count by the bytes left.
  if (static_cast<uint64_t>(c.n_layers) * static_cast<uint64_t>(c.n_kv_heads) * 4 > b.remaining())
    throw Error(fmt::format("{}: truncated: {} layers x {} KV heads do not fit in the {} bytes left", name,
                            c.n_layers, c.n_kv_heads, b.remaining()));
  f.cache = KVCache(c.n_layers, c.n_kv_heads, c.head_dim);
  f.cache.next_position = static_cast<int>(T);
  for (int l = 0; l < c.n_layers; ++l) {
    for (int h = 0; h < c.n_kv_heads; ++h) {
      const std::string what = fmt::format("head L{}H{}", l, h);
      const uint32_t t = b.read<uint32_t>("head length");
      if (t > T)
        throw Error(fmt::format("{}: {} has {} entries, more than the context length {}", name, what, t, T));
      const std::size_t n = t, entry_bytes = 4 + 4 + 2 * d * 4;
      if (n * entry_bytes > b.remaining())
        throw Error(fmt::format("{}: truncated: {} needs {} bytes, {} left", name, what, n * entry_bytes,
                                b.remaining()));
      HeadCache& hc = f.cache.head(l, h);
      hc.positions.resize(n);
      hc.beta.resize(n);
      hc.keys.resize(n * d);
      hc.values.resize(n * d);
      read_into(hc.positions, "positions");
      read_into(hc.beta, "beta");
      read_into(hc.keys, "keys");
      read_into(hc.values, "values");
      for (std::size_t i = 0; i < n; ++i)
        if (hc.positions[i] < 0 || static_cast<uint32_t>(hc.positions[i]) >= T)
          throw Error(fmt::format("{}: {} entry {} has position {}, outside [0, {})", name, what, i,
                                  hc.positions[i], T));
      require_finite(hc.keys, name, (what + " keys").c_str());
      require_finite(hc.values, name, (what + " values").c_str());
      require_finite(hc.beta, name, (what + " beta").c_str());
    }
  }
  if (b.remaining() != 0)
    throw Error(fmt::format("{}: {} unexpected bytes after the last head", name, b.remaining()));
  return f;
}

void write_kvc_file(const std::string& path, const KvcFile& file) {
  write_file_atomic(path, serialize_named(file, path));
}

KvcFile read_kvc_file(const std::string& path) {
  FileBytes fb(path);
  return parse_kvc(std::string_view(reinterpret_cast<const char*>(fb.data()), fb.size()), path);
}

void check_kvc_model(const KvcFile& f, const std::string& kvc_path, const ModelConfig& c,
                     uint64_t fingerprint, const std::string& model_path) {
  const ModelConfig& s = f.config;
  const bool same = f.model_fingerprint == fingerprint && s.n_layers == c.n_layers &&
                    s.n_kv_heads == c.n_kv_heads && s.head_dim == c.head_dim &&
                    s.vocab_size == c.vocab_size;
  if (same) return;
  throw Error(fmt::format(
      "{}: cache was made for model {} (fingerprint {}, {} layers, {} KV heads, head_dim {}, vocab {}) "
      "but the loaded model is {} (fingerprint {}, {} layers, {} KV heads, head_dim {}, vocab {})",
      kvc_path, f.model_name.empty() ? "?" : f.model_name, fingerprint_hex(f.model_fingerprint), s.n_layers,
      s.n_kv_heads, s.head_dim, s.vocab_size, model_path, fingerprint_hex(fingerprint), c.n_layers,
      c.n_kv_heads, c.head_dim, c.vocab_size));
}

}  // namespace kvcompact
