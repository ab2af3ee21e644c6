// kept_entries: how many KV entries a keep ratio leaves (see head_compaction.h).
#include "compaction/head_compaction.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

// t = max(1, floor(r*T + 1e-9)) for r > 0, capped at T; r == 0 -> 0. The 1e-9 guard makes
// ratios such as 0.3 * 10 (= 2.9999999999999996 in binary) give the intended 3 entries.
// With T == 0 nothing can be kept, so the result is 0 for every valid ratio.
int kept_entries(double ratio, int T) {
  if (std::isnan(ratio) || ratio < 0.0 || ratio > 1.0)
    throw Error(fmt::format("keep ratio {} is outside [0, 1]", ratio));
  if (T < 0) throw Error(fmt::format("kept_entries: context length {} is negative", T));
  if (ratio == 0.0 || T == 0) return 0;
  const double t = std::floor(ratio * static_cast<double>(T) + 1e-9);
  return std::min(T, std::max(1, static_cast<int>(t)));
}

}  // namespace kvcompact
