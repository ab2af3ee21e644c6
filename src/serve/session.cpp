#include "serve/session.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace kvcompact::serve {

std::size_t allocated_bytes(const KVCache& cache) {
  std::size_t b = 0;
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      const HeadCache& h = cache.head(l, g);
      b += (h.keys.capacity() + h.values.capacity() + h.beta.capacity()) * sizeof(float) +
           h.positions.capacity() * sizeof(int32_t);
    }
  return b;
}

void shrink_to_fit(KVCache& cache) {
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      HeadCache& h = cache.head(l, g);
      h.keys.shrink_to_fit();
      h.values.shrink_to_fit();
      h.beta.shrink_to_fit();
      h.positions.shrink_to_fit();
    }
}

namespace {

/// The first position of the verbatim tail of head h: entries at the end with consecutive
/// positions ending at next - 1 and beta 0.
int verbatim_tail_start(const HeadCache& h, int next) {
  int p = next;
  for (std::size_t i = h.length(); i-- > 0;) {
    if (h.positions[i] != p - 1 || h.beta[i] != 0.0f) break;
    --p;
  }
  return p;
}

}  // namespace

int earliest_rollback(const KVCache& cache, int compacted_until) {
  const int next = cache.next_position;
  int p = std::max(0, compacted_until);
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      const HeadCache& h = cache.head(l, g);
      int start = verbatim_tail_start(h, next);
      // A sliding layer that dropped its oldest entries (trim_sliding_layers) must still hold the
      // window before the rollback point.
      if (cache.sliding(l)) {
        const int first = h.length() > 0 ? h.positions.front() : next;
        // Rolling back to q needs the entries at positions > q - window - ... all of
        // (q - window, q) held: first <= q - window + 1, i.e. q >= first + window - 1.
        if (first > 0) start = std::max(start, first + cache.layer_window(l) - 1);
      }
      p = std::max(p, start);
    }
  return std::min(p, next);
}

void rollback_to(KVCache& cache, int p, int compacted_until) {
  if (p > cache.next_position)
    throw Error(fmt::format("session rollback: position {} is past the cache's {} tokens", p, cache.next_position));
  const int earliest = earliest_rollback(cache, compacted_until);
  if (p < earliest)
    throw Error(fmt::format("session rollback: position {} lies in the compacted part (verbatim from {})", p, earliest));
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      HeadCache& h = cache.head(l, g);
      std::size_t n = h.length();
      while (n > 0 && h.positions[n - 1] >= p) --n;
      h.truncate(n);
    }
  cache.next_position = p;
}

std::size_t trim_sliding_layers(KVCache& cache, int slack) {
  std::size_t dropped = 0;
  for (int l = 0; l < cache.n_layers(); ++l) {
    if (!cache.sliding(l)) continue;
    const int keep_after = cache.next_position - cache.layer_window(l) - std::max(0, slack);
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      HeadCache& h = cache.head(l, g);
      std::size_t n = 0;
      while (n < h.length() && h.positions[n] <= keep_after) ++n;
      if (n == 0) continue;
      const std::size_t d = static_cast<std::size_t>(cache.head_dim());
      h.keys.erase(h.keys.begin(), h.keys.begin() + static_cast<std::ptrdiff_t>(n * d));
      h.values.erase(h.values.begin(), h.values.begin() + static_cast<std::ptrdiff_t>(n * d));
      h.beta.erase(h.beta.begin(), h.beta.begin() + static_cast<std::ptrdiff_t>(n));
      h.positions.erase(h.positions.begin(), h.positions.begin() + static_cast<std::ptrdiff_t>(n));
      dropped += n;
    }
  }
  return dropped;
}

std::size_t common_prefix(std::span<const int> a, std::span<const int> b) {
  const std::size_t n = std::min(a.size(), b.size());
  std::size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

}  // namespace kvcompact::serve
