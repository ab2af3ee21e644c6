// PCRE2 regular expressions over UTF-8 text, with JavaScript's meaning of \s, for the Split
// pre-tokenizer and Replace normalizer of tokenizer.json.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kvcompact {

/// A compiled PCRE2 pattern in UTF and UCP mode (\p{L}, \d, \w by Unicode properties), JIT
/// compiled when available. Matching accepts text that is not valid UTF-8 (PCRE2_MATCH_INVALID_UTF).
/// `\s`/`\S` are rewritten to JavaScript's (ECMA-262) white space set so that splits agree with the
/// reference tokenizer (@huggingface/tokenizers runs these patterns as JS RegExp with the u flag).
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

/// The pattern with `\s` (outside and inside character classes) and `\S` (outside classes)
/// replaced by explicit JavaScript white-space sets. Exposed for tests.
std::string js_whitespace_pattern(std::string_view pattern);

}  // namespace kvcompact
