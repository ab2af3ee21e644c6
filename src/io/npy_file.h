// NumPy .npy files (format version 1.0, little-endian, C order) for handing arrays to Python peers.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace kvcompact {

/// Writes `data` as a float32 array of `shape` (product must equal data.size()) to `path`.
/// Throws Error naming the file when the shape does not match or the file cannot be written.
void write_npy(const std::string& path, std::span<const float> data, const std::vector<std::int64_t>& shape);

/// The same for int32 data.
void write_npy(const std::string& path, std::span<const std::int32_t> data, const std::vector<std::int64_t>& shape);

}  // namespace kvcompact
