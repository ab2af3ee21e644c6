// Dense linear least squares, min-norm for rank-deficient / under-determined systems (LAPACK dgelsd).
#pragma once

#include <vector>

namespace kvcompact {

/// Solves min_X ||A X - B||_F in double precision with LAPACK dgelsd (SVD-based; among all
/// minimisers it returns the one of minimum Frobenius norm, so under-determined and rank-deficient
/// systems are handled). Singular values below rcond * sigma_max count as zero (rcond < 0: machine
/// precision, as in LAPACK).
///   A: [m, n] row-major, B: [m, k] row-major  ->  X: [n, k] row-major.
/// m == 0 or n == 0 gives X = 0. Throws Error on negative sizes, non-finite input or when the SVD
/// does not converge. Memory: one column-major copy of A and of B (dgelsd overwrites them).
std::vector<double> solve_least_squares(const double* A, int m, int n, const double* B, int k,
                                        double rcond = 1e-12, int* rank = nullptr);

}  // namespace kvcompact
