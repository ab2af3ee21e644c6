// Generic GGUF reader: see gguf.h.
#include "io/gguf.h"

#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "core/dequant.h"

namespace kvcompact {

namespace {

/// Block geometry of a ggml type: elements per block and bytes per block (0 = unknown).
struct TypeTraits {
  std::uint64_t block = 0;
  std::uint64_t bytes = 0;
};

TypeTraits type_traits(std::uint32_t t) {
  // Types kvcompact decodes: the block geometry of their WeightType (one table for both).
  if (const std::optional<WeightType> wt = ggml_weight_type(t))
    return {static_cast<std::uint64_t>(weight_block_elements(*wt)), weight_block_bytes(*wt)};
  switch (static_cast<GgmlType>(t)) {
    case GgmlType::Q8_K: return {256, 292};
    case GgmlType::I8: return {1, 1};
    case GgmlType::I16: return {1, 2};
    case GgmlType::I32: return {1, 4};
    case GgmlType::I64: return {1, 8};
    case GgmlType::F64: return {1, 8};
    default: return {0, 0};
  }
}

/// Smallest encoded size of one value of a type (for validating counts before allocating).
std::uint64_t min_value_bytes(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::BOOL: return 1;
    case GgufValueType::UINT16: case GgufValueType::INT16: return 2;
    case GgufValueType::UINT32: case GgufValueType::INT32: case GgufValueType::FLOAT32: return 4;
    case GgufValueType::UINT64: case GgufValueType::INT64: case GgufValueType::FLOAT64: return 8;
    case GgufValueType::STRING: return 8;
    case GgufValueType::ARRAY: return 12;
  }
  return 0;
}

bool is_valid_value_type(std::uint32_t t) { return t <= 12; }

bool is_integer(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: case GgufValueType::INT8: case GgufValueType::UINT16:
    case GgufValueType::INT16: case GgufValueType::UINT32: case GgufValueType::INT32:
    case GgufValueType::UINT64: case GgufValueType::INT64: return true;
    default: return false;
  }
}
bool is_unsigned(GgufValueType t) {
  return t == GgufValueType::UINT8 || t == GgufValueType::UINT16 || t == GgufValueType::UINT32 ||
         t == GgufValueType::UINT64;
}

template <typename T>
T load(const std::uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

std::string gguf_value_type_name(GgufValueType t) {
  switch (t) {
    case GgufValueType::UINT8: return "u8";
    case GgufValueType::INT8: return "i8";
    case GgufValueType::UINT16: return "u16";
    case GgufValueType::INT16: return "i16";
    case GgufValueType::UINT32: return "u32";
    case GgufValueType::INT32: return "i32";
    case GgufValueType::FLOAT32: return "f32";
    case GgufValueType::BOOL: return "bool";
    case GgufValueType::STRING: return "string";
    case GgufValueType::ARRAY: return "array";
    case GgufValueType::UINT64: return "u64";
    case GgufValueType::INT64: return "i64";
    case GgufValueType::FLOAT64: return "f64";
  }
  return fmt::format("type#{}", static_cast<std::uint32_t>(t));
}

std::string ggml_type_name(std::uint32_t type) {
  static const char* const names[] = {
      "F32",  "F16",  "Q4_0", "Q4_1", nullptr, nullptr, "Q5_0", "Q5_1", "Q8_0", "Q8_1",
      "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K", "Q8_K", "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S",
      "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS", "I8", "I16", "I32", "I64", "F64", "IQ1_M",
      "BF16", nullptr, nullptr, nullptr, "TQ1_0", "TQ2_0"};
  if (type < sizeof(names) / sizeof(names[0]) && names[type] != nullptr) return names[type];
  return fmt::format("type#{}", type);
}

std::optional<WeightType> ggml_weight_type(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::F32: return WeightType::F32;
    case GgmlType::F16: return WeightType::F16;
    case GgmlType::BF16: return WeightType::BF16;
    case GgmlType::Q4_0: return WeightType::Q4_0;
    case GgmlType::Q4_1: return WeightType::Q4_1;
    case GgmlType::Q5_0: return WeightType::Q5_0;
    case GgmlType::Q5_1: return WeightType::Q5_1;
    case GgmlType::Q8_0: return WeightType::Q8_0;
    case GgmlType::Q8_1: return WeightType::Q8_1;
    case GgmlType::Q2_K: return WeightType::Q2_K;
    case GgmlType::Q3_K: return WeightType::Q3_K;
    case GgmlType::Q4_K: return WeightType::Q4_K;
    case GgmlType::Q5_K: return WeightType::Q5_K;
    case GgmlType::Q6_K: return WeightType::Q6_K;
    default: return std::nullopt;
  }
}

std::string ggml_weight_type_names() {
  std::string s;
  for (std::uint32_t t = 0; t <= static_cast<std::uint32_t>(GgmlType::BF16); ++t)
    if (ggml_weight_type(t)) s += (s.empty() ? "" : ", ") + ggml_type_name(t);
  return s;
}

float fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  std::uint32_t mant = h & 0x3FFu;
  std::uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      mant &= 0x3FFu;
      bits = sign | (static_cast<std::uint32_t>(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 0x1F) {
    bits = sign | 0x7F800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

void GgufFile::fail(const std::string& msg) const { throw Error(fmt::format("{}: {}", path(), msg)); }

GgufValue GgufFile::read_value(ByteReader& r, GgufValueType type, int depth) const {
  GgufValue v;
  v.type = type;
  switch (type) {
    case GgufValueType::UINT8: v.u = r.read<std::uint8_t>("u8 value"); break;
    case GgufValueType::INT8: v.i = r.read<std::int8_t>("i8 value"); break;
    case GgufValueType::UINT16: v.u = r.read<std::uint16_t>("u16 value"); break;
    case GgufValueType::INT16: v.i = r.read<std::int16_t>("i16 value"); break;
    case GgufValueType::UINT32: v.u = r.read<std::uint32_t>("u32 value"); break;
    case GgufValueType::INT32: v.i = r.read<std::int32_t>("i32 value"); break;
    case GgufValueType::UINT64: v.u = r.read<std::uint64_t>("u64 value"); break;
    case GgufValueType::INT64: v.i = r.read<std::int64_t>("i64 value"); break;
    case GgufValueType::FLOAT32: v.f = r.read<float>("f32 value"); break;
    case GgufValueType::FLOAT64: v.f = r.read<double>("f64 value"); break;
    case GgufValueType::BOOL: {
      const std::uint8_t b = r.read<std::uint8_t>("bool value");
      if (b > 1) fail(fmt::format("corrupt bool value {} at offset {}", b, r.offset() - 1));
      v.i = b;
      break;
    }
    case GgufValueType::STRING: {
      const std::uint64_t n = r.read<std::uint64_t>("string length");
      if (n > r.remaining()) {
        fail(fmt::format("corrupt string length {} at offset {} (only {} bytes left)", n,
                         r.offset() - 8, r.remaining()));
      }
      v.str = r.read_string(static_cast<std::size_t>(n), "string");
      break;
    }
    case GgufValueType::ARRAY: {
      if (depth >= 8) fail("metadata arrays nested too deeply");
      const std::uint32_t et = r.read<std::uint32_t>("array element type");
      if (!is_valid_value_type(et)) {
        fail(fmt::format("unknown array element type {} at offset {}", et, r.offset() - 4));
      }
      v.elem_type = static_cast<GgufValueType>(et);
      const std::uint64_t n = r.read<std::uint64_t>("array count");
      if (n > r.remaining() / min_value_bytes(v.elem_type)) {
        fail(fmt::format("corrupt array count {} at offset {} (only {} bytes left)", n,
                         r.offset() - 8, r.remaining()));
      }
      v.array.reserve(static_cast<std::size_t>(n));
      for (std::uint64_t k = 0; k < n; ++k) v.array.push_back(read_value(r, v.elem_type, depth + 1));
      break;
    }
  }
  return v;
}

GgufFile::GgufFile(const std::string& path) : file_(path) {
  ByteReader r(file_.data(), file_.size(), path);
  if (file_.size() < 24) {
    fail(fmt::format("too small for a GGUF file ({} bytes; the header alone is 24)", file_.size()));
  }
  const std::uint8_t* magic = r.take(4, "magic");
  if (std::memcmp(magic, "GGUF", 4) != 0) {
    fail(fmt::format("wrong magic (not a GGUF file): first bytes {:02x} {:02x} {:02x} {:02x}",
                     magic[0], magic[1], magic[2], magic[3]));
  }
  version_ = r.read<std::uint32_t>("version");
  if (version_ != 2 && version_ != 3) {
    fail(fmt::format("unsupported GGUF version {} (supported: 2, 3)", version_));
  }
  const std::uint64_t n_tensors = r.read<std::uint64_t>("tensor_count");
  const std::uint64_t n_kv = r.read<std::uint64_t>("metadata_kv_count");
  // Minimal encodings: KV = key length (8) + type (4) + 1 byte; tensor info = name length (8) +
  // n_dims (4) + type (4) + offset (8).
  if (n_kv > r.remaining() / 13) {
    fail(fmt::format("corrupt metadata_kv_count {} (the file has only {} bytes)", n_kv, file_.size()));
  }
  if (n_tensors > r.remaining() / 24) {
    fail(fmt::format("corrupt tensor_count {} (the file has only {} bytes)", n_tensors, file_.size()));
  }

  for (std::uint64_t k = 0; k < n_kv; ++k) {
    const std::uint64_t len = r.read<std::uint64_t>("metadata key length");
    if (len > r.remaining()) {
      fail(fmt::format("corrupt metadata key length {} at offset {}", len, r.offset() - 8));
    }
    std::string key = r.read_string(static_cast<std::size_t>(len), "metadata key");
    const std::uint32_t t = r.read<std::uint32_t>("metadata value type");
    if (!is_valid_value_type(t)) {
      fail(fmt::format("metadata key '{}' has unknown value type {}", key, t));
    }
    GgufValue v = read_value(r, static_cast<GgufValueType>(t), 0);
    if (kv_.count(key) != 0) fail(fmt::format("duplicate metadata key '{}'", key));
    key_order_.push_back(key);
    kv_.emplace(std::move(key), std::move(v));
  }

  if (has("general.alignment")) {
    const std::int64_t a = get_int("general.alignment");
    if (a <= 0 || a > (1 << 30)) fail(fmt::format("bad general.alignment {}", a));
    alignment_ = static_cast<std::uint64_t>(a);
  }

  tensors_.reserve(static_cast<std::size_t>(n_tensors));
  for (std::uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti;
    const std::uint64_t len = r.read<std::uint64_t>("tensor name length");
    if (len > r.remaining()) {
      fail(fmt::format("corrupt tensor name length {} at offset {}", len, r.offset() - 8));
    }
    ti.name = r.read_string(static_cast<std::size_t>(len), "tensor name");
    const std::uint32_t nd = r.read<std::uint32_t>("tensor n_dimensions");
    if (nd > 4) fail(fmt::format("tensor {} has {} dimensions (at most 4)", ti.name, nd));
    ti.n_elements = 1;
    for (std::uint32_t d = 0; d < nd; ++d) {
      const std::uint64_t ne = r.read<std::uint64_t>("tensor dimension");
      if (ne == 0 || __builtin_mul_overflow(ti.n_elements, ne, &ti.n_elements) ||
          ti.n_elements > (std::uint64_t{1} << 48)) {
        fail(fmt::format("tensor {} has a corrupt dimension {}", ti.name, ne));
      }
      ti.dims.push_back(ne);
    }
    ti.type = r.read<std::uint32_t>("tensor type");
    ti.offset = r.read<std::uint64_t>("tensor offset");
    const TypeTraits tt = type_traits(ti.type);
    if (tt.block != 0) {
      if (ti.dims.empty() ? tt.block != 1 : ti.dims[0] % tt.block != 0) {
        fail(fmt::format("tensor {} of type {}: first dimension is not a multiple of the block size {}",
                         ti.name, ggml_type_name(ti.type), tt.block));
      }
      ti.n_bytes = ti.n_elements / tt.block * tt.bytes;
    }
    if (tensor_index_.count(ti.name) != 0) fail(fmt::format("duplicate tensor name {}", ti.name));
    tensor_index_.emplace(ti.name, tensors_.size());
    tensors_.push_back(std::move(ti));
  }

  const std::uint64_t end_of_infos = r.offset();
  data_offset_ = (end_of_infos + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > file_.size()) {
    fail(fmt::format("truncated: the data section would start at offset {}, the file has {} bytes",
                     data_offset_, file_.size()));
  }
  const std::uint64_t data_size = file_.size() > data_offset_ ? file_.size() - data_offset_ : 0;
  for (const auto& t : tensors_) {
    if (t.offset % alignment_ != 0) {
      fail(fmt::format("tensor {} offset {} is not a multiple of the alignment {}", t.name, t.offset,
                       alignment_));
    }
    if (t.n_bytes != 0 && (t.offset > data_size || t.n_bytes > data_size - t.offset)) {
      fail(fmt::format("truncated or corrupt: tensor {} needs bytes [{}, {}) of the data section, "
                       "which has {} bytes (file {} bytes)", t.name, t.offset, t.offset + t.n_bytes,
                       data_size, file_.size()));
    }
  }
}

const GgufValue& GgufFile::value(const std::string& key) const {
  auto it = kv_.find(key);
  if (it == kv_.end()) fail(fmt::format("metadata key '{}' is missing", key));
  return it->second;
}

void GgufFile::wrong_type(const std::string& key, const GgufValue& v, const char* expected) const {
  std::string got = gguf_value_type_name(v.type);
  if (v.type == GgufValueType::ARRAY) got += " of " + gguf_value_type_name(v.elem_type);
  fail(fmt::format("metadata key '{}' has type {}, expected {}", key, got, expected));
}

namespace {
/// Integer value of an integer-typed GgufValue as int64 (false when a u64 does not fit).
bool int_of(const GgufValue& v, std::int64_t& out) {
  if (is_unsigned(v.type)) {
    if (v.u > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return false;
    out = static_cast<std::int64_t>(v.u);
  } else {
    out = v.i;
  }
  return true;
}
}  // namespace

std::int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = value(key);
  std::int64_t out = 0;
  if (!is_integer(v.type)) wrong_type(key, v, "an integer");
  if (!int_of(v, out)) fail(fmt::format("metadata key '{}' value {} is too large", key, v.u));
  return out;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::FLOAT32 && v.type != GgufValueType::FLOAT64) {
    wrong_type(key, v, "f32 or f64");
  }
  return v.f;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::BOOL) wrong_type(key, v, "bool");
  return v.i != 0;
}

const std::string& GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::STRING) wrong_type(key, v, "string");
  return v.str;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::ARRAY || v.elem_type != GgufValueType::STRING) {
    wrong_type(key, v, "array of string");
  }
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(e.str);
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::ARRAY ||
      (v.elem_type != GgufValueType::FLOAT32 && v.elem_type != GgufValueType::FLOAT64)) {
    wrong_type(key, v, "array of f32");
  }
  std::vector<float> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(static_cast<float>(e.f));
  return out;
}

std::vector<std::int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = value(key);
  if (v.type != GgufValueType::ARRAY || !is_integer(v.elem_type)) {
    wrong_type(key, v, "array of integers");
  }
  std::vector<std::int64_t> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) {
    std::int64_t x = 0;
    if (!int_of(e, x)) fail(fmt::format("metadata key '{}' holds a too large value {}", key, e.u));
    out.push_back(x);
  }
  return out;
}

std::int64_t GgufFile::get_int_or(const std::string& key, std::int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

const GgufTensorInfo* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  const GgufTensorInfo* t = find_tensor(name);
  if (t == nullptr) fail(fmt::format("tensor '{}' is missing", name));
  return *t;
}

const std::uint8_t* GgufFile::tensor_bytes(const GgufTensorInfo& t) const {
  if (t.n_bytes == 0) {
    fail(fmt::format("tensor {} has unsupported type {}", t.name, ggml_type_name(t.type)));
  }
  return file_.data() + data_offset_ + t.offset;  // range validated in the constructor
}

std::vector<float> GgufFile::tensor_f32(const std::string& name) const {
  return tensor_f32(tensor(name));
}

std::vector<float> GgufFile::tensor_f32(const GgufTensorInfo& t) const {
  const std::optional<WeightType> wt = ggml_weight_type(t.type);
  if (!wt) fail(fmt::format("tensor {} has unsupported type {}", t.name, ggml_type_name(t.type)));
  std::vector<float> out(static_cast<std::size_t>(t.n_elements));
  // Sizes and block multiples were validated by the constructor; a tensor is rows of whole blocks.
  if (!out.empty()) dequantize_row(*wt, tensor_bytes(t), out.data(), static_cast<std::int64_t>(t.n_elements));
  return out;
}

}  // namespace kvcompact
