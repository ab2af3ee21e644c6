// kvcompact: the one exception type the library throws for bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace kvcompact {

/// `text` made safe to print as one line: bytes that are not valid UTF-8 and control characters
/// (newlines included; tab kept) become \xNN escapes. Valid UTF-8 passes unchanged.
std::string printable_one_line(const std::string& text);

/// Thrown for every user-facing failure (missing or corrupt file, wrong shape, NaN, impossible
/// option). The message is one line that names the file or option and the problem; the CLI prints
/// it as "kvcompact: error: <message>" and exits with status 1. Bytes of a corrupt file quoted in
/// a message (a token, a key) are escaped by printable_one_line, so the message is valid UTF-8.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable_one_line(message)) {}
  explicit Error(const char* message) : Error(std::string(message)) {}
};

}  // namespace kvcompact
