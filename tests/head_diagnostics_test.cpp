// Attention diagnostics of a compacted head (compaction/head_diagnostics.h), worked by hand, and
// the invariant that a head kept whole scores perfectly.
#include "compaction/head_diagnostics.h"

#include "compaction/head_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

HeadCache head_of(std::vector<float> keys, std::vector<float> values, std::vector<float> beta) {
  HeadCache h;
  h.keys = std::move(keys);
  h.values = std::move(values);
  h.beta = std::move(beta);
  h.positions.assign(h.beta.size(), 0);
  return h;
}

// T = 2 orthogonal keys e1, e2 with values e1, e2, d = 2. Query q = 0: uniform attention, y =
// (.5, .5), lse = log 2. One compacted entry c = 0, C2 = (.5, .5): the same output (relative error
// 0, cosine 1), but its mass is exp(0) = 1 instead of 2: mass error |1/2 - 1| = 0.5; with beta =
// log 2 the mass matches (error 0). Query q = (2 sqrt 2, 0): s q.k = (2, 0), attention
// (e^2, 1)/(e^2 + 1) = (.8808, .1192) on e1, e2, so y = (.8808, .1192); the entry (0, beta, C2 =
// (.5, .5)) gives y' = (.5, .5): ||y' - y|| = .3808 sqrt 2 = .5385, ||y|| = .8888, relative
// error .6059; cosine (.8808 + .1192)/2 / (.8888 * .7071) = .7956; lse = log(e^2 + 1) = 2.1269,
// lse' = log 2 = .6931: mass error |exp(-1.4338) - 1| = .7616.
TEST(HeadDiagnostics, HandWorked) {
  const std::vector<float> K = {1, 0, 0, 1}, V = {1, 0, 0, 1};
  const float r = 2.0f * std::sqrt(2.0f);
  const std::vector<float> Q = {0, 0, r, 0};
  HeadCompactionInput in{K.data(), V.data(), Q.data(), 2, 2, 2};
  const HeadDiagnostics a = diagnose_head(in, head_of({0, 0}, {0.5f, 0.5f}, {std::log(2.0f)}));
  EXPECT_EQ(a.n_queries, 2);
  EXPECT_NEAR(a.rel_l2_max, 0.6059, 1e-4);
  EXPECT_NEAR(a.rel_l2_mean, 0.6059 / 2, 1e-4);
  EXPECT_NEAR(a.cosine_min, 0.7956, 1e-4);
  EXPECT_NEAR(a.cosine_mean, (1 + 0.7956) / 2, 1e-4);
  EXPECT_NEAR(a.mass_err_max, 0.7616, 1e-4);
  EXPECT_NEAR(a.mass_err_mean, 0.7616 / 2, 1e-4);
  in.n_queries = 1;  // q = 0 only, beta 0: the mass is half the original's
  const HeadDiagnostics b = diagnose_head(in, head_of({0, 0}, {0.5f, 0.5f}, {0.0f}));
  EXPECT_NEAR(b.rel_l2_mean, 0, 1e-7);
  EXPECT_NEAR(b.cosine_mean, 1, 1e-7);
  EXPECT_NEAR(b.mass_err_mean, 0.5, 1e-7);
}

TEST(HeadDiagnostics, TheWholeHeadIsPerfectAndBadInputThrows) {
  std::mt19937 rng(3);
  std::normal_distribution<float> g;
  const int T = 40, n = 30, d = 8;
  std::vector<float> K(T * d), V(T * d), Q(n * d);
  for (auto* v : {&K, &V, &Q})
    for (float& x : *v) x = g(rng);
  HeadCompactionInput in{K.data(), V.data(), Q.data(), T, n, d};
  const HeadDiagnostics a = diagnose_head(in, head_of(K, V, std::vector<float>(T, 0.0f)));
  EXPECT_LT(a.rel_l2_max, 1e-5);
  EXPECT_GT(a.cosine_min, 1 - 1e-6);
  EXPECT_LT(a.mass_err_max, 1e-5);
  EXPECT_THROW(diagnose_head(in, HeadCache{}), Error);                                  // empty head
  EXPECT_THROW(diagnose_head(in, head_of({0, 0}, {1}, {0})), Error);                    // shapes
  EXPECT_THROW(diagnose_head(in, head_of(std::vector<float>(d, 0), std::vector<float>(d, 0), {NAN})), Error);
  in.n_queries = 0;
  EXPECT_EQ(diagnose_head(in, HeadCache{}).n_queries, 0);  // nothing to measure
}

}}  // namespace
}  // namespace kvcompact

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// A key bias of log 2 on an entry is the same as two copies of that entry (head_attention.h):
// the statistics of (k1 with bias log 2, k2) equal those of (k1, k1, k2) in output and mass,
// in both the float and the double path.
TEST(HeadAttentionKeyBias, LogTwoEqualsADuplicatedKey) {
  const int d = 3, n = 4;
  const std::vector<float> K2 = {0.3f, -1.0f, 0.5f, 1.2f, 0.1f, -0.4f}, V2 = {1, 2, 3, -1, 0, 2};
  const std::vector<float> K3 = {0.3f, -1.0f, 0.5f, 0.3f, -1.0f, 0.5f, 1.2f, 0.1f, -0.4f},
                           V3 = {1, 2, 3, 1, 2, 3, -1, 0, 2};
  const std::vector<float> Q = {1, 0, 0, 0, 1, 0, 0, 0, 1, 2, -1, 0.5f};
  const std::vector<float> bias = {std::log(2.0f), 0.0f};
  HeadCompactionInput a{K2.data(), V2.data(), Q.data(), 2, n, d};
  a.key_bias = bias.data();
  const HeadCompactionInput b{K3.data(), V3.data(), Q.data(), 3, n, d};
  for (auto f : {&compute_head_attention, &compute_head_attention_f32}) {
    const HeadAttentionStats sa = f(a), sb = f(b);
    for (int i = 0; i < n; ++i) {
      EXPECT_NEAR(sa.row_max[i] + std::log(sa.mass[i]), sb.row_max[i] + std::log(sb.mass[i]), 1e-6);
      for (int j = 0; j < d; ++j) EXPECT_NEAR(sa.output[i * d + j], sb.output[i * d + j], 1e-6);
    }
  }
  std::vector<float> bad = {NAN, 0.0f};
  a.key_bias = bad.data();
  EXPECT_THROW(compute_head_attention(a), Error);
}

}}  // namespace
}  // namespace kvcompact
