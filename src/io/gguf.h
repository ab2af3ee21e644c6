// Generic GGUF reader (spec: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), versions
// 2 and 3, little-endian. Architecture-specific model mapping lives in loaders/model_loader.cpp.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "io/file_bytes.h"
#include "core/weight_matrix.h"

namespace kvcompact {

/// GGUF metadata value types (gguf.md `gguf_metadata_value_type`).
enum class GgufValueType : std::uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6, BOOL = 7,
  STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};

/// Name of a value type ("u32", "string", "array", ...); "type#N" when unknown.
std::string gguf_value_type_name(GgufValueType t);

/// ggml tensor types (ggml.h `enum ggml_type`); only those named here are recognised by name.
enum class GgmlType : std::uint32_t {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9, Q2_K = 10,
  Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15, IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18,
  IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22, IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26,
  I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30, TQ1_0 = 34, TQ2_0 = 35,
};

/// Name of a ggml type ("F32", "Q4_K", ...); "type#N" when unknown.
std::string ggml_type_name(std::uint32_t type);

/// The WeightType storing ggml type `type` (same block layout), or nullopt when kvcompact cannot
/// decode it (IQ*, TQ*, Q8_K, integer and F64 types).
std::optional<WeightType> ggml_weight_type(std::uint32_t type);

/// Comma-separated names of the ggml types that ggml_weight_type decodes ("F32, F16, BF16, ...").
std::string ggml_weight_type_names();

/// One metadata value. Scalars: integers in `u` (unsigned types) or `i` (signed types and
/// bool), floats in `f`; strings in `str`; arrays in `array` with element type `elem_type`.
struct GgufValue {
  GgufValueType type = GgufValueType::UINT8;
  GgufValueType elem_type = GgufValueType::UINT8;  ///< arrays only
  std::uint64_t u = 0;
  std::int64_t i = 0;
  double f = 0.0;
  std::string str;
  std::vector<GgufValue> array;
};

/// One tensor's descriptor. dims are ggml `ne`: dims[0] varies fastest, so a 2-D tensor with
/// dims [in, out] is a row-major matrix W[out, in].
struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;  ///< ne[0..n_dims)
  std::uint32_t type = 0;           ///< ggml type id (GgmlType)
  std::uint64_t offset = 0;         ///< bytes, relative to the data section
  std::uint64_t n_elements = 0;     ///< product of dims
  std::uint64_t n_bytes = 0;        ///< storage size; 0 when the type's block size is unknown
};

/// A parsed GGUF file: header, metadata and tensor descriptors, with the bytes kept mapped.
/// Every count, length and offset is validated against the file size before use, so a corrupt
/// file throws Error("<path>: ...") instead of allocating or reading out of bounds.
class GgufFile {
 public:
  /// Parses `path`. Throws Error naming the file when it is missing, too short, has the wrong
  /// magic (not "GGUF"), an unsupported version (not 2 or 3), an absurd KV/tensor/array count,
  /// an unknown value type, duplicate keys or tensor names, more than 4 dims, a zero alignment,
  /// or a tensor (of known type size) whose data lies outside the file or is misaligned.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return file_.path(); }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }  ///< bytes from file start

  /// Metadata keys in file order.
  const std::vector<std::string>& keys() const { return key_order_; }
  bool has(const std::string& key) const { return kv_.count(key) != 0; }
  /// The raw value; throws Error("<path>: metadata key '<key>' is missing").
  const GgufValue& value(const std::string& key) const;

  // Typed getters. Each throws Error naming the file and key when the key is missing or has the
  // wrong type (or an integer does not fit).
  /// Any integer type (u8..i64).
  std::int64_t get_int(const std::string& key) const;
  /// f32 or f64.
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  /// Array of strings.
  std::vector<std::string> get_string_array(const std::string& key) const;
  /// Array of f32/f64.
  std::vector<float> get_float_array(const std::string& key) const;
  /// Array of any integer type.
  std::vector<std::int64_t> get_int_array(const std::string& key) const;
  /// Like get_int/get_float, but `fallback` when the key is absent (wrong type still throws).
  std::int64_t get_int_or(const std::string& key, std::int64_t fallback) const;
  double get_float_or(const std::string& key, double fallback) const;

  /// Tensor descriptors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  /// Throws Error("<path>: tensor '<name>' is missing").
  const GgufTensorInfo& tensor(const std::string& name) const;
  /// Raw stored bytes of a tensor (n_bytes of them). Throws Error for unknown-size types.
  const std::uint8_t* tensor_bytes(const GgufTensorInfo& t) const;
  /// Tensor data converted to float32, [n_elements] in ggml order (dims[0] fastest).
  /// Supported: every type with a ggml_weight_type (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1,
  /// Q8_0, Q8_1, Q2_K ... Q6_K; ggml block layouts, see WeightType), decoded by dequantize_row.
  /// Throws Error("<path>: tensor <name> has unsupported type IQ2_XS") otherwise.
  std::vector<float> tensor_f32(const std::string& name) const;
  std::vector<float> tensor_f32(const GgufTensorInfo& t) const;

 private:
  GgufValue read_value(ByteReader& r, GgufValueType type, int depth) const;
  [[noreturn]] void fail(const std::string& msg) const;
  [[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* expected) const;

  FileBytes file_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::vector<std::string> key_order_;
  std::unordered_map<std::string, GgufValue> kv_;
  std::vector<GgufTensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

/// IEEE-754 binary16 bits -> float (subnormals, Inf and NaN handled).
float fp16_to_fp32(std::uint16_t h);

}  // namespace kvcompact
