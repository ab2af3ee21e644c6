// A weight matrix W[rows, cols] (row-major, y = W x) in one of the storage types of model files:
// float32, IEEE float16, bfloat16, or the ggml block quantisations Q8_0 / Q4_0. Either owns its
// float32 values (llama2.c and f32 GGUF loaders, random test models) or views bytes owned
// elsewhere (a memory-mapped checkpoint kept alive by Model::storage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvcompact {

/// Storage type of a weight matrix.
/// Q8_0 (ggml block_q8_0): per 32 consecutive elements of a row, an f16 scale d then 32 int8 q;
///   value = q * d (34 bytes per block).
/// Q4_0 (ggml block_q4_0): per 32 elements, an f16 scale d then 16 bytes; byte j holds element j
///   in its low nibble and element j + 16 in its high nibble; value = (nibble - 8) * d (18 bytes).
enum class WeightType : std::uint8_t { F32, F16, BF16, Q8_0, Q4_0 };

/// "F32", "F16", "BF16", "Q8_0", "Q4_0".
const char* weight_type_name(WeightType t);

/// Bytes of one row of `cols` elements. Throws Error when a quantised type's cols is not a
/// multiple of its 32-element block.
std::size_t weight_row_bytes(WeightType t, std::int64_t cols);

/// A typed weight matrix. Constructed implicitly from std::vector<float> (owned float32 values of
/// unspecified shape: rows() == cols() == 0, the user supplies the shape), so code written for
/// plain float vectors keeps working; the vector-like members (size, operator[], f32(), ...)
/// are for owned float32 matrices and throw Error on typed views.
class WeightMatrix {
 public:
  WeightMatrix() = default;
  WeightMatrix(std::vector<float> values) : f32_(std::move(values)) {}  // NOLINT: implicit

  /// A view of `rows` x `cols` elements of type `t` at `data` (row r at data + r *
  /// weight_row_bytes(t, cols)); the bytes must outlive the matrix. F32 views need 4-byte
  /// alignment (throws Error otherwise). Throws Error for non-positive shapes.
  static WeightMatrix view(WeightType t, const void* data, std::int64_t rows, std::int64_t cols);

  WeightType type() const { return type_; }
  bool is_view() const { return view_ != nullptr; }
  std::int64_t rows() const { return rows_; }  ///< 0 for an owned float32 matrix
  std::int64_t cols() const { return cols_; }  ///< 0 for an owned float32 matrix
  /// Number of elements (rows x cols for views, the vector length when owned).
  std::size_t size() const;
  bool empty() const { return size() == 0; }
  /// Start of the stored bytes (nullptr when empty).
  const std::uint8_t* bytes() const;
  /// Stored bytes (what the matrix occupies in memory or in the mapped file).
  std::size_t byte_size() const;

  /// float32 data (owned or an F32 view); throws Error for other types.
  const float* data() const;
  /// The owned float32 vector; throws Error for a view.
  std::vector<float>& f32();
  const std::vector<float>& f32() const;
  operator const std::vector<float>&() const { return f32(); }  // NOLINT: implicit
  operator std::vector<float>&() { return f32(); }              // NOLINT: implicit

  // Vector-like access to float32 values (owned or F32 view for reads).
  float operator[](std::size_t i) const { return data()[i]; }
  float& operator[](std::size_t i) { return f32()[i]; }
  float front() const { return data()[0]; }
  float back() const { return data()[size() - 1]; }
  std::vector<float>::iterator begin() { return f32().begin(); }
  std::vector<float>::iterator end() { return f32().end(); }
  const float* begin() const { return data(); }
  const float* end() const { return data() + size(); }
  void pop_back() { f32().pop_back(); }

 private:
  WeightType type_ = WeightType::F32;
  std::int64_t rows_ = 0, cols_ = 0;
  const std::uint8_t* view_ = nullptr;
  std::vector<float> f32_;
};

}  // namespace kvcompact
