// Row decoding of typed weight matrices (F32, F16, BF16 and ggml Q8_0 / Q4_0 blocks) to float32,
// the building block of the typed matmul and of the embedding lookup.
#pragma once

#include <cstdint>

#include "core/weight_matrix.h"

namespace kvcompact {

/// Decodes one stored row of `cols` elements of type `t` (weight_row_bytes(t, cols) bytes at
/// `row`, any alignment) into out[cols]. Block formats: see WeightType. Reference twin:
/// weight_element_ref.
void dequantize_row(WeightType t, const std::uint8_t* row, float* out, std::int64_t cols);

/// Row `r` of W as float32: out[cols]. W is a view (its own cols) or an owned float32 matrix with
/// `cols` columns. Throws Error when r is outside the matrix.
void weight_row_f32(const WeightMatrix& W, std::int64_t r, std::int64_t cols, float* out);

/// Plain reference: element (r, c) of W (cols columns), decoded on its own from the ggml/IEEE
/// definitions (no shared code with dequantize_row).
float weight_element_ref(const WeightMatrix& W, std::int64_t r, std::int64_t c, std::int64_t cols);

}  // namespace kvcompact
