// safetensors reader and writer (https://github.com/huggingface/safetensors, format spec in its
// README): 8-byte little-endian header length N, N bytes of UTF-8 JSON
// {name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {str: str}}, then the
// data buffer; offsets are bytes relative to the start of the buffer. Files are memory-mapped;
// tensors are handed out as pointers into the mapping (no copies).
// Also sharded checkpoints: model.safetensors.index.json {"weight_map": {name: shard file}}.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/file_bytes.h"

namespace kvcompact {

/// Bytes per element of a safetensors dtype name (BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0,
/// F8_E4M3FNUZ, F8_E5M2FNUZ, I16, U16, F16, BF16, I32, U32, F32, C64, F64, I64, U64); 0 for an
/// unknown name and for the sub-byte F4, F6_E2M3, F6_E3M2.
std::size_t safetensors_dtype_size(const std::string& dtype);

/// One tensor of a safetensors file. `data` points into the mapped file (any alignment).
struct SafetensorsTensor {
  std::string name;
  std::string dtype;                ///< e.g. "F32", "BF16"
  std::vector<std::int64_t> shape;  ///< row-major; [] for a scalar
  std::uint64_t begin = 0, end = 0;  ///< data_offsets, bytes relative to the data buffer
  const std::uint8_t* data = nullptr;
  std::uint64_t n_elements = 0;
  std::string file;  ///< path of the file holding it (for error messages)
};

/// A parsed, validated safetensors file, kept memory-mapped while the object lives.
class SafetensorsFile {
 public:
  /// Parses `path`, with the format's rules as the Rust safetensors library checks them. Throws
  /// Error("<path>: ...") when the file is missing or shorter than 8 bytes, the header length
  /// runs past the end of the file or over 100,000,000 bytes, the header is not a JSON object, a
  /// key appears twice in one object (a tensor name, a __metadata__ key, a field: the format
  /// forbids duplicates, which the Rust library would partly let pass), __metadata__ is not an
  /// object (null counts as absent) or holds a non-string value, an entry lacks
  /// dtype/shape/data_offsets or has the wrong JSON types, a dtype is unknown or sub-byte (F4, F6),
  /// a dimension is negative, begin > end or end runs past the data buffer, end - begin !=
  /// product(shape) x dtype size, or the tensors sorted by offsets do not tile the data buffer
  /// exactly (overlap, a hole, or bytes after the last tensor); the message names the tensor where
  /// one is involved. Tensors may appear in any order in the header.
  explicit SafetensorsFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  /// Tensors in header order.
  const std::vector<SafetensorsTensor>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  /// Throws Error("<path>: tensor <name> is missing").
  const SafetensorsTensor& tensor(const std::string& name) const;
  /// `__metadata__` (string -> string); empty when absent.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  /// Bytes of the whole file.
  std::size_t file_size() const { return file_.size(); }

 private:
  FileBytes file_;
  std::vector<SafetensorsTensor> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

/// The safetensors tensors of a checkpoint folder: `model.safetensors.index.json` (sharded; every
/// shard named in weight_map is opened once and must hold the tensors mapped to it), else
/// `model.safetensors`, else the single `*.safetensors` file of the folder.
/// Throws Error naming the folder/file for a missing file, a malformed index, a tensor the index
/// maps to a shard that lacks it.
class SafetensorsCheckpoint {
 public:
  explicit SafetensorsCheckpoint(const std::string& folder);

  const std::string& folder() const { return folder_; }
  /// nullptr when absent.
  const SafetensorsTensor* find(const std::string& name) const;
  /// Throws Error("<folder>: tensor <name> is missing").
  const SafetensorsTensor& tensor(const std::string& name) const;
  /// Total bytes of all shard files.
  std::uint64_t total_file_bytes() const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  std::string folder_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::unordered_map<std::string, const SafetensorsTensor*> by_name_;
};

/// A tensor to write: `data` holds product(shape) x dtype size bytes (the caller keeps it alive
/// during the call).
struct SafetensorsWriteTensor {
  std::string name;
  std::string dtype;
  std::vector<std::int64_t> shape;
  const void* data = nullptr;
  std::size_t n_bytes = 0;
};

/// Writes a safetensors file: header (JSON, padded with spaces to a multiple of 8 bytes), then
/// the tensors' bytes back to back in the given order. Throws Error naming the file when it
/// cannot be written, or a tensor's n_bytes does not match its shape and dtype.
void write_safetensors(const std::string& path, const std::vector<SafetensorsWriteTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace kvcompact
