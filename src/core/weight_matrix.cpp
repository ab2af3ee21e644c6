#include "core/weight_matrix.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

const char* weight_type_name(WeightType t) {
  switch (t) {
    case WeightType::F32: return "F32";
    case WeightType::F16: return "F16";
    case WeightType::BF16: return "BF16";
    case WeightType::Q8_0: return "Q8_0";
    case WeightType::Q4_0: return "Q4_0";
    case WeightType::Q4_1: return "Q4_1";
    case WeightType::Q5_0: return "Q5_0";
    case WeightType::Q5_1: return "Q5_1";
    case WeightType::Q8_1: return "Q8_1";
    case WeightType::Q2_K: return "Q2_K";
    case WeightType::Q3_K: return "Q3_K";
    case WeightType::Q4_K: return "Q4_K";
    case WeightType::Q5_K: return "Q5_K";
    case WeightType::Q6_K: return "Q6_K";
  }
  return "?";
}

int weight_block_elements(WeightType t) {
  switch (t) {
    case WeightType::F32:
    case WeightType::F16:
    case WeightType::BF16: return 1;
    case WeightType::Q8_0:
    case WeightType::Q4_0:
    case WeightType::Q4_1:
    case WeightType::Q5_0:
    case WeightType::Q5_1:
    case WeightType::Q8_1: return 32;
    case WeightType::Q2_K:
    case WeightType::Q3_K:
    case WeightType::Q4_K:
    case WeightType::Q5_K:
    case WeightType::Q6_K: return 256;
  }
  return 1;
}

std::size_t weight_block_bytes(WeightType t) {
  switch (t) {
    case WeightType::F32: return 4;
    case WeightType::F16:
    case WeightType::BF16: return 2;
    case WeightType::Q8_0: return 34;
    case WeightType::Q4_0: return 18;
    case WeightType::Q4_1: return 20;
    case WeightType::Q5_0: return 22;
    case WeightType::Q5_1: return 24;
    case WeightType::Q8_1: return 36;
    case WeightType::Q2_K: return 84;
    case WeightType::Q3_K: return 110;
    case WeightType::Q4_K: return 144;
    case WeightType::Q5_K: return 176;
    case WeightType::Q6_K: return 210;
  }
  return 0;
}

std::size_t weight_row_bytes(WeightType t, std::int64_t cols) {
  if (cols < 0) throw Error(fmt::format("weight matrix: negative column count {}", cols));
  const std::size_t c = static_cast<std::size_t>(cols);
  const std::size_t block = static_cast<std::size_t>(weight_block_elements(t));
  if (c % block != 0)
    throw Error(fmt::format("weight matrix: {} rows need a multiple of {} columns, got {}",
                            weight_type_name(t), block, cols));
  return c / block * weight_block_bytes(t);
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
