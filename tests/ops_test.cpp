// Fast kernels in src/ops vs their plain scalar reference twins (src/ops/reference.h), plus a few
// hand-worked values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "ops/geglu.h"
#include "ops/matmul.h"
#include "ops/reference.h"
#include "ops/rmsnorm.h"
#include "ops/rope.h"
#include "ops/softmax.h"
#include "ops/swiglu.h"
#include "ops/vexp.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::vector<float> random_vec(std::size_t n, uint64_t seed, float a = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-a, a);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// |a - b| <= atol + rtol * |b| elementwise.
void expect_close(const std::vector<float>& a, const std::vector<float>& b, float rtol,
                  float atol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_LE(std::fabs(a[i] - b[i]), atol + rtol * std::fabs(b[i])) << "at index " << i;
}

TEST(Ops, MatmulMatchesReference) {
  const int n = 7, in = 45, out = 33;
  auto X = random_vec(n * in, 1), W = random_vec(out * in, 2);
  std::vector<float> Y(n * out), R(n * out);
  matmul_wt(X.data(), W.data(), Y.data(), n, in, out);
  matmul_wt_ref(X.data(), W.data(), R.data(), n, in, out);
  expect_close(Y, R, 1e-5f, 1e-5f);
}

TEST(Ops, MatmulHandWorked) {
  // X = [[1, 2]], W = [[3, 4], [5, 6], [-1, 0]] -> Y = [11, 17, -1].
  const std::vector<float> X{1, 2}, W{3, 4, 5, 6, -1, 0};
  std::vector<float> Y(3);
  matmul_wt(X.data(), W.data(), Y.data(), 1, 2, 3);
  EXPECT_EQ(Y, (std::vector<float>{11, 17, -1}));
}

TEST(Ops, RmsnormMatchesReferenceAndHandValue) {
  const int n = 5, dim = 37;
  auto x = random_vec(n * dim, 3, 2.0f), w = random_vec(dim, 4);
  std::vector<float> y(n * dim), r(n * dim);
  rmsnorm(x.data(), w.data(), y.data(), n, dim, 1e-5f);
  rmsnorm_ref(x.data(), w.data(), r.data(), n, dim, 1e-5f);
  expect_close(y, r, 1e-5f, 1e-6f);
  // [3, 4]: mean square 12.5 -> x / sqrt(12.5) with eps 0, weights [1, 2].
  const std::vector<float> x2{3, 4}, w2{1, 2};
  std::vector<float> y2(2);
  rmsnorm(x2.data(), w2.data(), y2.data(), 1, 2, 0.0f);
  EXPECT_NEAR(y2[0], 3 / std::sqrt(12.5), 1e-6);
  EXPECT_NEAR(y2[1], 8 / std::sqrt(12.5), 1e-6);
  // In place (out == x) gives the same numbers.
  rmsnorm(x.data(), w.data(), x.data(), n, dim, 1e-5f);
  expect_close(x, r, 1e-5f, 1e-6f);
}

TEST(Ops, RopeMatchesReferenceBothStyles) {
  const int n = 9, n_heads = 3, hd = 16, first = 37;
  for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::HalfSplit}) {
    auto x = random_vec(n * n_heads * hd, 5);
    auto r = x;
    std::vector<float> c(n * hd / 2), s(n * hd / 2);
    rope_angles(first, n, hd, 10000.0f, c.data(), s.data());
    apply_rope(x.data(), n, n_heads, hd, c.data(), s.data(), style);
    rope_ref(r.data(), n, n_heads, hd, first, 10000.0f, style);
    expect_close(x, r, 1e-4f, 1e-5f);
  }
}

// The twin the reference backend uses (given angles) equals the twin that computes its own.
TEST(Ops, RopeWithGivenAnglesMatchesBothTwins) {
  const int n = 5, n_heads = 2, hd = 8, first = 11;
  for (RopeStyle style : {RopeStyle::Interleaved, RopeStyle::HalfSplit}) {
    auto x = random_vec(n * n_heads * hd, 15);
    auto fast = x, own = x;
    std::vector<float> c(n * hd / 2), s(n * hd / 2);
    rope_angles(first, n, hd, 500.0f, c.data(), s.data());
    apply_rope_ref(x.data(), n, n_heads, hd, c.data(), s.data(), style);
    apply_rope(fast.data(), n, n_heads, hd, c.data(), s.data(), style);
    rope_ref(own.data(), n, n_heads, hd, first, 500.0f, style);
    expect_close(x, fast, 1e-6f, 1e-6f);
    expect_close(x, own, 1e-4f, 1e-5f);
  }
}

TEST(Ops, RopeHandWorkedPairs) {
  // head_dim 4, position 1, theta 100: freq_0 = 1, freq_1 = 100^(-1/2) = 0.1.
  const float c0 = std::cos(1.0f), s0 = std::sin(1.0f), c1 = std::cos(0.1f), s1 = std::sin(0.1f);
  std::vector<float> c(2), s(2);
  rope_angles(1, 1, 4, 100.0f, c.data(), s.data());
  // Interleaved: pairs (0,1) at freq_0 and (2,3) at freq_1.
  std::vector<float> x{1, 0, 0, 1};
  apply_rope(x.data(), 1, 1, 4, c.data(), s.data(), RopeStyle::Interleaved);
  EXPECT_NEAR(x[0], c0, 1e-6);
  EXPECT_NEAR(x[1], s0, 1e-6);
  EXPECT_NEAR(x[2], -s1, 1e-6);
  EXPECT_NEAR(x[3], c1, 1e-6);
  // HalfSplit: pairs (0,2) at freq_0 and (1,3) at freq_1.
  std::vector<float> y{1, 0, 0, 1};
  apply_rope(y.data(), 1, 1, 4, c.data(), s.data(), RopeStyle::HalfSplit);
  EXPECT_NEAR(y[0], c0, 1e-6);
  EXPECT_NEAR(y[2], s0, 1e-6);
  EXPECT_NEAR(y[1], -s1, 1e-6);
  EXPECT_NEAR(y[3], c1, 1e-6);
  // Position 0 is the identity.
  rope_angles(0, 1, 4, 100.0f, c.data(), s.data());
  std::vector<float> z{1, 2, 3, 4};
  apply_rope(z.data(), 1, 1, 4, c.data(), s.data(), RopeStyle::Interleaved);
  EXPECT_EQ(z, (std::vector<float>{1, 2, 3, 4}));
}

TEST(Ops, SoftmaxMatchesReferenceAndIsStable) {
  auto x = random_vec(101, 6, 20.0f);
  auto r = x;
  softmax(x.data(), 101);
  softmax_ref(r.data(), 101);
  expect_close(x, r, 1e-5f, 1e-7f);
  // Huge logits do not overflow: softmax([1000, 1000 + log 3]) = [1/4, 3/4].
  std::vector<float> big{1000.0f, 1000.0f + std::log(3.0f)};
  softmax(big.data(), 2);
  EXPECT_NEAR(big[0], 0.25f, 1e-4);
  EXPECT_NEAR(big[1], 0.75f, 1e-4);
}

TEST(Ops, SwigluMatchesReferenceAndHandValue) {
  auto g = random_vec(257, 7, 6.0f), u = random_vec(257, 8, 2.0f);
  auto r = g;
  swiglu(g.data(), u.data(), 257);
  swiglu_ref(r.data(), u.data(), 257);
  expect_close(g, r, 1e-5f, 1e-6f);
  // silu(0) = 0; silu(2) * 3 = 2 / (1 + e^-2) * 3.
  std::vector<float> g2{0.0f, 2.0f}, u2{5.0f, 3.0f};
  swiglu(g2.data(), u2.data(), 2);
  EXPECT_EQ(g2[0], 0.0f);
  EXPECT_NEAR(g2[1], 6.0 / (1.0 + std::exp(-2.0)), 1e-5);
}

TEST(Ops, GegluMatchesReferenceAndHandValue) {
  auto g = random_vec(300, 17, 6.0f), u = random_vec(300, 18, 2.0f);
  auto r = g;
  geglu_tanh(g.data(), u.data(), 300);
  geglu_tanh_ref(r.data(), u.data(), 300);
  expect_close(g, r, 1e-5f, 1e-6f);
  // gelu_tanh(1) = 0.5 (1 + tanh(sqrt(2/pi) 1.044715)) = 0.841192 (by hand), times up 2.
  std::vector<float> g1{1.0f}, u1{2.0f};
  geglu_tanh_ref(g1.data(), u1.data(), 1);
  EXPECT_NEAR(g1[0], 2 * 0.5 * (1 + std::tanh(std::sqrt(2 / M_PI) * 1.044715)), 1e-6);
  EXPECT_NEAR(g1[0], 1.682384, 2e-6);
}

TEST(Ops, LargeInputsTakeParallelPathsAndMatchReference) {
  // Sizes above the OpenMP thresholds of rmsnorm, rope and swiglu.
  const int n = 40, dim = 2048;
  auto x = random_vec(n * dim, 11, 3.0f), w = random_vec(dim, 12);
  std::vector<float> y(n * dim), r(n * dim);
  rmsnorm(x.data(), w.data(), y.data(), n, dim, 1e-6f);
  rmsnorm_ref(x.data(), w.data(), r.data(), n, dim, 1e-6f);
  expect_close(y, r, 1e-5f, 1e-6f);
  const int rows = 300, heads = 8, hd = 32;
  auto q = random_vec(rows * heads * hd, 13);
  auto qr = q;
  std::vector<float> c(rows * hd / 2), s(rows * hd / 2);
  rope_angles(5, rows, hd, 500000.0f, c.data(), s.data());
  apply_rope(q.data(), rows, heads, hd, c.data(), s.data(), RopeStyle::HalfSplit);
  rope_ref(qr.data(), rows, heads, hd, 5, 500000.0f, RopeStyle::HalfSplit);
  expect_close(q, qr, 1e-4f, 2e-5f);
  auto g = random_vec(70001, 14, 5.0f), u = random_vec(70001, 15);
  auto gr = g;
  swiglu(g.data(), u.data(), 70001);
  swiglu_ref(gr.data(), u.data(), 70001);
  expect_close(g, gr, 1e-5f, 1e-6f);
}

TEST(Ops, AttendRowHandWorked) {
  // Two entries, head_dim 2, q = [1, 0], k0 = [0, 0], k1 = [log 3, 0], scale 1, beta 0:
  // weights [1/4, 3/4], so out = 0.25 v0 + 0.75 v1.
  const std::vector<float> q{1, 0}, k{0, 0, std::log(3.0f), 0}, v{4, 0, 0, 8}, beta{0, 0};
  std::vector<float> out(2), scratch(2);
  attend_row(q.data(), k.data(), v.data(), beta.data(), 2, 2, 1.0f, scratch.data(), out.data());
  EXPECT_NEAR(out[0], 1.0f, 1e-6);
  EXPECT_NEAR(out[1], 6.0f, 1e-6);
  // beta = log 3 on entry 0 makes the weights equal: out = (v0 + v1) / 2.
  const std::vector<float> beta2{std::log(3.0f), 0};
  attend_row(q.data(), k.data(), v.data(), beta2.data(), 2, 2, 1.0f, scratch.data(), out.data());
  EXPECT_NEAR(out[0], 2.0f, 1e-6);
  EXPECT_NEAR(out[1], 4.0f, 1e-6);
}

// Random ragged GQA attention problem: KV head g holds extra[g] older entries plus the n new ones.
struct AttentionProblem {
  int n, n_heads, n_kv, hd;
  std::vector<std::vector<float>> keys, values, betas;
  std::vector<AttentionHeadView> views;
  std::vector<float> q;
  AttentionProblem(int n_, int heads, int kv, int hd_, std::vector<int> extra, uint64_t seed)
      : n(n_), n_heads(heads), n_kv(kv), hd(hd_), views(kv) {
    for (int g = 0; g < n_kv; ++g) {
      const int len = n + extra[g];
      keys.push_back(random_vec(len * hd, seed + 100 + g, 2.0f));
      values.push_back(random_vec(len * hd, seed + 200 + g));
      betas.push_back(random_vec(len, seed + 300 + g, 1.5f));
      views[g] = {keys[g].data(), values[g].data(), betas[g].data(), len};
    }
    q = random_vec(n * n_heads * hd, seed + 9, 2.0f);
  }
  std::vector<float> run(void (*fn)(const float*, int, int, int, int, const AttentionHeadView*,
                                    float*)) const {
    std::vector<float> out(static_cast<std::size_t>(n) * n_heads * hd, -1.0f);
    fn(q.data(), n, n_heads, n_kv, hd, views.data(), out.data());
    return out;
  }
};

TEST(Ops, CausalAttentionMatchesReferenceWithRaggedHeadsAndBias) {
  const AttentionProblem p(13, 6, 3, 24, {0, 20, 57}, 1);
  const auto ref = p.run(causal_attention_ref);
  for (auto fn : {causal_attention, causal_attention_rows, causal_attention_blocked}) {
    const auto out = p.run(fn);
    expect_close(out, ref, 1e-5f, 1e-5f);
    // Causality: the first row of head 0 sees exactly one entry (KV head 0 holds only the new
    // tokens), so its output is that entry's value.
    for (int d = 0; d < p.hd; ++d) EXPECT_NEAR(out[d], p.values[0][d], 1e-6);
  }
}

TEST(Ops, SlidingWindowAttentionHidesEntriesOlderThanTheWindow) {
  // Positions 0..len-1 in order; window 7: a query at position p sees positions p-6 .. p.
  for (int n : {1, 5, 300}) {
    AttentionProblem p(n, 4, 2, 16, {0, 40}, 10 + n);
    std::vector<std::vector<int32_t>> pos(2);
    for (int g = 0; g < 2; ++g) {
      for (int i = 0; i < p.views[g].length; ++i) pos[g].push_back(i);
      p.views[g].positions = pos[g].data();
      p.views[g].window = 7;
    }
    const auto ref = p.run(causal_attention_ref);
    for (auto fn : {causal_attention, causal_attention_rows, causal_attention_blocked})
      expect_close(p.run(fn), ref, 1e-4f, 1e-5f);
    // Independent check of the last row: plain attention over only the last 7 entries.
    AttentionProblem last = p;
    for (int g = 0; g < 2; ++g) {
      const int len = p.views[g].length, keep = std::min(7, len);
      last.views[g] = {p.keys[g].data() + static_cast<long>(len - keep) * p.hd,
                       p.values[g].data() + static_cast<long>(len - keep) * p.hd,
                       p.betas[g].data() + (len - keep), keep};
    }
    last.n = 1;
    last.q.assign(p.q.end() - p.n_heads * p.hd, p.q.end());
    const auto one = last.run(causal_attention_ref);
    const std::vector<float> tail(ref.end() - p.n_heads * p.hd, ref.end());
    expect_close(tail, one, 1e-5f, 1e-6f);
    EXPECT_EQ(first_visible(p.views[1], n, n - 1), p.views[1].length - 7);
  }
}

TEST(Ops, CausalAttentionManyBlocksAndSingleRow) {
  // 300 rows: three 128-row blocks in the blocked kernel; OpenMP paths in both.
  const AttentionProblem big(300, 4, 2, 32, {0, 77}, 2);
  const auto ref = big.run(causal_attention_ref);
  expect_close(big.run(causal_attention_blocked), ref, 1e-4f, 1e-5f);
  expect_close(big.run(causal_attention_rows), ref, 1e-5f, 1e-5f);
  // Decode: one row over a long cache.
  const AttentionProblem one(1, 4, 2, 16, {500, 3}, 3);
  const auto ref1 = one.run(causal_attention_ref);
  expect_close(one.run(causal_attention), ref1, 1e-5f, 1e-6f);
  expect_close(one.run(causal_attention_blocked), ref1, 1e-5f, 1e-6f);
  // A long cache shrinks the blocked kernel's row block (here to 13 rows: 3 blocks for 30 rows).
  const AttentionProblem longc(30, 2, 1, 4, {300000}, 4);
  expect_close(longc.run(causal_attention_blocked), longc.run(causal_attention_ref), 1e-4f, 1e-5f);
}

TEST(Ops, VectorisedExpWithinTwoUlpOfDoubleExp) {
  // Every float on a 1e-4 grid of [-87.3, 88.3] (1.76M values, spanning whole SIMD blocks and a
  // tail), against std::exp in double.
  std::vector<float> x;
  for (double v = -87.3; v <= 88.3; v += 1e-4) x.push_back(static_cast<float>(v));
  std::vector<float> y = x;
  exp_inplace(y.data(), y.size());
  double worst = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double ref = std::exp(static_cast<double>(x[i]));
    worst = std::max(worst, std::fabs(static_cast<double>(y[i]) - ref) / ref);
  }
  EXPECT_LT(worst, 2.0 * 5.96e-8) << "max relative error " << worst;
  // Hand values and the edges: exp(0) = 1, exp(1) = e, tiny -> 0, huge -> inf, NaN stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> e = {0.0f, 1.0f, -1.0f, -88.0f, -1000.0f, -inf, 89.0f, inf,
                          std::numeric_limits<float>::quiet_NaN()};
  exp_inplace(e.data(), e.size());
  EXPECT_EQ(e[0], 1.0f);
  EXPECT_NEAR(e[1], 2.718281828f, 3e-7f);
  EXPECT_NEAR(e[2], 0.367879441f, 5e-8f);
  EXPECT_EQ(e[3], 0.0f);
  EXPECT_EQ(e[4], 0.0f);
  EXPECT_EQ(e[5], 0.0f);
  EXPECT_EQ(e[6], inf);
  EXPECT_EQ(e[7], inf);
  EXPECT_TRUE(std::isnan(e[8]));
}

TEST(Ops, ExpShiftedSumIsOneSoftmaxRow) {
  const std::vector<float> x0 = random_vec(1001, 17, 6.0f);
  std::vector<float> x = x0;
  const float m = *std::max_element(x0.begin(), x0.end());
  const float z = exp_shifted_sum(x.data(), x.size(), m);
  double zref = 0.0;
  for (std::size_t i = 0; i < x0.size(); ++i) {
    const double e = std::exp(static_cast<double>(x0[i] - m));  // the float shift, then exp
    zref += e;
    EXPECT_NEAR(x[i], e, 2e-7 * e);
  }
  EXPECT_NEAR(z, zref, 1e-5 * zref);
  EXPECT_EQ(max_value(x0.data(), x0.size()), m);
  const float one[] = {-3.0f};
  EXPECT_EQ(max_value(one, 1), -3.0f);
}

}}  // namespace
}  // namespace kvcompact
