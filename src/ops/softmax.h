// Numerically stable softmax (max-subtracted), as llama2.c run.c `softmax`.
#pragma once

namespace kvcompact {

/// In-place softmax of x: [n]: x_i <- exp(x_i - max) / sum_j exp(x_j - max). n >= 1.
/// Reference twin: softmax_ref (double accumulation).
void softmax(float* x, int n);

}  // namespace kvcompact
