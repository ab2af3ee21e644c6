// Atomic file output: results are never left half-written.
#pragma once

#include <string>
#include <string_view>

namespace kvcompact {

/// Writes `contents` to `path` atomically: to "<path>.tmp.<host>.<pid>" first, then rename(2) over path.
/// Creates missing parent folders. Throws Error naming the path on failure.
void write_file_atomic(const std::string& path, std::string_view contents);

}  // namespace kvcompact
