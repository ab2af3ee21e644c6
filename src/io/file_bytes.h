// Whole-file byte access (read-only memory map, or a plain read as fallback) and a bounds-checked
// little-endian cursor over those bytes. Every failure throws Error naming the file.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace kvcompact {

static_assert(std::endian::native == std::endian::little,
              "kvcompact file readers assume a little-endian host (llama2.c and GGUF files are LE)");

/// The bytes of one whole file, memory-mapped read-only when possible (else read into memory).
/// Move-only. Throws Error("<path>: cannot open file: <reason>") when the file is missing or
/// unreadable, and Error("<path>: is a directory") for a directory.
class FileBytes {
 public:
  /// Opens and maps (or reads) the whole file at `path`. `use_mmap=false` forces a plain read.
  explicit FileBytes(const std::string& path, bool use_mmap = true);
  ~FileBytes();
  FileBytes(FileBytes&& other) noexcept;
  FileBytes& operator=(FileBytes&& other) noexcept;
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;

  const std::uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }  ///< bytes
  const std::string& path() const { return path_; }
  bool mapped() const { return map_ != nullptr; }  ///< true when the bytes are an mmap

 private:
  void release() noexcept;

  std::string path_;
  const std::uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
  void* map_ = nullptr;             // mmap base (when mapped)
  std::vector<std::uint8_t> copy_;  // the bytes (when read)
};

/// Sequential little-endian reader over a byte range with bounds checks. Errors read
/// "<name>: truncated: need N bytes for <what> at offset O, file has S bytes".
class ByteReader {
 public:
  /// `name` is the file name used in error messages; [data, data+size) is the readable range.
  ByteReader(const std::uint8_t* data, std::size_t size, std::string name)
      : data_(data), size_(size), name_(std::move(name)) {}

  std::size_t offset() const { return pos_; }
  std::size_t size() const { return size_; }
  std::size_t remaining() const { return size_ - pos_; }
  const std::string& name() const { return name_; }

  /// Reads one trivially copyable value (little-endian) describing `what` for error messages.
  template <typename T>
  T read(const char* what) {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  /// Returns a pointer to the next n bytes and advances past them.
  const std::uint8_t* take(std::size_t n, const char* what) {
    need(n, what);
    const std::uint8_t* p = data_ + pos_;
    pos_ += n;
    return p;
  }
  /// Reads n bytes as a string.
  std::string read_string(std::size_t n, const char* what) {
    const std::uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }
  /// Moves the cursor to an absolute offset (<= size).
  void seek(std::size_t off, const char* what) {
    if (off > size_) fail_truncated(off - pos_, what);
    pos_ = off;
  }
  /// Throws the truncation Error unless n more bytes are available.
  void need(std::size_t n, const char* what) const {
    if (n > size_ - pos_) fail_truncated(n, what);
  }

 private:
  [[noreturn]] void fail_truncated(std::size_t n, const char* what) const;

  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
  std::string name_;
};

}  // namespace kvcompact
