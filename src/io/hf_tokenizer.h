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
/// {"content": ...}) name bos_id() / eos_id(). Returns an HfTokenizer.
/// Throws Error naming the file for a missing or malformed file and for anything unsupported
/// (model types other than BPE, e.g. WordPiece or Unigram; unknown normalizer, pre-tokenizer,
/// post-processor or decoder types).
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& folder_or_file);

/// A tokenizer.json pipeline, as the Hugging Face tokenizers library runs it:
///  1. added tokens (`added_tokens`) are found in the raw text, leftmost then longest first, and
///     become their own ids (`lstrip`/`rstrip` strip white space beside them; tokens with
///     `normalized: true` are matched after normalization instead);
///  2. normalizer on the rest: NFC, Prepend, Replace, Sequence, or null;
///  3. pre-tokenizer: Split (regex from the file, behaviors Isolated/Removed), ByteLevel
///     (GPT-2 byte-to-unicode map, add_prefix_space, use_regex), Metaspace, Sequence, or null;
///  4. model: BPE with ranked merges (see BpeModel);
///  5. post-processor (encode_hf with add_special_tokens): TemplateProcessing, ByteLevel,
///     Sequence, or null.
/// Decoding follows the decoder: ByteLevel (bytes back from the byte-to-unicode map) or the
/// SentencePiece chain (Replace U+2581 -> ' ', ByteFallback <0xNN>, Fuse, Strip one leading
/// space) / Metaspace. Thread-safe for concurrent encodes.
class HfTokenizer final : public Tokenizer {
 public:
  /// Parses tokenizer.json at `path` (and `config_path`, a tokenizer_config.json, unless empty).
  /// Throws Error as load_hf_tokenizer.
  HfTokenizer(const std::string& path, const std::string& config_path);
  /// The same from an already parsed tokenizer.json object `tokenizer_json`; `path` names the
  /// source in error messages (e.g. a GGUF file whose vocabulary was converted, io/gguf_tokenizer.h).
  HfTokenizer(const nlohmann::json& tokenizer_json, const std::string& path, const std::string& config_path);
  ~HfTokenizer() override;

  /// Steps 1-4 without the post-processor, then bos_id() in front when add_bos and bos_id() >= 0
  /// (so Llama 3 gets <|begin_of_text|>; Qwen3, which has no BOS token, gets nothing).
  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  /// Exactly Hugging Face's `encode(text, add_special_tokens)`: steps 1-5.
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
