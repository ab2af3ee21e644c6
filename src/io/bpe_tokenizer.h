// The BPE model of a Hugging Face tokenizer.json ("model": {"type": "BPE"}): merges applied by
// rank, byte-level (GPT-2) alphabet helpers, SentencePiece-style byte fallback.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kvcompact {

/// GPT-2's byte-to-unicode map (openai/gpt-2 encoder.py `bytes_to_unicode`, used by the ByteLevel
/// pre-tokenizer and decoder of tokenizer.json): bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF map to
/// the code point of the same value; the other 68 bytes, in increasing order, to U+0100, U+0101, ...
/// (so ' ' -> U+0120 'Ġ', '\n' -> U+010A 'Ċ'). Returns the code point for byte b.
std::uint32_t byte_to_unicode(unsigned char b);

/// Inverse of byte_to_unicode: the byte for code point cp, or -1 when cp is not in the map.
int unicode_to_byte(std::uint32_t cp);

/// Appends the byte-level form of raw bytes (each byte as the UTF-8 of byte_to_unicode(byte)).
void append_byte_level(std::string& out, std::string_view bytes);

/// A BPE vocabulary with ranked merges, as Hugging Face tokenizers' `BPE::merge_word` runs it
/// (tokenizers/src/models/bpe/model.rs). A word is split into Unicode characters (code points of
/// UTF-8 text; an invalid byte is one symbol); each becomes a symbol: its vocabulary id; else, with
/// byte_fallback and every byte's `<0xNN>` token present, one symbol per byte; else the unk token
/// (with fuse_unk, a run of consecutive unknown characters is one unk symbol; as in the library, an
/// unk run is emitted when the next in-vocabulary character or the end of the word comes, so byte
/// symbols met in between come first); else nothing. Then the adjacent pair with the lowest merge
/// rank (leftmost on ties) is merged until no pair has a rank; byte and unk symbols take part in
/// merges like any other. Only the model vocabulary counts (added tokens are not part of it).
/// Thread-safe: encode_word may be called concurrently (the word cache is locked).
class BpeModel {
 public:
  struct Options {
    bool byte_fallback = false;  ///< unknown characters -> <0xNN> tokens (SentencePiece style)
    bool fuse_unk = false;       ///< consecutive unknown characters -> one unk token
    bool ignore_merges = false;  ///< a word that is itself in the vocabulary is one token
    std::string unk_token;       ///< empty: none (unknown characters are dropped)
  };

  /// vocab: token -> id (ids need not be contiguous); merges: pairs (left, right) in rank order.
  /// Throws Error (prefixed by `source`, the file name) when a merge names a token missing from the
  /// vocabulary or the merged token is missing.
  BpeModel(std::unordered_map<std::string, int> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
           Options options, const std::string& source);

  /// Appends the token ids of one pre-tokenized word. Throws Error (naming the source) when an
  /// unknown character needs the unk token and unk_token is not in the vocabulary (the library's
  /// UnkTokenOutOfVocabulary).
  void encode_word(std::string_view word, std::vector<int>& out) const;

  /// Id of a model vocabulary token, or -1.
  int token_id(std::string_view token) const;
  /// Number of vocabulary entries (the library's get_vocab_size, which is not 1 + the largest id
  /// when ids have gaps).
  std::size_t size() const { return vocab_.size(); }
  /// token -> id map of the model vocabulary.
  const std::unordered_map<std::string, int>& vocab() const { return vocab_; }

 private:
  struct Merge {
    int rank;
    int id;
  };
  static std::uint64_t key(int a, int b) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(a)) << 32) | static_cast<std::uint32_t>(b);
  }
  void merge_word(std::string_view word, std::vector<int>& out) const;

  std::unordered_map<std::string, int> vocab_;
  std::unordered_map<std::uint64_t, Merge> merges_;
  Options options_;
  std::array<int, 256> byte_tokens_{};  ///< id of <0xNN>, -1 if missing
  int unk_id_ = -1;
  std::string source_;

  static constexpr std::size_t kMaxCachedWordBytes = 256;
  static constexpr std::size_t kMaxCacheEntries = 1 << 17;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int>> cache_;
};

}  // namespace kvcompact
