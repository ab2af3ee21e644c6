#include "ops/bf16_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/dequant.h"
#include "core/error.h"
#include "ops/isa.h"

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(__AVX512BF16__) && defined(__AVX512F__) && defined(__linux__)
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define KVC_BF16_GEMM 1
// GCC 12 reports its own _mm512_undefined_* placeholders (self-initialised) as maybe-uninitialised.
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#endif

namespace kvcompact {

#if defined(KVC_BF16_GEMM)
namespace {

// AMX tiles (Intel AMX, tdpbf16ps): C[16 x 16] float32 += A[16 x 32] bf16 . B[16 x (16 pairs)].
// A = 16 weight rows x 32 columns of k (row-major bf16), B = 16 pairs of k x 16 tokens (pair kp of
// token t at row kp, column t), so C[o][t] = sum_k W[o][k] X[t][k]. One block is 32 weight rows x
// 32 tokens: 2 A tiles, 2 B tiles, 4 C tiles.
constexpr int kTokens = 32;  // tokens per block
constexpr int kRows = 32;    // weight rows per block
constexpr int kChunk = 128;  // weight rows a thread decodes at once (4 blocks)
constexpr int kK = 32;       // k values per tile step

int round_up(int x, int m) { return (x + m - 1) / m * m; }

/// 32 floats -> 16 bf16 pairs (element 2j in the low half of lane j), round to nearest even.
inline __m512i to_pairs(const float* x) {
  return reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(x + 16), _mm512_loadu_ps(x)));
}

/// Activations as bf16 pairs, token-minor: Xt[tile][kp][32] (uint32 = pair kp of one token),
/// kp < kp_pad (in / 2 rounded up to 16), zero past in and past n.
void pack_activations(const float* X, int n, int in, int kp_pad, std::vector<std::uint32_t>& Xt) {
  const int tiles = (n + kTokens - 1) / kTokens;
  Xt.assign(static_cast<std::size_t>(tiles) * kp_pad * kTokens, 0u);
#pragma omp parallel
  {
    std::vector<float> x(static_cast<std::size_t>(kp_pad) * 2, 0.0f);
    std::vector<std::uint32_t> row(static_cast<std::size_t>(kp_pad));
#pragma omp for schedule(static)
    for (int t = 0; t < n; ++t) {
      std::copy(X + static_cast<std::size_t>(t) * in, X + static_cast<std::size_t>(t + 1) * in, x.begin());
      for (int k = 0; k < 2 * kp_pad; k += 32) _mm512_storeu_si512(row.data() + k / 2, to_pairs(x.data() + k));
      std::uint32_t* dst = Xt.data() + static_cast<std::size_t>(t / kTokens) * kp_pad * kTokens + t % kTokens;
      for (int kp = 0; kp < kp_pad; ++kp) dst[static_cast<std::size_t>(kp) * kTokens] = row[static_cast<std::size_t>(kp)];
    }
  }
}

/// Weight rows [r0, r0 + m) decoded and rounded to bf16, row-major with k_pad columns
/// (Wb[r][k], zero past in); rows m .. rows_pad - 1 zero.
void pack_weights(const WeightMatrix& W, int r0, int m, int rows_pad, int in, int k_pad, std::vector<float>& f,
                  std::uint16_t* Wb) {
  const std::size_t rb = weight_row_bytes(W.type(), in);
  f.assign(static_cast<std::size_t>(k_pad), 0.0f);
  for (int r = 0; r < rows_pad; ++r) {
    std::uint16_t* dst = Wb + static_cast<std::size_t>(r) * k_pad;
    if (r >= m) {
      std::fill(dst, dst + k_pad, std::uint16_t{0});
      continue;
    }
    dequantize_row(W.type(), W.bytes() + static_cast<std::size_t>(r0 + r) * rb, f.data(), in);
    for (int k = 0; k < k_pad; k += 32) _mm512_storeu_si512(dst + k, to_pairs(f.data() + k));
  }
}

struct alignas(64) TileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};

/// Tiles 0-3: C (16 rows x 64 bytes); 4-5: A (16 x 64); 6-7: B (16 x 64).
void configure_tiles() {
  TileConfig c;
  for (int t = 0; t < 8; ++t) c.colsb[t] = 64, c.rows[t] = 16;
  _tile_loadconfig(&c);
}

/// Asks Linux for the AMX tile state (once per process); false when refused.
bool request_amx() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

bool cpu_has_amx_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  __asm__ __volatile__("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
  return (d >> 22 & 1u) && (d >> 24 & 1u);  // AMX-BF16, AMX-TILE
}

}  // namespace
#endif

bool bf16_matmul_available() {
#if defined(KVC_BF16_GEMM)
  static const bool ok = cpu_has_amx_bf16() && __builtin_cpu_supports("avx512bf16") && request_amx();
  return ok && kernel_isa() == Isa::Avx512;
#else
  return false;
#endif
}

void bf16_matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) {
  if (!bf16_matmul_available())
    throw Error("bf16 matmul: this build or CPU has no AMX-BF16 (or KVC_ISA lowered the kernels)");
  if (in % 2 != 0) throw Error(fmt::format("bf16 matmul: {} input columns, an even number is needed", in));
  if (n <= 0 || out <= 0) return;
#if defined(KVC_BF16_GEMM)
  const int k_pad = round_up(in, kK), kp_pad = k_pad / 2;
  thread_local std::vector<std::uint32_t> Xt;
  pack_activations(X, n, in, kp_pad, Xt);
  const std::uint32_t* xt_all = Xt.data();
  const int tiles = (n + kTokens - 1) / kTokens, chunks = (out + kChunk - 1) / kChunk;
#pragma omp parallel
  {
    configure_tiles();
    std::vector<float> f;
    std::vector<std::uint16_t> wb(static_cast<std::size_t>(kChunk) * k_pad);
    alignas(64) float c[kRows][kTokens];
#pragma omp for schedule(dynamic, 1)
    for (int ci = 0; ci < chunks; ++ci) {
      const int r0 = ci * kChunk, m = std::min(kChunk, out - r0), m_pad = round_up(m, kRows);
      pack_weights(W, r0, m, m_pad, in, k_pad, f, wb.data());
      for (int ti = 0; ti < tiles; ++ti) {
        const int t0 = ti * kTokens, nt = std::min(kTokens, n - t0);
        const std::uint32_t* xt = xt_all + static_cast<std::size_t>(ti) * kp_pad * kTokens;
        for (int b = 0; b < m_pad; b += kRows) {
          const std::uint16_t* a = wb.data() + static_cast<std::size_t>(b) * k_pad;
          _tile_zero(0);
          _tile_zero(1);
          _tile_zero(2);
          _tile_zero(3);
          for (int k = 0; k < k_pad; k += kK) {
            _tile_loadd(4, a + k, k_pad * 2);                                 // rows b .. b + 15
            _tile_loadd(5, a + static_cast<std::size_t>(16) * k_pad + k, k_pad * 2);  // rows b + 16 ..
            _tile_loadd(6, xt + static_cast<std::size_t>(k / 2) * kTokens, kTokens * 4);       // tokens 0-15
            _tile_loadd(7, xt + static_cast<std::size_t>(k / 2) * kTokens + 16, kTokens * 4);  // tokens 16-31
            _tile_dpbf16ps(0, 4, 6);
            _tile_dpbf16ps(1, 4, 7);
            _tile_dpbf16ps(2, 5, 6);
            _tile_dpbf16ps(3, 5, 7);
          }
          _tile_stored(0, &c[0][0], kTokens * 4);
          _tile_stored(1, &c[0][16], kTokens * 4);
          _tile_stored(2, &c[16][0], kTokens * 4);
          _tile_stored(3, &c[16][16], kTokens * 4);
          const int rows = std::min(kRows, m - b);
          for (int t = 0; t < nt; ++t) {
            float* y = Y + static_cast<std::size_t>(t0 + t) * out + r0 + b;
            for (int r = 0; r < rows; ++r) y[r] = c[r][t];
          }
        }
      }
    }
    _tile_release();
  }
#else
  (void)X, (void)W, (void)Y;
#endif
}

}  // namespace kvcompact
