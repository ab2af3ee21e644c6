// One-line, valid-UTF-8 error messages (see error.h).
#include "core/error.h"

#include <cstddef>

namespace kvcompact {

std::string printable_one_line(const std::string& text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  auto escape = [&](unsigned char c) {
    out += "\\x";
    out += kHex[c >> 4];
    out += kHex[c & 15];
  };
  const std::size_t n = text.size();
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      if ((c < 0x20 && c != '\t') || c == 0x7F)
        escape(c);
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    // The length of a well-formed sequence starting here (RFC 3629: no overlongs, no surrogates,
    // nothing above U+10FFFF), or 0.
    std::size_t len = 0;
    auto cont = [&](std::size_t k) { return i + k < n && (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80; };
    const unsigned char c1 = i + 1 < n ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c >= 0xC2 && c <= 0xDF && cont(1)) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF && cont(1) && cont(2)) {
      const bool ok = (c == 0xE0 && c1 >= 0xA0) || (c == 0xED && c1 <= 0x9F) || (c != 0xE0 && c != 0xED);
      len = ok ? 3 : 0;
    } else if (c >= 0xF0 && c <= 0xF4 && cont(1) && cont(2) && cont(3)) {
      const bool ok = (c == 0xF0 && c1 >= 0x90) || (c == 0xF4 && c1 <= 0x8F) || (c > 0xF0 && c < 0xF4);
      len = ok ? 4 : 0;
    }
    if (len == 0) {
      escape(c);
      ++i;
    } else {
      out.append(text, i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace kvcompact
