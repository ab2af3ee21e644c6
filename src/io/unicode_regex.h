// PCRE2 regular expressions over UTF-8 text, with Oniguruma's meaning of \s, for the Split
// pre-tokenizer and Replace normalizer of tokenizer.json.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvcompact {

/// A compiled PCRE2 pattern in UTF and UCP mode (\p{L}, \d, \w by Unicode properties), JIT
/// compiled when available. Matching accepts text that is not valid UTF-8 (PCRE2_MATCH_INVALID_UTF).
/// `\s`/`\S` are rewritten to the Unicode White_Space property, what they match in Oniguruma, the
/// engine the Hugging Face tokenizers library (Rust) runs these patterns with (PCRE2's own `\s`
/// also matches U+180E).
/// Thread-safe after construction.
class UnicodeRegex {
 public:
  /// Throws Error("<source>: bad regex '<pattern>': <PCRE2 message> at offset N").
  UnicodeRegex(std::string_view pattern, const std::string& source);
  ~UnicodeRegex();
  UnicodeRegex(UnicodeRegex&&) noexcept;
  UnicodeRegex& operator=(UnicodeRegex&&) noexcept;

  /// All non-overlapping matches, left to right, as byte ranges [begin, end). After an empty match
  /// the search resumes one character later (like JS String.prototype.matchAll).
  std::vector<std::pair<std::size_t, std::size_t>> find_all(std::string_view text) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The pattern with `\s` and `\S` (outside and inside character classes) replaced by
/// `\p{White_Space}` and `\P{White_Space}`. Exposed for tests.
std::string white_space_pattern(std::string_view pattern);

/// True when code point cp is a word character as the Rust `regex` crate's Unicode `\w` defines
/// it (Alphabetic, Mark, Decimal_Number, Connector_Punctuation, Join_Control; UTS #18 Annex C),
/// which the tokenizers library uses for the `single_word` flag of added tokens.
bool is_word_char(std::uint32_t cp);

}  // namespace kvcompact
