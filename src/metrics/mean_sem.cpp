#include "metrics/mean_sem.h"

#include <cmath>

namespace kvcompact {

MeanSem mean_sem(std::span<const double> xs) {
  MeanSem r;
  r.n = static_cast<int>(xs.size());
  if (xs.empty()) return r;
  const double n = static_cast<double>(xs.size());
  double sum = 0;
  for (double x : xs) sum += x;
  r.mean = sum / n;
  if (xs.size() < 2) return r;
  double ss = 0;
  for (double x : xs) ss += (x - r.mean) * (x - r.mean);
  r.std = std::sqrt(ss / (n - 1));
  r.sem = r.std / std::sqrt(n);
  return r;
}

}  // namespace kvcompact
