// Baseline per-head compactions (see baselines.h).
#include "compaction/baselines.h"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "compaction/head_attention.h"
#include "core/error.h"

namespace kvcompact {
namespace {

void check_t(const HeadCompactionInput& in, int t, const char* where) {
  validate_head_input(in, where);
  if (t < 0 || t > in.T)
    throw Error(fmt::format("{}: cannot keep {} of {} entries", where, t, in.T));
}

// Uniform integer in [0, bound) by rejection (exact, independent of the standard library).
std::uint64_t bounded(std::mt19937_64& rng, std::uint64_t bound) {
  const std::uint64_t limit = std::numeric_limits<std::uint64_t>::max() -
                              std::numeric_limits<std::uint64_t>::max() % bound;
  std::uint64_t x;
  do x = rng();
  while (x >= limit);
  return x % bound;
}

}  // namespace

CompactedHead head_from_selection(const HeadCompactionInput& in, const std::vector<int>& selected) {
  const std::size_t D = static_cast<std::size_t>(std::max(in.head_dim, 0)), t = selected.size();
  CompactedHead head;
  head.selected = selected;
  head.keys.resize(t * D);
  head.values.resize(t * D);
  head.beta.assign(t, 0.0f);
  for (std::size_t j = 0; j < t; ++j) {
    const int idx = selected[j];
    if (idx < 0 || idx >= in.T || (j > 0 && idx <= selected[j - 1]))
      throw Error(fmt::format("compacted head: selected index {} is out of [0, {}) or not in "
                              "increasing order",
                              idx, in.T));
    const std::size_t src = static_cast<std::size_t>(idx) * D;
    std::copy(in.keys + src, in.keys + src + D, head.keys.begin() + static_cast<std::ptrdiff_t>(j * D));
    std::copy(in.values + src, in.values + src + D,
              head.values.begin() + static_cast<std::ptrdiff_t>(j * D));
  }
  return head;
}

std::vector<int> random_indices(int T, int t, std::uint64_t seed) {
  if (T < 0 || t < 0 || t > T)
    throw Error(fmt::format("random selection: cannot draw {} of {} entries", t, T));
  std::vector<int> pool(static_cast<std::size_t>(T));
  std::iota(pool.begin(), pool.end(), 0);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < t; ++i) {
    const int j = i + static_cast<int>(bounded(rng, static_cast<std::uint64_t>(T - i)));
    std::swap(pool[static_cast<std::size_t>(i)], pool[static_cast<std::size_t>(j)]);
  }
  pool.resize(static_cast<std::size_t>(t));
  std::sort(pool.begin(), pool.end());
  return pool;
}

CompactedHead compact_random(const HeadCompactionInput& in, int t, std::uint64_t seed) {
  check_t(in, t, "random compaction");
  return head_from_selection(in, random_indices(in.T, t, seed));
}

CompactedHead compact_recent(const HeadCompactionInput& in, int t) {
  check_t(in, t, "recent compaction");
  std::vector<int> sel(static_cast<std::size_t>(t));
  std::iota(sel.begin(), sel.end(), in.T - t);
  return head_from_selection(in, sel);
}

}  // namespace kvcompact
