// Small UTF-8 helpers shared by error messages (core/error.cpp), the Hugging Face tokenizer, NFC and Jinja code.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kvcompact::utf8 {

/// Decodes the code point starting at s[i] (RFC 3629) and advances i past it. An invalid or
/// truncated sequence yields `invalid` for one byte (i advances by 1), so every byte string can be
/// walked; `invalid` defaults to 0xFFFFFFFF, which is no code point.
inline std::uint32_t next(std::string_view s, std::size_t& i, std::uint32_t invalid = 0xFFFFFFFFu) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) { ++i; return b0; }
  int n = 0;
  std::uint32_t cp = 0, min = 0;
  if ((b0 & 0xE0) == 0xC0) { n = 1; cp = b0 & 0x1F; min = 0x80; }
  else if ((b0 & 0xF0) == 0xE0) { n = 2; cp = b0 & 0x0F; min = 0x800; }
  else if ((b0 & 0xF8) == 0xF0) { n = 3; cp = b0 & 0x07; min = 0x10000; }
  else { ++i; return invalid; }
  if (s.size() - i <= static_cast<std::size_t>(n)) { ++i; return invalid; }
  for (int k = 1; k <= n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) { ++i; return invalid; }
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) { ++i; return invalid; }
  i += n + 1;
  return cp;
}

/// Appends the UTF-8 encoding of code point cp (cp <= 0x10FFFF) to out.
inline void append(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

/// UTF-8 of one code point.
inline std::string encode(std::uint32_t cp) {
  std::string s;
  append(s, cp);
  return s;
}

/// True for the characters JavaScript's String.prototype.trim removes (ECMA-262 WhiteSpace and
/// LineTerminator): the white space that the reference tokenizer strips around added tokens.
inline bool is_js_space(std::uint32_t c) {
  return c == 0x09 || c == 0x0A || c == 0x0B || c == 0x0C || c == 0x0D || c == 0x20 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000 || c == 0xFEFF;
}

/// True for the Unicode White_Space property (what `\s` matches in the Rust `regex` crate and in
/// Oniguruma, the engines of the Hugging Face tokenizers library): U+0009..U+000D, U+0020, U+0085,
/// U+00A0, U+1680, U+2000..U+200A, U+2028, U+2029, U+202F, U+205F, U+3000 (not U+FEFF, not U+180E).
inline bool is_white_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Valid UTF-8 from any bytes: each maximal ill-formed subsequence (Unicode 15 section 3.9, "U+FFFD
/// substitution of maximal subparts", as Python's `bytes.decode("utf-8", errors="replace")`) becomes
/// U+FFFD; valid text is returned unchanged.
inline std::string to_valid(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const auto b0 = static_cast<unsigned char>(s[i]);
    if (b0 < 0x80) {
      out += static_cast<char>(b0);
      ++i;
      continue;
    }
    int n = 0;                          // continuation bytes expected
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the first continuation byte
    if (b0 >= 0xC2 && b0 <= 0xDF) n = 1;
    else if (b0 == 0xE0) { n = 2; lo = 0xA0; }
    else if (b0 >= 0xE1 && b0 <= 0xEC) n = 2;
    else if (b0 == 0xED) { n = 2; hi = 0x9F; }
    else if (b0 >= 0xEE && b0 <= 0xEF) n = 2;
    else if (b0 == 0xF0) { n = 3; lo = 0x90; }
    else if (b0 >= 0xF1 && b0 <= 0xF3) n = 3;
    else if (b0 == 0xF4) { n = 3; hi = 0x8F; }
    std::size_t k = 1;  // bytes of a well-formed prefix
    for (; n > 0 && k <= static_cast<std::size_t>(n) && i + k < s.size(); ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if (b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) break;
    }
    if (n > 0 && k == static_cast<std::size_t>(n) + 1) {
      out.append(s, i, k);
    } else {
      out += "\xEF\xBF\xBD";  // U+FFFD for the maximal subpart s[i, i + k)
    }
    i += k;
  }
  return out;
}

}  // namespace kvcompact::utf8
