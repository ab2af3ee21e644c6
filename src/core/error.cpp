// One-line, valid-UTF-8 error messages (see error.h).
#include "core/error.h"

#include <cstddef>

#include "core/utf8.h"

namespace kvcompact {

std::string printable_one_line(const std::string& text) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t start = i;
    const std::uint32_t cp = utf8::next(text, i);  // RFC 3629; an ill-formed byte: invalid, i + 1
    if (cp == 0xFFFFFFFFu || (cp < 0x20 && cp != '\t') || cp == 0x7F) {
      const auto c = static_cast<unsigned char>(text[start]);
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out.append(text, start, i - start);
    }
  }
  return out;
}

}  // namespace kvcompact
