// Tokenizer interface: text <-> token ids.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace kvcompact {

/// A tokenizer maps UTF-8 text to token ids and back. Implementations: SpmTokenizer
/// (SentencePiece-style BPE by merge scores, llama2.c tokenizer.bin and GGUF `llama` vocabularies).
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  /// Encodes text; when add_bos, prepends the tokenizer's BOS: bos_id() (HfTokenizer: the
  /// tokens its BOS rule gives, which may be none).
  virtual std::vector<int> encode(std::string_view text, bool add_bos) const = 0;
  /// The text a token adds after `prev` (handles the leading space after BOS and <0xNN> bytes).
  virtual std::string decode_token(int prev, int token) const = 0;
  /// The raw vocabulary piece of a token id (throws Error when out of range).
  virtual const std::string& piece(int token) const = 0;
  virtual int vocab_size() const = 0;
  virtual int bos_id() const = 0;
  virtual int eos_id() const = 0;
  /// Whether encode(text, true) puts bos_id() in front (a GGUF file can turn BOS off, e.g.
  /// SmolLM2); where false, bos_id() is an ordinary special token that may appear in a prompt.
  virtual bool adds_bos() const { return bos_id() >= 0; }

  /// Decodes a whole sequence (BOS/EOS produce no text).
  std::string decode(const std::vector<int>& tokens) const {
    std::string out;
    int prev = -1;
    for (int t : tokens) {
      if (t != bos_id() && t != eos_id()) out += decode_token(prev, t);
      prev = t;
    }
    return out;
  }
};

}  // namespace kvcompact
