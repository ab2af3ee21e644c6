#include "compaction/head_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <omp.h>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::vector<float> random_matrix(int rows, int cols, std::uint64_t seed, float scale) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, scale);
  std::vector<float> m(static_cast<std::size_t>(rows) * cols);
  for (float& x : m) x = g(rng);
  return m;
}

TEST(HeadAttention, StatsMatchLoopReferenceAcrossQueryBlocks) {
  // T = 4096 gives blocks of 2048 queries, so n = 2100 spans two blocks.
  const int n = 2100, T = 4096, d = 4;
  const std::vector<float> Q = random_matrix(n, d, 11, 2.0f), K = random_matrix(T, d, 12, 2.0f),
                           V = random_matrix(T, d, 13, 1.0f);
  const HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  const HeadAttentionStats st = compute_head_attention(in);
  double max_err = 0, max_mass_err = 0, sum_err = 0;
  std::vector<double> col_sum(T, 0.0);
  for (int i = 0; i < n; ++i) {
    std::vector<double> s(T);
    for (int j = 0; j < T; ++j) {
      double dot = 0;
      for (int c = 0; c < d; ++c) dot += double(Q[i * d + c]) * double(K[j * d + c]);
      s[j] = dot / 2.0;  // sqrt(4)
    }
    const double m = *std::max_element(s.begin(), s.end());
    double z = 0;
    for (double& x : s) z += (x = std::exp(x - m));
    max_mass_err = std::max(max_mass_err, std::fabs(z - st.mass[i]) / z);
    EXPECT_NEAR(st.row_max[i], m, 1e-12);
    for (int c = 0; c < d; ++c) {
      double y = 0;
      for (int j = 0; j < T; ++j) y += s[j] / z * V[j * d + c];
      max_err = std::max(max_err, std::fabs(y - st.output[i * d + c]));
    }
    for (int j = 0; j < T; ++j) col_sum[j] += s[j] / z;
  }
  for (int j = 0; j < T; ++j) sum_err = std::max(sum_err, std::fabs(col_sum[j] - st.attn_sum[j]));
  EXPECT_LT(max_err, 1e-10);
  EXPECT_LT(max_mass_err, 1e-12);
  EXPECT_LT(sum_err, 1e-10);
}

TEST(HeadAttention, Float32StatsAgreeWithDoubleStats) {
  // n = 900 queries span four 256-query blocks of the float32 path, large enough for its parallel
  // loop over blocks; peaked logits (Q ~ N(0, 4)). Checked on one and on two threads.
  const int n = 900, T = 700, d = 64;
  const std::vector<float> Q = random_matrix(n, d, 21, 2.0f), K = random_matrix(T, d, 22, 1.0f),
                           V = random_matrix(T, d, 23, 1.0f);
  const HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  const HeadAttentionStats ref = compute_head_attention(in);
  auto rel = [](const std::vector<double>& a, const std::vector<double>& b) {
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < a.size(); ++i) {
      num = std::max(num, std::fabs(a[i] - b[i]));
      den = std::max(den, std::fabs(b[i]));
    }
    return num / den;
  };
  const int saved = omp_get_max_threads();
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    const HeadAttentionStats f32 = compute_head_attention_f32(in);
    ASSERT_EQ(f32.output.size(), ref.output.size());
    ASSERT_EQ(f32.attn_sum.size(), ref.attn_sum.size());
    EXPECT_LT(rel(f32.row_max, ref.row_max), 1e-6) << threads << " threads";
    EXPECT_LT(rel(f32.mass, ref.mass), 1e-5) << threads << " threads";
    EXPECT_LT(rel(f32.output, ref.output), 1e-5) << threads << " threads";
    EXPECT_LT(rel(f32.attn_sum, ref.attn_sum), 1e-5) << threads << " threads";
    EXPECT_LT(rel(f32.attn_sumsq, ref.attn_sumsq), 1e-5) << threads << " threads";
    EXPECT_LT(rel(f32.attn_max, ref.attn_max), 1e-5) << threads << " threads";
  }
  omp_set_num_threads(saved);
  // The same input errors as the double path.
  const float qnan[2] = {0, std::numeric_limits<float>::quiet_NaN()}, q[2] = {0, 0};
  const std::vector<float> K1 = {1, 2}, V1 = {3, 4};
  EXPECT_THROW(compute_head_attention_f32({K1.data(), V1.data(), qnan, 1, 1, 2}), Error);
  EXPECT_THROW(compute_head_attention_f32({K1.data(), V1.data(), q, 0, 1, 2}), Error);  // T = 0
  EXPECT_EQ(compute_head_attention_f32({K1.data(), V1.data(), q, 1, 0, 2}).mass.size(), 0u);
}

TEST(HeadAttention, CompactedOutputByHand) {
  // One query q = 0 (all logits 0); beta = (0, log 3) -> weights (1/4, 3/4);
  // C2 = [[4, 0], [0, 8]] -> output (1, 6).
  CompactedHead h;
  h.selected = {0, 1};
  h.keys = {1, 2, -3, 4};
  h.beta = {0.0f, static_cast<float>(std::log(3.0))};
  h.values = {4, 0, 0, 8};
  const float q[2] = {0, 0};
  const std::vector<float> y = compacted_attention_output(h, q, 1, 2);
  ASSERT_EQ(y.size(), 2u);
  EXPECT_NEAR(y[0], 1.0f, 1e-6);
  EXPECT_NEAR(y[1], 6.0f, 1e-6);
  // q = (2, 0), d = 2: logits 2/sqrt2 * (1, -3) = (sqrt2, -3 sqrt2); weights ~ exp(logit + beta).
  const float q2[2] = {2, 0};
  const std::vector<float> y2 = compacted_attention_output(h, q2, 1, 2);
  const double w0 = std::exp(std::sqrt(2.0)), w1 = 3.0 * std::exp(-3.0 * std::sqrt(2.0));
  EXPECT_NEAR(y2[0], 4.0 * w0 / (w0 + w1), 1e-5);
  EXPECT_NEAR(y2[1], 8.0 * w1 / (w0 + w1), 1e-5);
}

TEST(HeadAttention, BadInputThrows) {
  CompactedHead h;
  const float q[2] = {0, 0};
  EXPECT_THROW(compacted_attention_output(h, q, 1, 2), Error);  // empty head
  h.selected = {0};
  h.keys = {1, 2};
  h.beta = {0};
  h.values = {1, 2, 3};  // wrong size
  EXPECT_THROW(compacted_attention_output(h, q, 1, 2), Error);
  h.values = {1, 2};
  EXPECT_THROW(compacted_attention_output(h, q, 1, 0), Error);
  const float qnan[2] = {0, std::numeric_limits<float>::quiet_NaN()};
  EXPECT_THROW(compacted_attention_output(h, qnan, 1, 2), Error);

  const std::vector<float> K = {1, 2}, V = {3, 4};
  EXPECT_THROW(compute_head_attention({K.data(), V.data(), qnan, 1, 1, 2}), Error);
  EXPECT_THROW(compute_head_attention({K.data(), V.data(), q, 1, 1, 0}), Error);
  EXPECT_THROW(compute_head_attention({K.data(), V.data(), q, 0, 1, 2}), Error);  // T = 0
  const std::vector<float> Vinf = {3, std::numeric_limits<float>::infinity()};
  EXPECT_THROW(compute_head_attention({K.data(), Vinf.data(), q, 1, 1, 2}), Error);
}

}}  // namespace
}  // namespace kvcompact
