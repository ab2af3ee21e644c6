// A weight matrix W[rows, cols] (row-major, y = W x) in one of the storage types of model files:
// float32, IEEE float16, bfloat16, or a ggml block quantisation (Q4_0 ... Q8_1, K-quants Q2_K ...
// Q6_K). Either owns its float32 values (llama2.c and f32 GGUF loaders, random test models) or
// views bytes owned elsewhere (a memory-mapped checkpoint kept alive by Model::storage).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace kvcompact {

/// Storage type of a weight matrix. Block layouts are ggml's (ggml-common.h), little-endian, no
/// padding; "f16" is an IEEE binary16 scale; values are computed in float32 as ggml's
/// dequantize_row_* does. Every row is a whole number of blocks.
/// Blocks of 32 elements (element j of the block; nibble(j) = qs[j] & 15 for j < 16, qs[j-16] >> 4
/// for j >= 16; hbit(j) = bit j of the little-endian u32 qh):
///   Q8_0: f16 d, int8 qs[32]; value = qs[j] * d (34 bytes).
///   Q4_0: f16 d, qs[16]; value = (nibble(j) - 8) * d (18 bytes).
///   Q4_1: f16 d, f16 m, qs[16]; value = nibble(j) * d + m (20 bytes).
///   Q5_0: f16 d, qh[4], qs[16]; value = ((nibble(j) | hbit(j) << 4) - 16) * d (22 bytes).
///   Q5_1: f16 d, f16 m, qh[4], qs[16]; value = (nibble(j) | hbit(j) << 4) * d + m (24 bytes).
///   Q8_1: f16 d, f16 s (= d * sum qs, unused), int8 qs[32]; value = qs[j] * d (36 bytes).
/// K-quants: super-blocks of 256 elements (element e; sub-block of 16 is = e / 16, of 32 is = e / 32):
///   Q2_K: u8 scales[16], qs[64], f16 d, f16 dmin (84 bytes); 2-bit q = (qs[32 (e / 128) + e % 32]
///     >> 2 ((e % 128) / 32)) & 3; value = d * (scales[e/16] & 15) * q - dmin * (scales[e/16] >> 4).
///   Q3_K: hmask[32], qs[64], scales[12] (16 packed 6-bit scales), f16 d (110 bytes); q = 2 low bits as
///     in Q2_K minus 4 unless bit (4 (e / 128) + (e % 128) / 32) of hmask[e % 32] is set; value =
///     d * (scale(e / 16) - 32) * q.
///   Q4_K: f16 d, f16 dmin, scales[12] (8 packed 6-bit scale/min pairs, ggml get_scale_min_k4),
///     qs[128] (144 bytes); q = 4 bits of qs[32 (e / 64) + e % 32] (low nibble when e % 64 < 32);
///     value = d * sc(e / 32) * q - dmin * min(e / 32).
///   Q5_K: f16 d, f16 dmin, scales[12], qh[32], qs[128] (176 bytes); as Q4_K plus 16 * bit (e / 32)
///     of qh[e % 32].
///   Q6_K: ql[128], qh[64], int8 scales[16], f16 d (210 bytes); q = 4 low bits from ql and 2 high
///     bits from qh (ggml dequantize_row_q6_K) minus 32; value = d * scales[e / 16] * q.
/// The enumerators' values are not ggml's type ids (see GgmlType in io/gguf.h).
enum class WeightType : std::uint8_t {
  F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q8_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K,
};

/// "F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1", ..., "Q6_K" (ggml's names).
const char* weight_type_name(WeightType t);

/// Elements per block: 1 (F32, F16, BF16), 32 (Q4_0 ... Q8_1) or 256 (K-quants).
int weight_block_elements(WeightType t);

/// Bytes per block (4 for F32, 2 for F16/BF16, 34 for Q8_0, ..., 210 for Q6_K).
std::size_t weight_block_bytes(WeightType t);

/// Bytes of one row of `cols` elements. Throws Error when a quantised type's cols is not a
/// multiple of its block (32 or 256 elements).
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
