// A 64-bit fingerprint of a model: which config and weights a saved cache was made with.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/config.h"
#include "core/weights.h"

namespace kvcompact {

/// FNV-1a 64-bit offset basis and prime (Fowler/Noll/Vo, draft-eastlake-fnv).
inline constexpr uint64_t kFnv64Offset = 0xcbf29ce484222325ULL;
inline constexpr uint64_t kFnv64Prime = 0x100000001b3ULL;

/// FNV-1a 64 of `n` bytes, continuing from `h` (start with kFnv64Offset). Any single changed
/// byte changes the result (each step is a bijection of the running hash).
uint64_t fnv1a64(const void* data, std::size_t n, uint64_t h = kFnv64Offset);

/// Fingerprint of everything that changes the forward pass: FNV-1a 64 over, in this order,
/// the config numbers (dim, hidden_dim, n_layers, n_heads, n_kv_heads, head_dim, vocab_size as
/// int32 LE; rope_theta and norm_eps as float32 bits; rope_style and tied_classifier as one byte
/// each) and then every weight array (token_embedding; per layer attn_norm, wq, wk, wv, wo,
/// ffn_norm, w_gate, w_down, w_up; final_norm; classifier when separate), each as its element
/// count (uint64 LE) followed by its float32 bytes. max_seq_len and architecture (informational)
/// are not hashed, so the same weights loaded from .bin or .gguf give the same fingerprint.
/// Then, only when present: post-attention/post-MLP norms of layers that have them, RoPE
/// frequency factors, and (for configs with layer specs, an embedding scale or logit soft-cap)
/// those two scalars and per layer window, norm/MLP/scaling kinds, attention scale, RoPE theta
/// and factor. (Biases, QK norms and RoPE scaling of uniform models are not hashed.)
uint64_t model_fingerprint(const ModelConfig& config, const ModelWeights& weights);

/// "0x" followed by 16 lowercase hex digits.
std::string fingerprint_hex(uint64_t fingerprint);

}  // namespace kvcompact
