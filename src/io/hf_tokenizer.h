// Hugging Face tokenizer.json (tokenizers library format, "version": "1.0") with a BPE model:
// byte-level BPE (GPT-2, Llama 3, Qwen2/3) and SentencePiece-style BPE with byte fallback
// (Llama 2, TinyLlama).
#pragma once

#include <memory>

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer.h"

namespace kvcompact {

/// Loads a tokenizer.json, given either the file itself or a folder that contains it. When a
/// tokenizer_config.json lies in the same folder, its bos_token / eos_token (string or
/// {"content": ...}) name bos_id() / eos_id() (its add_bos_token is ignored, as in transformers 5:
/// see HfTokenizer). Returns an HfTokenizer.
/// Throws Error naming the file for a missing or malformed file and for anything unsupported
/// (model types other than BPE, e.g. WordPiece or Unigram; unknown normalizer, pre-tokenizer,
/// post-processor or decoder types).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& folder_or_file);

/// A tokenizer.json pipeline, as the Hugging Face tokenizers library (Rust, PyPI `tokenizers`, the
/// one transformers uses) runs it; tests/ref/hf_tokenize.py is the reference the tests compare with.
///  0. text that is not valid UTF-8 first has each maximal invalid subsequence replaced by U+FFFD
///     (what Python's `bytes.decode("utf-8", errors="replace")` gives; the library takes only text);
///  1. added tokens (`added_tokens`) are found leftmost-longest, those with `normalized: false` in
///     the raw text, then those with `normalized: true` (by their normalized form) in each
///     normalized piece between; `single_word` skips a match with a word character (Unicode \w)
///     right before or after it; `lstrip` / `rstrip` swallow the white space before / after it;
///     `special` only marks the token (is_special). Ids are assigned as the library does: a
///     content in the model vocabulary keeps that id, a new one gets the next id after it;
///  2. normalizer on each piece between raw-matched added tokens: NFC, Prepend (non-empty text
///     only), Replace, Sequence, or null;
///  3. pre-tokenizer: Split (regex or literal from the file, `\s` as Unicode White_Space, all five
///     behaviors, `invert`), ByteLevel (GPT-2 byte-to-unicode map, add_prefix_space, use_regex),
///     Metaspace (`replacement`, `prepend_scheme` always / first (only the piece at the start of
///     the text) / never, legacy `add_prefix_space`, `split`, default true: split before every
///     replacement character), Sequence, or null;
///  4. model: BPE with ranked merges, byte_fallback, unk_token, fuse_unk, ignore_merges (BpeModel);
///  5. post-processor (encode_hf with add_special_tokens): TemplateProcessing (ids from its
///     special_tokens map), ByteLevel, Sequence, or null. `truncation` and `padding` are not applied.
/// BOS rule of encode(text, add_bos = true): the special tokens that the post-processor's single
/// template puts before the text (Llama 3: <|begin_of_text|>; nothing for Qwen3, a "$A"-only
/// template or a null post-processor), whatever bos_token is. This is what transformers 5's
/// AutoTokenizer.encode(text) gives at the front: it ignores tokenizer_config.json's
/// `add_bos_token` / `add_eos_token` whenever a tokenizer.json is present (transformers 4's
/// Llama/Gemma fast classes honoured them), so a config with `add_bos_token: false` gets a BOS only
/// when the template has one, and `add_bos_token: true` adds none when it has not. Special tokens
/// after the text (an EOS in the template) are never added by encode.
/// Decoding follows the decoder: ByteLevel (bytes back from the byte-to-unicode map) or the
/// SentencePiece chain (Replace U+2581 -> ' ', ByteFallback <0xNN>, Fuse, Strip one leading
/// space) / Metaspace (the first token loses its replacement characters unless prepend_scheme is
/// "never"). Thread-safe for concurrent encodes.
class HfTokenizer final : public Tokenizer {
 public:
  /// Parses tokenizer.json at `path` (and `config_path`, a tokenizer_config.json, unless empty).
  /// Throws Error as load_hf_tokenizer.
  HfTokenizer(const std::string& path, const std::string& config_path);
  /// The same from an already parsed tokenizer.json object `tokenizer_json`; `path` names the
  /// source in error messages (e.g. a GGUF file whose vocabulary was converted, io/gguf_tokenizer.h).
  HfTokenizer(const nlohmann::json& tokenizer_json, const std::string& path, const std::string& config_path);
  ~HfTokenizer() override;

  /// Steps 0-4 without the post-processor, then, when add_bos, the BOS tokens of the BOS rule above
  /// (so Llama 3 gets <|begin_of_text|>; Qwen3, which has no BOS token, gets nothing).
  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  /// True when encode(text, true) puts tokens in front (the BOS rule above).
  bool adds_bos() const override;
  /// Exactly the tokenizers library's `Tokenizer.encode(text, add_special_tokens).ids`: steps 0-5.
  std::vector<int> encode_hf(std::string_view text, bool add_special_tokens) const;
  /// The text of `token` (raw bytes; a multi-byte character split over tokens comes out whole once
  /// the pieces are concatenated). Added tokens give their content; the SentencePiece decoder
  /// drops the leading space of the first token (prev < 0 or prev == bos_id()).
  std::string decode_token(int prev, int token) const override;
  /// Vocabulary piece of an id (byte-level form, e.g. "Ġthe"); "" for an unused id below
  /// vocab_size(). Throws Error when out of range.
  const std::string& piece(int token) const override;
  /// 1 + the largest id of the model vocabulary and the added tokens.
  int vocab_size() const override;
  int bos_id() const override;  ///< -1 when the tokenizer has none (Qwen3)
  int eos_id() const override;  ///< -1 when unknown
  /// Id of a token string (model vocabulary or added token), or -1.
  int token_id(std::string_view token) const;
  /// True for added tokens marked `special`.
  bool is_special(int token) const;
  const std::string& path() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvcompact
