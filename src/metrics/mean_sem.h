// Mean, standard deviation and standard error of the mean over documents (or draws): the one
// place every study computes them.
#pragma once

#include <span>

namespace kvcompact {

/// Summary of n values.
struct MeanSem {
  double mean = 0;  ///< sum / n (0 for no values)
  double std = 0;   ///< sample standard deviation, sqrt(sum (x - mean)^2 / (n - 1)); 0 for n < 2
  double sem = 0;   ///< std / sqrt(n); 0 for n < 2
  int n = 0;
};

/// Mean, sample std and SEM of `xs` (summed in order, so results are reproducible to the bit).
MeanSem mean_sem(std::span<const double> xs);

}  // namespace kvcompact
