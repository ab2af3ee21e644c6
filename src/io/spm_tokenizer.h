// SentencePiece-style BPE tokenizer driven by merge scores, exactly as llama2.c run.c encodes
// (karpathy/llama2.c, functions encode/decode) — used for llama2.c tokenizer.bin files and for
// GGUF `llama` (SPM) vocabularies.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/tokenizer.h"

namespace kvcompact {

/// Vocabulary of pieces (raw bytes; the SentencePiece "▁" already replaced by ' ') with merge
/// scores. Encoding (llama2.c run.c `encode`):
///  1. if the text is non-empty, the first token is the dummy-prefix piece " ";
///  2. each UTF-8 codepoint (a lead byte plus up to 3 continuation bytes, grouped exactly as
///     run.c does, also for invalid UTF-8) becomes its piece when in the vocabulary, otherwise one
///     byte token per byte (the piece "<0xNN>");
///  3. repeatedly the adjacent pair whose concatenated pieces form a vocabulary piece with the
///     highest score (> -1e10; leftmost on ties) is merged, until no pair merges.
/// Implemented with a linked list and a priority queue: O(n log n) and identical to run.c's
/// O(n^2) scan. Decoding: a token's piece; after BOS a leading ' ' is dropped; "<0xNN>" pieces
/// decode to the byte 0xNN.
class SpmTokenizer final : public Tokenizer {
 public:
  /// pieces/scores: [vocab_size]. `source` (a file name) prefixes error messages.
  /// Throws Error when the vocabulary is empty, sizes differ, a score is not finite, or
  /// bos/eos are out of range.
  SpmTokenizer(std::vector<std::string> pieces, std::vector<float> scores, int bos_id, int eos_id,
               std::string source);

  std::vector<int> encode(std::string_view text, bool add_bos) const override;
  /// Steps 2-3 on one piece of text, with the dummy-prefix piece of step 1 only when
  /// `dummy_prefix` (llama.cpp's SPM session on a text fragment between special tokens).
  std::vector<int> encode_fragment(std::string_view text, bool dummy_prefix) const;
  /// Throws Error when `token` is out of range.
  std::string decode_token(int prev, int token) const override;
  /// Throws Error when `token` is out of range.
  const std::string& piece(int token) const override;
  int vocab_size() const override { return static_cast<int>(pieces_.size()); }
  int bos_id() const override { return bos_id_; }
  int eos_id() const override { return eos_id_; }

  /// Merge score of a token (throws Error when out of range).
  float score(int token) const;
  /// Id of a piece, or -1 when it is not in the vocabulary (first id for duplicate pieces).
  int lookup(std::string_view piece) const;
  /// File (or other source) the vocabulary came from.
  const std::string& source() const { return source_; }

 private:
  void check_token(int token) const;

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int16_t> byte_value_;    // [vocab] 0..255 for "<0xNN>" pieces, else -1
  int byte_token_[256];                // id of "<0xNN>" for each byte, or -1
  std::unordered_map<std::string, int> index_;
  int bos_id_;
  int eos_id_;
  std::string source_;
};

}  // namespace kvcompact
