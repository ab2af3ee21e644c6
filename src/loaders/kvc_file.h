// Saved compacted KV caches: the versioned, checksummed ".kvc" file (spec: docs/kvc_format.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/config.h"
#include "core/kv_cache.h"

namespace kvcompact {

/// Magic bytes at offset 0 of every .kvc file.
inline constexpr char kKvcMagic[8] = {'K', 'V', 'C', 'O', 'M', 'P', 'C', 'T'};
/// The format version this code writes and reads.
inline constexpr uint32_t kKvcVersion = 1;

/// A compacted context cache with everything needed to continue from it.
struct KvcFile {
  uint64_t model_fingerprint = 0;  ///< model_fingerprint(config, weights) of the model used
  std::string model_name;          ///< file name of that model (informational, for messages)
  ModelConfig config;              ///< that model's config numbers, stored in clear
  std::string method;              ///< compaction method spec, e.g. "am"
  double ratio = 0;                ///< keep ratio r in [0, 1]
  std::vector<int32_t> context_tokens;  ///< [T] the context's token ids (BOS first)
  std::vector<float> last_logits;       ///< [vocab_size] logits after the last context token
  KVCache cache;  ///< [n_layers x n_kv_heads] compacted heads; next_position == T
};

/// Serializes `file` to the .kvc byte layout (little-endian, docs/kvc_format.md), checksum
/// included. Throws Error when the parts disagree: cache shape != config (n_layers, n_kv_heads,
/// head_dim), next_position != T, last_logits size != vocab_size, head arrays of unequal
/// lengths, or a non-finite number.
std::string serialize_kvc(const KvcFile& file);

/// Parses .kvc bytes; `name` (the file name) is used in every error message. Validates, in order:
/// magic, version, the stored total size against the actual size (truncation), the FNV-1a 64
/// checksum, then every field: each count is checked against the bytes left before anything is
/// allocated, token ids in [0, vocab), positions in [0, T), ratio in [0, 1], and no NaN/Inf in
/// logits, keys, beta or values. Throws Error("<name>: <problem>").
KvcFile parse_kvc(std::string_view bytes, const std::string& name);

/// serialize_kvc + write_file_atomic. Throws Error naming the path.
void write_kvc_file(const std::string& path, const KvcFile& file);

/// Reads and parses a .kvc file (parse_kvc). Throws Error naming the path.
KvcFile read_kvc_file(const std::string& path);

/// Refuses a cache made for another model: throws Error naming the cache file, the model it was
/// made for (name, fingerprint, shape) and the loaded model (path, fingerprint, shape) unless
/// the fingerprints and the layer / KV-head / head_dim / vocabulary sizes all match.
void check_kvc_model(const KvcFile& file, const std::string& kvc_path, const ModelConfig& config,
                     uint64_t fingerprint, const std::string& model_path);

/// FNV-1a 64 checksum of the bytes that precede the checksum field (all but the last 8 bytes).
uint64_t kvc_checksum(std::string_view bytes_without_checksum);

}  // namespace kvcompact
