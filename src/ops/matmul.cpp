#include "ops/matmul.h"

#include <cblas.h>
#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstddef>
#include <vector>

#include "core/error.h"
#include "core/dequant.h"
#include "ops/bf16_gemm.h"
#include "ops/isa.h"
#include "ops/quant_dot.h"
#include "ops/typed_dot.h"

namespace kvcompact {

void matmul_wt(const float* X, const float* W, float* Y, int n, int in, int out) {
  if (n <= 0 || out <= 0) return;
  // Row-major: Y[n, out] = X[n, in] * W[out, in]^T.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, out, in, 1.0f, X, in, W, in, 0.0f, Y,
              out);
}

namespace {
std::atomic<int>& mode_flag() {
  static std::atomic<int> flag{[] {
    const char* e = std::getenv("KVC_FAST_QUANT");
    return (e != nullptr && e[0] == '1') ? static_cast<int>(MatmulMode::FastQuant) : static_cast<int>(MatmulMode::Exact);
  }()};
  return flag;
}
}  // namespace

MatmulMode matmul_mode() { return static_cast<MatmulMode>(mode_flag().load(std::memory_order_relaxed)); }
void set_matmul_mode(MatmulMode mode) { mode_flag().store(static_cast<int>(mode), std::memory_order_relaxed); }

namespace {
/// Up to this many rows of X, the typed matmul decodes and dots row by row instead of sgemm.
constexpr int kFusedMaxTokens = kTypedDotMaxRows;

void check_shape(const WeightMatrix& W, int in, int out) {
  const bool ok = W.is_view() ? (W.rows() == out && W.cols() == in)
                              : W.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in);
  if (!ok)
    throw Error(fmt::format("matmul: weight matrix is {} ({} x {}, {} values), expected {} x {}",
                            weight_type_name(W.type()), W.rows(), W.cols(), W.size(), out, in));
}
}  // namespace

void matmul_wt(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) {
  check_shape(W, in, out);
  if (n <= 0 || out <= 0) return;
  if (W.type() == WeightType::F32 && n > kFusedMaxTokens) return matmul_wt(X, W.data(), Y, n, in, out);
  if (n > kFusedMaxTokens && matmul_mode() == MatmulMode::FastQuant && in % 2 == 0 && bf16_matmul_available())
    return bf16_matmul_wt(X, W, Y, n, in, out);
  const std::size_t row_bytes = weight_row_bytes(W.type(), in);
  const std::uint8_t* base = W.bytes();
  if (n <= kFusedMaxTokens) {
    // Few rows of X (token-by-token decoding): W is streamed once, split over the threads in
    // contiguous chunks of rows; each chunk goes through a fused decode-and-dot kernel.
    const Isa isa = kernel_isa();
    const bool quant = matmul_mode() == MatmulMode::FastQuant && quant_dot_supported(W.type());
    thread_local QuantizedRows xq;
    if (quant) quantize_rows(W.type(), X, n, in, xq);
    const QuantizedRows& xs = xq;  // bound here: inside the region xq would name each thread's own
    const bool parallel = static_cast<long>(out) * in >= (1L << 15);
#pragma omp parallel if (parallel)
    {
      const int nt = omp_get_num_threads();
      // A few chunks per thread, so that a thread slowed by other load does not hold the rest up.
      const int chunk = std::max(16, (out + 4 * nt - 1) / (4 * nt));
#pragma omp for schedule(dynamic, 1)
      for (int c = 0; c < (out + chunk - 1) / chunk; ++c) {
        const int r0 = c * chunk, r1 = std::min(out, r0 + chunk);
        if (quant)
          quant_rows_dot(W.type(), base, row_bytes, r0, r1, xs, Y, out, isa);
        else
          typed_rows_dot(W.type(), base, row_bytes, r0, r1, X, n, in, Y, out, isa);
      }
    }
    return;
  }
  if (matmul_mode() == MatmulMode::FastQuant && quant_dot_supported(W.type()) && int8_prefill_preferred())
    return matmul_wt_int8(X, W, Y, n, in, out);
  // Rows per block: about 16 MiB of float32 scratch, at least 16 rows. Fewer, larger sgemm calls
  // are faster (pp512, 2 threads, Llama-3.2-1B shape, Q4_K: 109-112 tokens/s with 4 MiB blocks,
  // 116-118 with 16 MiB; 83 with 1 MiB); splitting the rows over threads, each with its own
  // scratch and a one-thread sgemm, reached 114.
  const int block = std::max(16, std::min(out, static_cast<int>((std::size_t{1} << 22) / std::max(in, 1))));
  thread_local std::vector<float> scratch;
  if (scratch.size() < static_cast<std::size_t>(block) * in) scratch.resize(static_cast<std::size_t>(block) * in);
  float* S = scratch.data();
  for (int r0 = 0; r0 < out; r0 += block) {
    const int m = std::min(block, out - r0);
#pragma omp parallel for schedule(static) if (static_cast<long>(m) * in >= (1L << 15))
    for (int r = 0; r < m; ++r)
      dequantize_row(W.type(), base + static_cast<std::size_t>(r0 + r) * row_bytes,
                     S + static_cast<std::size_t>(r) * in, in);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, m, in, 1.0f, X, in, S, in, 0.0f, Y + r0,
                out);
  }
}

bool int8_prefill_preferred() { return kernel_isa() >= Isa::Avx512; }

void matmul_wt_int8(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) {
  check_shape(W, in, out);
  if (!quant_dot_supported(W.type()))
    throw Error(fmt::format("matmul_wt_int8: {} weights have no int8 dot kernel", weight_type_name(W.type())));
  if (n <= 0 || out <= 0) return;
  const std::size_t row_bytes = weight_row_bytes(W.type(), in);
  const std::uint8_t* base = W.bytes();
  // X quantised once (as ggml's Q8_K / Q8_0), then tiles of W rows (about 32 KiB, so a tile stays
  // in L1/L2) times groups of 4 activation rows through the integer dot kernels; each tile's
  // weights are decoded once per 4 rows.
  const Isa isa = kernel_isa();
  thread_local QuantizedRows xq;
  quantize_rows(W.type(), X, n, in, xq);
  const QuantizedRows& xs = xq;
  const int tile = std::clamp(static_cast<int>((std::size_t{32} << 10) / std::max<std::size_t>(row_bytes, 1)), 8, 256);
#pragma omp parallel for schedule(dynamic, 1)
  for (int c = 0; c < (out + tile - 1) / tile; ++c) {
    const int r0 = c * tile, r1 = std::min(out, r0 + tile);
    for (int i0 = 0; i0 < n; i0 += kTypedDotMaxRows)
      quant_rows_dot(W.type(), base, row_bytes, r0, r1, xs.view(i0, std::min(kTypedDotMaxRows, n - i0)),
                     Y + static_cast<std::size_t>(i0) * out, out, isa);
  }
}

void matmul_wt_typed_ref(const float* X, const WeightMatrix& W, float* Y, int n, int in, int out) {
  check_shape(W, in, out);
  for (int i = 0; i < n; ++i)
    for (int o = 0; o < out; ++o) {
      double acc = 0.0;
      for (int k = 0; k < in; ++k)
        acc += static_cast<double>(X[static_cast<std::size_t>(i) * in + k]) * weight_element_ref(W, o, k, in);
      Y[static_cast<std::size_t>(i) * out + o] = static_cast<float>(acc);
    }
}

}  // namespace kvcompact
