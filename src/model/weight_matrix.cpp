#include "model/weight_matrix.h"

#include <fmt/format.h>

#include "io/error.h"

namespace kvcompact {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::F16: return "F16";
    case WeightType::BF16: return "BF16";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::Q4_0: return "Q4_0";
  }
  return "?";
}

std::size_t weight_row_bytes(WeightType t, std::int64_t cols) {
  if (cols < 0) throw Error(fmt::format("weight matrix: negative column count {}", cols));
  const std::size_t c = static_cast<std::size_t>(cols);
  switch (t) {
    case WeightType::F32: return 4 * c;
    case WeightType::F16:
    case WeightType::BF16: return 2 * c;
    case WeightType::Q8_0:
    case WeightType::Q4_0:
      if (c % 32 != 0)
        throw Error(fmt::format("weight matrix: {} rows need a multiple of 32 columns, got {}",
                                weight_type_name(t), cols));
      return c / 32 * (t == WeightType::Q8_0 ? 34 : 18);
  }
  return 0;
}

WeightMatrix WeightMatrix::view(WeightType t, const void* data, std::int64_t rows,
                                std::int64_t cols) {
  if (rows <= 0 || cols <= 0 || data == nullptr)
    throw Error(fmt::format("weight matrix: bad {} view of {} x {} elements", weight_type_name(t),
                            rows, cols));
  if (t == WeightType::F32 && reinterpret_cast<std::uintptr_t>(data) % alignof(float) != 0)
    throw Error("weight matrix: F32 view is not 4-byte aligned");
  weight_row_bytes(t, cols);  // validates the block multiple
  WeightMatrix m;
  m.type_ = t;
  m.rows_ = rows;
  m.cols_ = cols;
  m.view_ = static_cast<const std::uint8_t*>(data);
  return m;
}

std::size_t WeightMatrix::size() const {
  return view_ ? static_cast<std::size_t>(rows_) * static_cast<std::size_t>(cols_) : f32_.size();
}

const std::uint8_t* WeightMatrix::bytes() const {
  if (view_) return view_;
  return f32_.empty() ? nullptr : reinterpret_cast<const std::uint8_t*>(f32_.data());
}

std::size_t WeightMatrix::byte_size() const {
  if (!view_) return f32_.size() * sizeof(float);
  return static_cast<std::size_t>(rows_) * weight_row_bytes(type_, cols_);
}

const float* WeightMatrix::data() const {
  if (!view_) return f32_.data();
  if (type_ != WeightType::F32)
    throw Error(fmt::format("weight matrix: float32 access to a {} matrix", weight_type_name(type_)));
  return reinterpret_cast<const float*>(view_);
}

std::vector<float>& WeightMatrix::f32() {
  if (view_)
    throw Error(fmt::format("weight matrix: a {} view has no owned float32 vector",
                            weight_type_name(type_)));
  return f32_;
}

const std::vector<float>& WeightMatrix::f32() const {
  if (view_)
    throw Error(fmt::format("weight matrix: a {} view has no owned float32 vector",
                            weight_type_name(type_)));
  return f32_;
}

}  // namespace kvcompact
