// Vectorised float32 exponential for the softmax-heavy loops of compaction (Attention Matching's
// attention statistics and its beta / C2 fits), where std::exp on doubles cost a quarter of the time.
#pragma once

#include <cstddef>

namespace kvcompact {

/// In place: x_i <- exp(x_i) for x: [n], float32. Cephes expf (range reduction
/// x = k ln2 + r with ln2 split in two, degree-6 polynomial in r, 2^k from the exponent bits),
/// written as a plain loop that the compiler vectorises (-O3 -march=native: 16 lanes on
/// AVX-512). Maximum relative error 8.3e-8 (1.4 ulp) on [-87.3, 88.3] against double std::exp
/// (tests/ops_test.cpp). Below -87.34 the result is 0 (no denormals), above 88.38 +inf, NaN stays NaN.
/// Needs IEEE round-to-nearest and no -ffast-math (the rounding step adds and subtracts 1.5 * 2^23).
void exp_inplace(float* x, std::size_t n);

/// In place: x_i <- exp(x_i - shift) for x: [n]; returns sum_i exp(x_i - shift) accumulated in
/// float32 (one row of a max-subtracted softmax: shift = max_i x_i gives every term in (0, 1]).
float exp_shifted_sum(float* x, std::size_t n, float shift);

/// max_i x_i for x: [n], n >= 1, vectorised (an OpenMP simd max reduction; a plain loop is one
/// serial chain of compares). For finite inputs; with a NaN the result is unspecified.
float max_value(const float* x, std::size_t n);

}  // namespace kvcompact
