// llama2.c file formats (karpathy/llama2.c run.c, "legacy" version-0 export of export.py):
// the model checkpoint `*.bin` and the tokenizer `tokenizer.bin` / `tok512.bin`.
#pragma once

#include <memory>
#include <string>

#include "io/spm_tokenizer.h"
#include "core/config.h"
#include "core/weights.h"

namespace kvcompact {

/// Configuration and weights read from a llama2.c checkpoint.
struct Llama2cCheckpoint {
  ModelConfig config;
  ModelWeights weights;
};

/// Reads a llama2.c legacy checkpoint. Layout (little-endian): 7 x int32 header
/// (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len; vocab_size < 0 means a
/// separate classifier, |vocab_size| tokens), then float32 tensors in this order:
/// token_embedding [vocab, dim], rms_att [L, dim], wq [L, n_heads*hs, dim], wk [L, kv_dim, dim],
/// wv [L, kv_dim, dim], wo [L, dim, n_heads*hs], rms_ffn [L, dim], w1 [L, hidden, dim],
/// w2 [L, dim, hidden], w3 [L, hidden, dim], rms_final [dim], freq_cis_real [seq_len, hs/2] and
/// freq_cis_imag [seq_len, hs/2] (both skipped), wcls [vocab, dim] (only when vocab_size < 0);
/// hs = dim / n_heads. Sets rope_theta 10000, norm_eps 1e-5, RopeStyle::Interleaved.
/// Throws Error naming the file when it is missing, a header size is not positive,
/// dim % n_heads != 0, n_heads % n_kv_heads != 0, hs is odd, the file size is not exactly
/// header + expected floats (message gives expected vs actual bytes), or a weight is NaN/Inf.
Llama2cCheckpoint read_llama2c_checkpoint(const std::string& path);

/// Reads a llama2.c tokenizer file: int32 max_token_length, then for each of `vocab_size` tokens
/// float32 score, int32 len, len bytes (the piece, ' ' for SentencePiece "▁"). BOS = 1, EOS = 2.
/// Throws Error naming the file when it is missing, truncated, has a negative length, a
/// non-finite score, or bytes left over after vocab_size entries.
std::unique_ptr<SpmTokenizer> read_llama2c_tokenizer(const std::string& path, int vocab_size);

}  // namespace kvcompact
