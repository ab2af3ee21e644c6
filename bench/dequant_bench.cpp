// Decoding speed of the typed weight rows (dequantize_row: Melem/s per type) and the typed matmul
// at a Gemma-3-270M-shaped projection (ffn_down: in 2048, out 640) for one token (decode) and 64
// tokens (prefill chunk). Random blocks with finite scales. Prints figures; no pass/fail.
// Run: ./build/dequant_bench [--benchmark_filter=Q4_K]
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/weight_matrix.h"
#include "core/dequant.h"
#include "core/half.h"
#include "ops/matmul.h"

namespace kvcompact {
namespace {

constexpr int kIn = 2048, kOut = 640;

/// rows x cols elements of type t: random bytes, each 16-bit field that can hold a scale set to a
/// small finite f16 (every even offset of a block would be too many; ggml's scale offsets).
std::vector<std::uint8_t> random_matrix(WeightType t, int rows, int cols) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> byte(0, 255);
  std::vector<std::uint8_t> b(weight_row_bytes(t, cols) * static_cast<std::size_t>(rows));
  for (auto& x : b) x = static_cast<std::uint8_t>(byte(rng));
  std::vector<std::size_t> at;
  switch (t) {
    case WeightType::F16: case WeightType::BF16: {
      std::normal_distribution<float> g(0, 0.05f);
      for (std::size_t i = 0; i + 1 < b.size(); i += 2) {
        const std::uint16_t h = t == WeightType::F16 ? f32_to_f16(g(rng)) : f32_to_bf16(g(rng));
        std::memcpy(&b[i], &h, 2);
      }
      return b;
    }
    case WeightType::Q2_K: at = {80, 82}; break;
    case WeightType::Q3_K: at = {108}; break;
    case WeightType::Q6_K: at = {208}; break;
    case WeightType::Q8_0: case WeightType::Q4_0: case WeightType::Q5_0: at = {0}; break;
    default: at = {0, 2}; break;
  }
  const std::size_t bb = weight_block_bytes(t);
  const std::uint16_t h = f32_to_f16(0.01f);
  for (std::size_t k = 0; k < b.size() / bb; ++k)
    for (std::size_t o : at) std::memcpy(&b[k * bb + o], &h, 2);
  return b;
}

void BM_DequantizeRow(benchmark::State& state) {
  const auto t = static_cast<WeightType>(state.range(0));
  const int rows = 64;
  const std::vector<std::uint8_t> b = random_matrix(t, rows, kIn);
  std::vector<float> out(kIn);
  const std::size_t rb = weight_row_bytes(t, kIn);
  int r = 0;
  for (auto _ : state) {
    dequantize_row(t, b.data() + rb * static_cast<std::size_t>(r), out.data(), kIn);
    benchmark::DoNotOptimize(out.data());
    r = (r + 1) % rows;
  }
  state.SetLabel(weight_type_name(t));
  state.SetItemsProcessed(state.iterations() * kIn);
}

/// n rows of X through one projection: n = 1 is a decode step, n = 512 a prefill (exact mode:
/// dequantise + sgemm; fast mode without AMX: the int8 tiled GEMM). Third argument: 0 exact, 1 fast.
void BM_MatmulTyped(benchmark::State& state) {
  const auto t = static_cast<WeightType>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const MatmulMode before = matmul_mode();
  set_matmul_mode(state.range(2) ? MatmulMode::FastQuant : MatmulMode::Exact);
  const std::vector<std::uint8_t> b = random_matrix(t, kOut, kIn);
  const WeightMatrix W = WeightMatrix::view(t, b.data(), kOut, kIn);
  std::vector<float> X(static_cast<std::size_t>(n) * kIn, 0.5f), Y(static_cast<std::size_t>(n) * kOut);
  for (auto _ : state) {
    matmul_wt(X.data(), W, Y.data(), n, kIn, kOut);
    benchmark::DoNotOptimize(Y.data());
  }
  set_matmul_mode(before);
  state.SetLabel(std::string(weight_type_name(t)) + (state.range(2) ? " fast" : " exact"));
  state.SetItemsProcessed(state.iterations() * static_cast<long>(kIn) * kOut * n);  // multiply-adds
}

void types(benchmark::internal::Benchmark* b) {
  for (WeightType t : {WeightType::F16, WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1,
                       WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_1, WeightType::Q2_K, WeightType::Q3_K,
                       WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K})
    b->Arg(static_cast<int>(t));
}
void types_tokens(benchmark::internal::Benchmark* b) {
  for (int n : {1, 64, 512})
    for (WeightType t : {WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q4_K,
                         WeightType::Q5_K, WeightType::Q6_K})
      for (int fast : {0, 1}) b->Args({static_cast<int>(t), n, fast});
}

/// One decoded token through a projection far larger than the caches (Qwen3-0.6B's tied lm_head:
/// 151,936 x 1,024), so the weights stream from memory: bytes/s here is the decode bandwidth.
/// Second argument: 0 exact (float activations), 1 MatmulMode::FastQuant (int8 activations).
void BM_MatmulTypedStream(benchmark::State& state) {
  const auto t = static_cast<WeightType>(state.range(0));
  const MatmulMode before = matmul_mode();
  set_matmul_mode(state.range(1) ? MatmulMode::FastQuant : MatmulMode::Exact);
  constexpr int in = 1024, out = 151936;
  const std::vector<std::uint8_t> b = random_matrix(t, out, in);
  const WeightMatrix W = WeightMatrix::view(t, b.data(), out, in);
  std::vector<float> X(in, 0.5f), Y(out);
  for (auto _ : state) {
    matmul_wt(X.data(), W, Y.data(), 1, in, out);
    benchmark::DoNotOptimize(Y.data());
  }
  set_matmul_mode(before);
  state.SetLabel(std::string(weight_type_name(t)) + (state.range(1) ? " fast" : " exact"));
  state.SetBytesProcessed(state.iterations() * static_cast<long>(b.size()));
  state.SetItemsProcessed(state.iterations() * static_cast<long>(in) * out);
}
/// The machine's read bandwidth, for comparison with BM_MatmulTypedStream: the same 2-byte x
/// 151,936 x 1,024 bytes (311 MB) summed as 32-bit words by every OpenMP thread over its share
/// (the compiler vectorises the sum), no decode.
void BM_MemoryRead(benchmark::State& state) {
  const std::size_t words = std::size_t{151936} * 1024 / 2;
  std::vector<std::uint32_t> buf(words, 1u);
  for (auto _ : state) {
    std::uint32_t total = 0;
#pragma omp parallel for schedule(static) reduction(+ : total)
    for (std::size_t i = 0; i < words; ++i) total += buf[i];
    benchmark::DoNotOptimize(total);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<long>(words * sizeof(std::uint32_t)));
}

void stream_types(benchmark::internal::Benchmark* b) {
  for (WeightType t : {WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q2_K,
                       WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K})
    for (int fast : {0, 1}) b->Args({static_cast<int>(t), fast});
}

BENCHMARK(BM_DequantizeRow)->Apply(types);
BENCHMARK(BM_MatmulTypedStream)->Apply(stream_types)->UseRealTime();
BENCHMARK(BM_MemoryRead)->UseRealTime();
BENCHMARK(BM_MatmulTyped)->Apply(types_tokens)->UseRealTime();

}  // namespace
}  // namespace kvcompact
