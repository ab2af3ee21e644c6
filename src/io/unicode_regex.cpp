// PCRE2 wrapper; see unicode_regex.h.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/unicode_regex.h"

#include <fmt/format.h>
#include <pcre2.h>

#include "core/error.h"
#include "core/utf8.h"

namespace kvcompact {

std::string white_space_pattern(std::string_view p) {
  std::string out;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (p[i] == '\\' && i + 1 < p.size()) {
      const char n = p[++i];
      if (n == 's') out += "\\p{White_Space}";
      else if (n == 'S') out += "\\P{White_Space}";
      else {
        out += '\\';
        out += n;
      }
      continue;
    }
    out += p[i];
  }
  return out;
}

bool is_word_char(std::uint32_t cp) {
  static const UnicodeRegex word("^[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}]", "word character class");
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
  return !word.find_all(utf8::encode(cp)).empty();
}

struct UnicodeRegex::Impl {
  pcre2_code* code = nullptr;
  ~Impl() {
    if (code) pcre2_code_free(code);
  }
};

UnicodeRegex::UnicodeRegex(std::string_view pattern, const std::string& source) : impl_(std::make_unique<Impl>()) {
  const std::string p = white_space_pattern(pattern);
  int err = 0;
  PCRE2_SIZE offset = 0;
  impl_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(),
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &offset, nullptr);
  if (!impl_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    throw Error(fmt::format("{}: bad regex '{}': {} at offset {}", source, std::string(pattern),
                            reinterpret_cast<const char*>(msg), static_cast<std::size_t>(offset)));
  }
  pcre2_jit_compile(impl_->code, PCRE2_JIT_COMPLETE);  // best effort: falls back to the interpreter
}

UnicodeRegex::~UnicodeRegex() = default;
UnicodeRegex::UnicodeRegex(UnicodeRegex&&) noexcept = default;
UnicodeRegex& UnicodeRegex::operator=(UnicodeRegex&&) noexcept = default;

std::vector<std::pair<std::size_t, std::size_t>> UnicodeRegex::find_all(std::string_view text) const {
  std::vector<std::pair<std::size_t, std::size_t>> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  if (!md) throw Error("regex: out of memory for match data");
  std::size_t start = 0;
  while (start <= text.size()) {
    const int rc = pcre2_match(impl_->code, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), start, 0, md,
                               nullptr);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      pcre2_match_data_free(md);
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(rc, msg, sizeof msg);
      throw Error(fmt::format("regex: match failed: {}", reinterpret_cast<const char*>(msg)));
    }
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
    const std::size_t b = ov[0], e = ov[1];
    out.emplace_back(b, e);
    if (e > b) {
      start = e;
    } else {
      if (e >= text.size()) break;
      std::size_t i = e;
      utf8::next(text, i);
      start = i;
    }
  }
  pcre2_match_data_free(md);
  return out;
}

}  // namespace kvcompact
