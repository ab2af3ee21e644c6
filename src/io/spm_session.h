// llama.cpp's SentencePiece tokenize of one text fragment (llama-vocab.cpp
// llm_tokenizer_spm_session), on a GGUF `llama` vocabulary's raw pieces ("▁" for a space).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kvcompact {

/// The SPM session of llama.cpp on raw GGUF pieces:
///  1. spaces of the text become U+2581 ("▁", llama_escape_whitespace);
///  2. the text is cut into symbols of unicode_len_utf8(lead byte) bytes (1 for ASCII and stray
///     continuation bytes, 2/3/4 by the lead byte's high bits, also when the next bytes are not
///     continuation bytes; cut short at the end);
///  3. adjacent symbols whose concatenation is a piece are merged, best score first (leftmost on
///     ties), whatever the score;
///  4. each final symbol is its piece, or is re-split along the merge that made it, down to
///     symbols that are pieces or are written as byte tokens ("<0xNN>", else the 1-byte piece).
/// Duplicate pieces map to their last id, as llama.cpp's token_to_id does.
class SpmSession {
 public:
  /// pieces/scores: [vocab_size], pieces as stored in the GGUF. `source` prefixes errors.
  SpmSession(const std::vector<std::string>& pieces, const std::vector<float>& scores, std::string source);
  /// Token ids of `text` (steps 1-4). Throws Error when a byte has no byte token.
  std::vector<int> tokenize(std::string_view text) const;

 private:
  int lookup(std::string_view piece) const;
  int byte_token(unsigned char b) const;

  std::unordered_map<std::string, int> index_;
  std::vector<float> scores_;
  int byte_tokens_[256];
  std::string source_;
};

}  // namespace kvcompact
