// kvcompact: the one exception type the library throws for bad input.
#pragma once

#include <stdexcept>
#include <string>

namespace kvcompact {

/// Thrown for every user-facing failure (missing or corrupt file, wrong shape, NaN, impossible
/// option). The message is one line that names the file or option and the problem; the CLI prints
/// it as "kvcompact: error: <message>" and exits with status 1.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace kvcompact
