// The decode kernels of the typed matmul at every instruction-set level this machine has
// (KVC_ISA's levels, forced with set_kernel_isa): the fused decode-and-dot kernels against the
// plain reference matmul_wt_typed_ref (double accumulation, element-wise decoding written from the
// ggml format definitions), and the int8-activation kernels (MatmulMode::FastQuant) against their
// scalar twin (the same integer sums) and against the float reference within the error the 8-bit
// rounding of the activations allows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/weight_matrix.h"
#include "core/dequant.h"
#include "core/half.h"
#include "ops/bf16_gemm.h"
#include "ops/isa.h"
#include "ops/matmul.h"
#include "ops/quant_dot.h"
#include "kernel_state.h"
#include "random_blocks.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::vector<WeightType> kAllTypes = {
    WeightType::F32,  WeightType::F16,  WeightType::BF16, WeightType::Q8_0, WeightType::Q4_0,
    WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1, WeightType::Q8_1, WeightType::Q2_K,
    WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K};


std::vector<Isa> levels() {
  std::vector<Isa> v;
  for (int i = 0; i <= static_cast<int>(best_isa()); ++i) v.push_back(static_cast<Isa>(i));
  return v;
}

std::vector<std::uint8_t> weights(WeightType t, int rows, int cols, std::mt19937& rng) {
  if (t != WeightType::F32) return random_blocks(t, rows, cols, rng);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<std::uint8_t> b(static_cast<std::size_t>(rows) * cols * 4);
  for (std::size_t i = 0; i < b.size(); i += 4) {
    const float v = u(rng);
    std::memcpy(&b[i], &v, 4);
  }
  return b;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}

TEST(FastKernels, IsaLevelsClampToTheBest) {
  KernelState keep;
  EXPECT_STREQ(isa_name(Isa::Scalar), "scalar");
  EXPECT_STREQ(isa_name(Isa::Avx2), "avx2");
  EXPECT_STREQ(isa_name(Isa::Avx512), "avx512");
  EXPECT_EQ(set_kernel_isa(Isa::Scalar), Isa::Scalar);
  EXPECT_EQ(kernel_isa(), Isa::Scalar);
  EXPECT_EQ(set_kernel_isa(Isa::Avx512), best_isa());
  EXPECT_EQ(kernel_isa(), best_isa());
}

TEST(FastKernels, DecodeDotMatchesReferenceAtEveryLevel) {
  KernelState keep;
  set_matmul_mode(MatmulMode::Exact);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-1, 1);
  const int out = 37;
  std::vector<float> X(static_cast<std::size_t>(4) * 1024);
  for (auto& x : X) x = u(rng);
  for (WeightType t : kAllTypes) {
    const bool dense = t == WeightType::F32 || t == WeightType::F16 || t == WeightType::BF16;
    // Dense types: a width with a tail past the last group of 32, too.
    for (int in : dense ? std::vector<int>{1024, 100} : std::vector<int>{1024}) {
      const std::vector<std::uint8_t> bytes = weights(t, out, in, rng);
      const WeightMatrix W = WeightMatrix::view(t, bytes.data(), out, in);
      for (int n = 1; n <= 4; ++n) {
        std::vector<float> R(static_cast<std::size_t>(n) * out);
        matmul_wt_typed_ref(X.data(), W, R.data(), n, in, out);
        const double scale = max_abs(R);
        for (Isa isa : levels()) {
          SCOPED_TRACE(std::string(weight_type_name(t)) + " in " + std::to_string(in) + " n " + std::to_string(n) +
                       " " + isa_name(isa));
          set_kernel_isa(isa);
          std::vector<float> Y(R.size());
          matmul_wt(X.data(), W, Y.data(), n, in, out);
          double diff = 0;
          for (std::size_t i = 0; i < Y.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(Y[i] - R[i])));
          EXPECT_GT(scale, 0.1);
          EXPECT_LT(diff, 2e-5 * scale) << "max abs diff " << diff << " of values up to " << scale;
        }
      }
    }
  }
}

/// Bound on |int8-activation dot - exact dot| for row o: per activation block, every element is
/// off by at most half a quantisation step (amax / 254), plus the f16 rounding of the block scale
/// (relative 2^-11 of values up to amax; Q8_K keeps a float32 scale), times sum |w| over the block.
double quant_bound(const float* x, const WeightMatrix& W, int o, int in, int block) {
  std::vector<float> w(static_cast<std::size_t>(in));
  weight_row_f32(W, o, in, w.data());
  double bound = 0;
  for (int b0 = 0; b0 < in; b0 += block) {
    double amax = 0, wsum = 0;
    for (int k = b0; k < b0 + block; ++k) {
      amax = std::max(amax, static_cast<double>(std::fabs(x[k])));
      wsum += std::fabs(w[k]);
    }
    bound += amax * (1.0 / 254 + (block == 32 ? 1.0 / 2048 : 1e-6)) * wsum;
  }
  return bound;
}

TEST(FastKernels, Int8ActivationDotsMatchScalarTwinAndFloatWithinQuantisationError) {
  KernelState keep;
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-1, 1);
  const int out = 29, in = 1024;
  std::vector<float> X(static_cast<std::size_t>(4) * in);
  for (auto& x : X) x = u(rng);
  X[7] = 3.0f;  // a block whose amax stands out
  for (WeightType t : kAllTypes) {
    if (!quant_dot_supported(t)) continue;
    const std::vector<std::uint8_t> bytes = weights(t, out, in, rng);
    const WeightMatrix W = WeightMatrix::view(t, bytes.data(), out, in);
    const int block = quant_dot_k_blocks(t) ? 256 : 32;
    for (int n = 1; n <= 4; ++n) {
      std::vector<float> R(static_cast<std::size_t>(n) * out), S(R.size());
      matmul_wt_typed_ref(X.data(), W, R.data(), n, in, out);
      set_matmul_mode(MatmulMode::FastQuant);
      set_kernel_isa(Isa::Scalar);
      matmul_wt(X.data(), W, S.data(), n, in, out);
      const double scale = max_abs(R);
      double worst_ratio = 0;
      for (int i = 0; i < n; ++i)
        for (int o = 0; o < out; ++o) {
          const std::size_t at = static_cast<std::size_t>(i) * out + o;
          const double bound = quant_bound(X.data() + static_cast<std::size_t>(i) * in, W, o, in, block);
          ASSERT_LE(std::fabs(S[at] - R[at]), bound + 1e-5 * scale) << weight_type_name(t) << " n " << n << " o " << o;
          worst_ratio = std::max(worst_ratio, std::fabs(S[at] - R[at]) / bound);
        }
      EXPECT_GT(worst_ratio, 0.0) << weight_type_name(t) << ": the int8 path should differ from the exact one";
      for (Isa isa : levels()) {
        SCOPED_TRACE(std::string(weight_type_name(t)) + " n " + std::to_string(n) + " " + isa_name(isa));
        set_kernel_isa(isa);
        std::vector<float> Y(R.size());
        matmul_wt(X.data(), W, Y.data(), n, in, out);
        double diff = 0;
        for (std::size_t k = 0; k < Y.size(); ++k) diff = std::max(diff, static_cast<double>(std::fabs(Y[k] - S[k])));
        EXPECT_LT(diff, 1e-5 * scale) << "max abs diff " << diff << " to the scalar int8 twin, values up to " << scale;
      }
      set_matmul_mode(MatmulMode::Exact);
    }
  }
}

/// Element-wise reference of an int8 dot: W row o decoded weight by weight (weight_element_ref,
/// written from the ggml block layouts) dotted in double with activation row i as the kernels see
/// it, q * d of its Q8_K / Q8_0 blocks; and sum |w * y| over the row, the scale of the float32
/// rounding the kernels add to the exact integer sums.
std::pair<double, double> int8_reference(const WeightMatrix& W, int o, const QuantizedRows& xq, int i) {
  const int cols = xq.cols, block = xq.k_blocks ? 256 : 32;
  double dot = 0, mag = 0;
  for (int k = 0; k < cols; ++k) {
    const std::size_t at = static_cast<std::size_t>(i) * cols + k;
    const double y = static_cast<double>(xq.q[at]) * xq.d[static_cast<std::size_t>(i) * (cols / block) + k / block];
    const double w = weight_element_ref(W, o, k, cols);
    dot += w * y;
    mag += std::fabs(w * y);
  }
  return {dot, mag};
}

TEST(FastKernels, KQuantInt8DotsMatchTheElementWiseReference) {
  // Every K-quant (Q8_K activations) at every level against the element-wise reference. The integer
  // block sums are exact, so the only error is float32 rounding (one product and one sum per
  // 256-weight block, plus the reference's own float32 weight decoding): tolerance 1e-5 of
  // sum |w * y|. One wrong weight of 1024 moves a dot by about 1e-3 of that sum. Random bytes
  // (every scale, sign and high bit) and a saturating case: all quant bits set with activations
  // of +-127 (the largest maddubs pairs, 2 * 63 * 127 for Q6_K).
  KernelState keep;
  std::mt19937 rng(21);
  std::uniform_real_distribution<float> u(-1, 1);
  const int out = 23, in = 1024;
  for (WeightType t : {WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K, WeightType::Q6_K}) {
    ASSERT_TRUE(quant_dot_supported(t)) << weight_type_name(t);
    ASSERT_TRUE(quant_dot_k_blocks(t)) << weight_type_name(t);
    for (bool extreme : {false, true}) {
      std::vector<std::uint8_t> bytes = random_blocks(t, out, in, rng);
      std::vector<float> X(static_cast<std::size_t>(4) * in);
      for (auto& x : X) x = u(rng);
      if (extreme) {
        const std::vector<std::uint8_t> scales = bytes;  // keep the f16 fields of random_blocks
        std::fill(bytes.begin(), bytes.end(), std::uint8_t{0xFF});
        const std::size_t bb = weight_block_bytes(t);
        const std::size_t f16_at = t == WeightType::Q6_K ? 208 : t == WeightType::Q3_K ? 108 : t == WeightType::Q2_K ? 80 : 0;
        const std::size_t f16_n = (t == WeightType::Q6_K || t == WeightType::Q3_K) ? 2 : 4;
        for (std::size_t b = 0; b < bytes.size() / bb; ++b)
          std::memcpy(&bytes[b * bb + f16_at], &scales[b * bb + f16_at], f16_n);
        for (std::size_t k = 0; k < X.size(); ++k) X[k] = (k / 3) % 2 ? 1.0f : -1.0f;
      }
      const WeightMatrix W = WeightMatrix::view(t, bytes.data(), out, in);
      const std::size_t rb = weight_row_bytes(t, in);
      for (int n = 1; n <= 4; ++n) {
        QuantizedRows xq;
        quantize_rows(t, X.data(), n, in, xq);
        ASSERT_TRUE(xq.k_blocks);
        for (Isa isa : levels()) {
          SCOPED_TRACE(std::string(weight_type_name(t)) + (extreme ? " extreme" : " random") + " n " +
                       std::to_string(n) + " " + isa_name(isa));
          std::vector<float> Y(static_cast<std::size_t>(n) * out, -7.0f);
          // Two calls over [0, 5) and [5, out): a row range that does not start at row 0.
          quant_rows_dot(t, W.bytes(), rb, 0, 5, xq, Y.data(), out, isa);
          quant_rows_dot(t, W.bytes(), rb, 5, out, xq, Y.data(), out, isa);
          double worst = 0;
          for (int i = 0; i < n; ++i)
            for (int o = 0; o < out; ++o) {
              const auto [ref, mag] = int8_reference(W, o, xq, i);
              ASSERT_GT(mag, 0.0);
              const double err = std::fabs(Y[static_cast<std::size_t>(i) * out + o] - ref);
              ASSERT_LE(err, 1e-5 * mag) << "row " << o << " activation " << i << ": " << Y[static_cast<std::size_t>(i) * out + o]
                                         << ", reference " << ref;
              worst = std::max(worst, err / mag);
            }
          RecordProperty(std::string(weight_type_name(t)) + "_" + isa_name(isa) + "_worst", std::to_string(worst));
        }
      }
    }
  }
}

TEST(FastKernels, PrefillInt8GemmMatchesTheRowByRowTwins) {
  // The fast mode's prefill GEMM (more rows than a decode step; matmul.cpp's tiles of W rows x
  // groups of 4 activation rows) against the scalar twin run one activation row at a time, and,
  // for the K-quants, against the element-wise reference: 37 rows (not a multiple of 4) and 300
  // output rows (several tiles, the last one partial), at every level this machine has.
  KernelState keep;
  std::mt19937 rng(33);
  std::uniform_real_distribution<float> u(-1, 1);
  const int n = 37, out = 300, in = 1024;
  std::vector<float> X(static_cast<std::size_t>(n) * in);
  for (auto& x : X) x = u(rng);
  for (WeightType t : kAllTypes) {
    if (!quant_dot_supported(t)) continue;
    const std::vector<std::uint8_t> bytes = weights(t, out, in, rng);
    const WeightMatrix W = WeightMatrix::view(t, bytes.data(), out, in);
    const std::size_t rb = weight_row_bytes(t, in);
    QuantizedRows xq;
    quantize_rows(t, X.data(), n, in, xq);
    std::vector<float> S(static_cast<std::size_t>(n) * out);
    for (int i = 0; i < n; ++i)
      quant_rows_dot(t, W.bytes(), rb, 0, out, xq.view(i, 1), S.data() + static_cast<std::size_t>(i) * out, out, Isa::Scalar);
    const double scale = max_abs(S);
    if (quant_dot_k_blocks(t))
      for (int i = 0; i < n; i += 9)
        for (int o = 0; o < out; o += 7) {
          const auto [ref, mag] = int8_reference(W, o, xq, i);
          ASSERT_LE(std::fabs(S[static_cast<std::size_t>(i) * out + o] - ref), 1e-5 * mag) << weight_type_name(t);
        }
    for (Isa isa : levels()) {
      SCOPED_TRACE(std::string(weight_type_name(t)) + " " + isa_name(isa));
      set_kernel_isa(isa);
      std::vector<float> Y(S.size(), -7.0f);
      matmul_wt_int8(X.data(), W, Y.data(), n, in, out);
      double diff = 0;
      for (std::size_t k = 0; k < Y.size(); ++k) diff = std::max(diff, static_cast<double>(std::fabs(Y[k] - S[k])));
      EXPECT_LT(diff, 1e-5 * scale) << "max abs diff " << diff << " to the row-by-row scalar twin, values up to " << scale;
      // Dispatch: the fast mode's prefill is this GEMM where int8_prefill_preferred() (and no AMX
      // takes it first), else bit for bit the exact mode's.
      if (bf16_matmul_available()) continue;  // bf16_matmul_test
      std::vector<float> fast(S.size()), exact(S.size());
      set_matmul_mode(MatmulMode::FastQuant);
      matmul_wt(X.data(), W, fast.data(), n, in, out);
      set_matmul_mode(MatmulMode::Exact);
      matmul_wt(X.data(), W, exact.data(), n, in, out);
      EXPECT_EQ(fast, int8_prefill_preferred() ? Y : exact) << "int8_prefill_preferred " << int8_prefill_preferred();
    }
  }
}

TEST(FastKernels, Int8ActivationBlocksAreGgmls) {
  // Hand-worked Q8_0 / Q8_1 block: amax 127 -> d = 1, q = round(x) with ties to even.
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f, x[1] = -63.5f, x[2] = 0.5f, x[3] = 2.5f, x[4] = 31.75f;
  QuantizedRows q;
  quantize_rows(WeightType::Q4_0, x.data(), 1, 32, q);
  EXPECT_FALSE(q.k_blocks);
  EXPECT_EQ(q.q[0], 127);
  EXPECT_EQ(q.q[1], -64);
  EXPECT_EQ(q.q[2], 0);
  EXPECT_EQ(q.q[3], 2);
  EXPECT_EQ(q.q[4], 32);
  EXPECT_EQ(q.sum[0], 127 - 64 + 2 + 32);
  EXPECT_EQ(q.d[0], 1.0f);
  EXPECT_EQ(q.s[0], 97.0f);
  // Halving x halves d (rounded through f16: 0.5 is exact) and keeps q.
  for (float& v : x) v *= 0.5f;
  quantize_rows(WeightType::Q4_1, x.data(), 1, 32, q);
  EXPECT_EQ(q.d[0], 0.5f);
  EXPECT_EQ(q.q[1], -64);
  // Q8_K: the signed value of largest magnitude m sets iscale = -127 / m (here m = -127: iscale 1,
  // so q = round(x)), d = 1 / iscale; bsums per 16. With m = +127 the signs flip and d = -1.
  std::vector<float> y(256, 0.0f);
  y[0] = -127.0f, y[17] = -63.5f, y[18] = 62.5f;
  quantize_rows(WeightType::Q4_K, y.data(), 1, 256, q);
  EXPECT_TRUE(q.k_blocks);
  EXPECT_EQ(q.q[0], -127);
  EXPECT_EQ(q.q[17], -64);  // -63.5 -> -64 (even)
  EXPECT_EQ(q.q[18], 62);   // 62.5 -> 62 (even)
  EXPECT_EQ(q.sum[0], -127);
  EXPECT_EQ(q.sum[1], -2);
  EXPECT_EQ(q.d[0], 1.0f);
  for (float& v : y) v = -v;
  quantize_rows(WeightType::Q4_K, y.data(), 1, 256, q);
  EXPECT_EQ(q.q[0], -127);
  EXPECT_EQ(q.q[18], 62);
  EXPECT_EQ(q.d[0], -1.0f);
  // An all-zero block quantises to zeros with d = 0.
  std::fill(y.begin(), y.end(), 0.0f);
  quantize_rows(WeightType::Q4_K, y.data(), 1, 256, q);
  EXPECT_EQ(q.d[0], 0.0f);
  EXPECT_EQ(q.sum[3], 0);
}

}}  // namespace
}  // namespace kvcompact
