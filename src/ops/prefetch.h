// Software prefetch for the weight stream of the decode kernels (ops/typed_dot.cpp,
// ops/quant_dot.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KVC_HAVE_PREFETCH 1
#endif

namespace kvcompact {

/// How far ahead of the bytes being read the decode kernels prefetch (bytes). Measured on a
/// 2-core Sapphire Rapids VM (bench/dequant_bench BM_MatmulTypedStream, Qwen3-0.6B's 151,936 x
/// 1,024 lm_head, one core): Q4_0 5.6 G weights/s without prefetch, 8.9 at 512 bytes ahead,
/// 12.8 at 2,048, 12.7 at 3,072, 13.5 at 4,096; Q4_K best at 2,048-3,072.
inline constexpr std::size_t kPrefetchAhead = 3072;

/// Prefetches into L1 the cache lines that lie kPrefetchAhead bytes past [p, p + bytes). A kernel
/// calls it once per unit it reads (a block or a pair of blocks); the rows a thread reads are
/// contiguous, so the prefetch runs on into its next rows. Prefetching past the end of a mapping
/// is harmless (prefetches never fault). Without it a core read quantised rows at about a third
/// of its stream bandwidth: the hardware prefetcher does not run far enough ahead of a kernel
/// that spends many cycles per cache line.
inline void prefetch_stream(const std::uint8_t* p, std::size_t bytes) {
#if defined(KVC_HAVE_PREFETCH)
  // The address is formed as an integer: it may lie past the end of the weights, where pointer
  // arithmetic would be undefined (a prefetch of any address is harmless).
  const std::uintptr_t at = reinterpret_cast<std::uintptr_t>(p) + kPrefetchAhead;
  for (std::size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(at + o), _MM_HINT_T0);
#else
  (void)p, (void)bytes;
#endif
}

}  // namespace kvcompact
