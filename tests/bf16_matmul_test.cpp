// The AMX bfloat16 prefill matmul of the fast mode (ops/bf16_gemm.h) against a reference written
// independently: every activation and every decoded weight (weight_element_ref, from the ggml
// format definitions) rounded to bfloat16 by f32_to_bf16 (round to nearest even), products summed
// in double. The AMX tiles add pairs of exact bf16 products in float32, so the two agree to float32
// rounding of the sums. Also: matmul_wt dispatches prefill to it only in the fast mode, and a
// lowered kernel level (KVC_ISA=avx2, as on a CPU without AMX) falls back to the exact path.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "core/dequant.h"
#include "core/error.h"
#include "core/half.h"
#include "core/weight_matrix.h"
#include "ops/bf16_gemm.h"
#include "ops/isa.h"
#include "ops/matmul.h"
#include "kernel_state.h"
#include "random_blocks.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

float bf16(float x) { return bf16_to_f32(f32_to_bf16(x)); }

struct Case {
  WeightType type;
  int n, in, out;
};

TEST(Bf16Matmul, EqualsBf16RoundedDoubleReference) {
  KernelState keep;
  set_kernel_isa(Isa::Avx512);
  if (!bf16_matmul_available()) GTEST_SKIP() << "no AMX-BF16 on this CPU or build";
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  // Tails in every direction: tokens past a block of 32, weight rows past a block of 32 (and of
  // a thread's 128-row chunk), k past a tile step of 32 (in = 96 + 16 for F16 / BF16).
  for (const Case c : {Case{WeightType::BF16, 37, 112, 45}, Case{WeightType::F16, 5, 64, 130},
                       Case{WeightType::Q8_0, 70, 96, 33}, Case{WeightType::Q4_0, 33, 64, 160},
                       Case{WeightType::Q4_K, 40, 256, 47}, Case{WeightType::Q6_K, 9, 512, 31}}) {
    SCOPED_TRACE(std::string(weight_type_name(c.type)) + " n " + std::to_string(c.n) + " in " + std::to_string(c.in) +
                 " out " + std::to_string(c.out));
    const std::vector<std::uint8_t> bytes = random_blocks(c.type, c.out, c.in, rng);
    const WeightMatrix W = WeightMatrix::view(c.type, bytes.data(), c.out, c.in);
    std::vector<float> X(static_cast<std::size_t>(c.n) * c.in);
    for (auto& x : X) x = u(rng);
    std::vector<float> Y(static_cast<std::size_t>(c.n) * c.out, 7.0f);
    bf16_matmul_wt(X.data(), W, Y.data(), c.n, c.in, c.out);
    double worst = 0.0, moved = 0.0;
    for (int t = 0; t < c.n; ++t)
      for (int o = 0; o < c.out; ++o) {
        double ref = 0.0, mag = 0.0, exact = 0.0;
        for (int k = 0; k < c.in; ++k) {
          const float x = X[static_cast<std::size_t>(t) * c.in + k], w = weight_element_ref(W, o, k, c.in);
          ref += static_cast<double>(bf16(x)) * bf16(w);
          exact += static_cast<double>(x) * w;
          mag += std::fabs(static_cast<double>(bf16(x)) * bf16(w));
        }
        const double y = Y[static_cast<std::size_t>(t) * c.out + o];
        worst = std::max(worst, std::fabs(y - ref) / (mag + 1e-30));
        moved = std::max(moved, std::fabs(ref - exact) / (mag + 1e-30));
      }
    EXPECT_LT(worst, 1e-6) << "largest |AMX - bf16 reference| / sum |x w|";
    // The bf16 rounding itself moves results by ~2^-9 of sum |x w| (so the check above can tell
    // bf16 inputs from float32 ones).
    EXPECT_GT(moved, 1e-4);
  }
}

TEST(Bf16Matmul, FastModeDispatchesPrefillAndLoweredIsaFallsBack) {
  KernelState keep;
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> u(-1, 1);
  const int n = 19, in = 256, out = 40;
  const std::vector<std::uint8_t> bytes = random_blocks(WeightType::Q4_K, out, in, rng);
  const WeightMatrix W = WeightMatrix::view(WeightType::Q4_K, bytes.data(), out, in);
  std::vector<float> X(static_cast<std::size_t>(n) * in);
  for (auto& x : X) x = u(rng);
  std::vector<float> exact(static_cast<std::size_t>(n) * out), fast(exact.size()), direct(exact.size());
  set_matmul_mode(MatmulMode::Exact);
  matmul_wt(X.data(), W, exact.data(), n, in, out);
  set_matmul_mode(MatmulMode::FastQuant);
  set_kernel_isa(Isa::Avx512);
  if (bf16_matmul_available()) {
    matmul_wt(X.data(), W, fast.data(), n, in, out);
    bf16_matmul_wt(X.data(), W, direct.data(), n, in, out);
    EXPECT_EQ(fast, direct);
    EXPECT_NE(fast, exact);
  }
  // A CPU without AMX: the same as KVC_ISA=avx2 here. At the AVX2 level the fast mode's prefill
  // is the exact one (int8_prefill_preferred is false: the int8 GEMM lost to sgemm there; its
  // values: fast_kernels_test's PrefillInt8GemmMatchesTheRowByRowTwins), and exact mode stays exact.
  set_kernel_isa(Isa::Avx2);
  EXPECT_FALSE(bf16_matmul_available());
  EXPECT_FALSE(int8_prefill_preferred());
  EXPECT_THROW(bf16_matmul_wt(X.data(), W, direct.data(), n, in, out), Error);
  matmul_wt(X.data(), W, fast.data(), n, in, out);
  EXPECT_EQ(fast, exact);
  set_matmul_mode(MatmulMode::Exact);
  matmul_wt(X.data(), W, direct.data(), n, in, out);
  EXPECT_EQ(direct, exact);
}

TEST(Bf16Matmul, OddWidthIsAnError) {
  KernelState keep;
  set_kernel_isa(Isa::Avx512);
  if (!bf16_matmul_available()) GTEST_SKIP() << "no AMX-BF16 on this CPU or build";
  std::vector<std::uint8_t> bytes(3 * 5 * 2, 0);
  const WeightMatrix W = WeightMatrix::view(WeightType::BF16, bytes.data(), 3, 5);
  std::vector<float> X(2 * 5, 1.0f), Y(2 * 3);
  EXPECT_THROW(bf16_matmul_wt(X.data(), W, Y.data(), 2, 5, 3), Error);
}

}}  // namespace
}  // namespace kvcompact
