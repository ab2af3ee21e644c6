// NumPy .npy writer (see npy_file.h; format: numpy.lib.format, version 1.0).
#include "io/npy_file.h"

#include <fmt/format.h>

#include <fstream>

#include "core/error.h"

namespace kvcompact {
namespace {

void write_raw(const std::string& path, const char* descr, const void* data, std::size_t bytes, std::size_t count,
               const std::vector<std::int64_t>& shape) {
  std::int64_t n = 1;
  std::string dims;
  for (std::int64_t s : shape) {
    n *= s;
    dims += fmt::format("{}, ", s);
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  if (n != static_cast<std::int64_t>(count))
    throw Error(fmt::format("{}: {} values do not fill an array of {} entries", path, count, n));
  std::string header = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open for writing", path));
  const unsigned short len = static_cast<unsigned short>(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  const char lb[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  f.write(lb, 2);
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  f.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!f) throw Error(fmt::format("{}: write failed", path));
}

}  // namespace

void write_npy(const std::string& path, std::span<const float> data, const std::vector<std::int64_t>& shape) {
  write_raw(path, "<f4", data.data(), data.size_bytes(), data.size(), shape);
}

void write_npy(const std::string& path, std::span<const std::int32_t> data, const std::vector<std::int64_t>& shape) {
  write_raw(path, "<i4", data.data(), data.size_bytes(), data.size(), shape);
}

}  // namespace kvcompact
