// Typed weights: f16/bf16 conversions on hand-worked bit patterns, Q8_0/Q4_0 blocks built by
// hand, and the typed matmul (decode blocks of rows + sgemm) against its plain reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "core/error.h"
#include "io/gguf.h"
#include "core/weight_matrix.h"
#include "core/dequant.h"
#include "core/half.h"
#include "ops/matmul.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(TypedWeights, HalfConversions) {
  EXPECT_EQ(f16_to_f32(0x3C00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xC000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x7BFF), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7C00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7E00)));
  EXPECT_EQ(f32_to_f16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_f16(6.0f), 0x4600);
  EXPECT_EQ(f32_to_f16(1e6f), 0x7C00);                    // overflow -> Inf
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  for (std::uint32_t h = 0; h < 0x7C00; h += 7)  // round trip of every 7th finite positive half
    ASSERT_EQ(f32_to_f16(f16_to_f32(static_cast<std::uint16_t>(h))), h);
  for (std::uint16_t h : {0x0000, 0x3555, 0x7BFF, 0x8001, 0xFBFF}) EXPECT_EQ(f16_to_f32(h), fp16_to_fp32(h));
  EXPECT_EQ(bf16_to_f32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(1.00390625f), 0x3F80);  // 1 + 2^-8: tie -> even (down)
  EXPECT_EQ(f32_to_bf16(1.01171875f), 0x3F82);  // 1 + 3*2^-8: tie -> even (up)
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

// Q8_0 block: d = 0.5 (f16 0x3800), q = -16..15 -> values -8 .. 7.5.
std::vector<std::uint8_t> q8_block(std::uint16_t d, int q0) {
  std::vector<std::uint8_t> b(34);
  std::memcpy(b.data(), &d, 2);
  for (int j = 0; j < 32; ++j) b[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(q0 + j));
  return b;
}

TEST(TypedWeights, Q8_0Block) {
  auto b = q8_block(0x3800, -16);
  float out[32];
  dequantize_row(WeightType::Q8_0, b.data(), out, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], 0.5f * (j - 16)) << j;
  WeightMatrix w = WeightMatrix::view(WeightType::Q8_0, b.data(), 1, 32);
  EXPECT_EQ(weight_element_ref(w, 0, 31, 32), 7.5f);
  EXPECT_EQ(w.byte_size(), 34u);
}

TEST(TypedWeights, Q4_0Block) {
  // d = 2 (0x4000); byte j = (hi << 4) | lo with lo = j, hi = 15 - j:
  // element j = (j - 8) * 2, element j + 16 = (15 - j - 8) * 2.
  std::vector<std::uint8_t> b(18);
  const std::uint16_t d = 0x4000;
  std::memcpy(b.data(), &d, 2);
  for (int j = 0; j < 16; ++j) b[2 + j] = static_cast<std::uint8_t>(((15 - j) << 4) | j);
  float out[32];
  dequantize_row(WeightType::Q4_0, b.data(), out, 32);
  EXPECT_EQ(out[0], -16.0f);
  EXPECT_EQ(out[15], 14.0f);
  EXPECT_EQ(out[16], 14.0f);
  EXPECT_EQ(out[31], -16.0f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], 2.0f * (j - 8));
    EXPECT_EQ(out[j + 16], 2.0f * (7 - j));
  }
  WeightMatrix w = WeightMatrix::view(WeightType::Q4_0, b.data(), 1, 32);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(weight_element_ref(w, 0, j, 32), out[j]);
}

TEST(TypedWeights, MatmulMatchesReferenceForEveryType) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  const int n = 5, in = 96, out = 70;
  std::vector<float> X(n * in), Wf(out * in);
  for (auto& x : X) x = u(rng);
  for (auto& x : Wf) x = u(rng);
  // Encode W in each type.
  std::vector<std::uint8_t> f16(out * in * 2), bf16(out * in * 2), q8, q4;
  for (int i = 0; i < out * in; ++i) {
    const std::uint16_t h = f32_to_f16(Wf[i]), b = f32_to_bf16(Wf[i]);
    std::memcpy(&f16[2 * i], &h, 2);
    std::memcpy(&bf16[2 * i], &b, 2);
  }
  std::uniform_int_distribution<int> qi(-128, 127), q4i(0, 255);
  for (int blk = 0; blk < out * in / 32; ++blk) {
    const std::uint16_t d = f32_to_f16(0.01f + 0.001f * (blk % 7));
    q8.push_back(static_cast<std::uint8_t>(d & 0xFF)), q8.push_back(static_cast<std::uint8_t>(d >> 8));
    q4.push_back(static_cast<std::uint8_t>(d & 0xFF)), q4.push_back(static_cast<std::uint8_t>(d >> 8));
    for (int j = 0; j < 32; ++j) q8.push_back(static_cast<std::uint8_t>(qi(rng)));
    for (int j = 0; j < 16; ++j) q4.push_back(static_cast<std::uint8_t>(q4i(rng)));
  }
  struct T { WeightMatrix w; const char* name; };
  std::vector<T> ws;
  ws.push_back({WeightMatrix(Wf), "owned f32"});
  ws.push_back({WeightMatrix::view(WeightType::F32, Wf.data(), out, in), "F32"});
  ws.push_back({WeightMatrix::view(WeightType::F16, f16.data(), out, in), "F16"});
  ws.push_back({WeightMatrix::view(WeightType::BF16, bf16.data(), out, in), "BF16"});
  ws.push_back({WeightMatrix::view(WeightType::Q8_0, q8.data(), out, in), "Q8_0"});
  ws.push_back({WeightMatrix::view(WeightType::Q4_0, q4.data(), out, in), "Q4_0"});
  for (const T& t : ws) {
    SCOPED_TRACE(t.name);
    std::vector<float> Y(n * out), R(n * out);
    matmul_wt(X.data(), t.w, Y.data(), n, in, out);
    matmul_wt_typed_ref(X.data(), t.w, R.data(), n, in, out);
    double diff = 0, scale = 0;
    for (int i = 0; i < n * out; ++i) diff = std::max(diff, static_cast<double>(std::abs(Y[i] - R[i]))), scale = std::max(scale, static_cast<double>(std::abs(R[i])));
    EXPECT_GT(scale, 0.1);
    EXPECT_LT(diff, 1e-5 * scale);
  }
  // f16 / bf16 weights approximate the f32 product.
  std::vector<float> Y32(n * out), Yb(n * out);
  matmul_wt(X.data(), ws[0].w, Y32.data(), n, in, out);
  matmul_wt(X.data(), ws[3].w, Yb.data(), n, in, out);
  double d = 0;
  for (int i = 0; i < n * out; ++i) d = std::max(d, static_cast<double>(std::abs(Y32[i] - Yb[i])));
  EXPECT_GT(d, 0.0);
  EXPECT_LT(d, 0.1);
  // Shape mismatches and bad views throw.
  std::vector<float> Y(n * out);
  EXPECT_THROW(matmul_wt(X.data(), ws[2].w, Y.data(), n, in, out - 1), Error);
  EXPECT_THROW(WeightMatrix::view(WeightType::Q8_0, q8.data(), 2, 33), Error);
  EXPECT_THROW(ws[3].w.f32(), Error);
  EXPECT_THROW(ws[4].w.data(), Error);
  // Embedding rows.
  float row[96];
  weight_row_f32(ws[4].w, 69, in, row);
  for (int j = 0; j < in; ++j) ASSERT_EQ(row[j], weight_element_ref(ws[4].w, 69, j, in));
  EXPECT_THROW(weight_row_f32(ws[4].w, 70, in, row), Error);
}

}}  // namespace
}  // namespace kvcompact
