#include "compaction/attention_matching.h"

#include <gtest/gtest.h>

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "compaction/baselines.h"
#include "compaction/head_attention.h"
#include "compaction/head_compaction.h"
#include "compaction/least_squares.h"
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

struct Head {
  int n, T, d;
  std::vector<float> Q, K, V;
  HeadCompactionInput in() const { return {K.data(), V.data(), Q.data(), T, n, d}; }
};

Head random_head(int n, int T, int d, std::uint64_t seed, float key_scale = 2.0f) {
  return {n, T, d, random_matrix(n, d, seed, 1.0f), random_matrix(T, d, seed + 1, key_scale),
          random_matrix(T, d, seed + 2, 1.0f)};
}

// ||a - b||_F / ||b||_F
double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    den += double(b[i]) * b[i];
  }
  return std::sqrt(num / den);
}

TEST(KeptEntries, EdgeCases) {
  EXPECT_EQ(kept_entries(0.0, 100), 0);
  EXPECT_EQ(kept_entries(1e-6, 100), 1);  // tiny ratio keeps at least one
  EXPECT_EQ(kept_entries(1.0, 100), 100);
  EXPECT_EQ(kept_entries(0.25, 100), 25);
  EXPECT_EQ(kept_entries(0.3, 10), 3);    // 0.3 * 10 = 2.9999999999999996 in binary
  EXPECT_EQ(kept_entries(0.259, 10), 2);  // floor
  EXPECT_EQ(kept_entries(0.5, 0), 0);
  EXPECT_THROW(kept_entries(1.5, 10), Error);
  EXPECT_THROW(kept_entries(-0.1, 10), Error);
  EXPECT_THROW(kept_entries(std::nan(""), 10), Error);
  EXPECT_THROW(kept_entries(0.5, -1), Error);
}

TEST(AttentionMatching, FullSizeReproducesTheHead) {
  const Head h = random_head(128, 32, 16, 100);
  const CompactedHead c = compact_attention_matching(h.in(), h.T);
  ASSERT_EQ(c.size(), h.T);
  for (int j = 0; j < h.T; ++j) {
    EXPECT_EQ(c.selected[j], j);
    EXPECT_GE(c.beta[j], -3.0f);
    EXPECT_LE(c.beta[j], 3.0f);
    EXPECT_NEAR(c.beta[j], 0.0f, 1e-5);
  }
  EXPECT_LT(rel_error(c.values, h.V), 1e-4);
  const std::vector<float> y = compacted_attention_output(c, h.Q.data(), h.n, h.d);
  EXPECT_LT(rel_error(y, original_attention_output(h.in())), 1e-4);
}

TEST(AttentionMatching, FitBeatsNoFitAtQuarterSize) {
  for (std::uint64_t seed : {200u, 300u, 400u}) {
    const Head h = random_head(256, 64, 16, seed);
    const int t = h.T / 4;
    const std::vector<float> y = original_attention_output(h.in());
    const CompactedHead am = compact_attention_matching(h.in(), t);
    const CompactedHead nofit = compact_attn_nofit(h.in(), t);
    EXPECT_EQ(am.selected, nofit.selected);
    const double e_am = rel_error(compacted_attention_output(am, h.Q.data(), h.n, h.d), y);
    const double e_nofit = rel_error(compacted_attention_output(nofit, h.Q.data(), h.n, h.d), y);
    EXPECT_LT(e_am, e_nofit) << "seed " << seed;
    for (float b : am.beta) {
      EXPECT_GE(b, -3.0f);
      EXPECT_LE(b, 3.0f);
    }
  }
}

TEST(AttentionMatching, BetaIsLogOfACopyCount) {
  // An entry with beta = log 3 attends exactly like three copies of it with beta = 0.
  const Head h = random_head(20, 5, 8, 500);
  CompactedHead weighted = head_from_selection(h.in(), {0, 2, 4});
  weighted.beta[1] = static_cast<float>(std::log(3.0));
  CompactedHead copies = head_from_selection(h.in(), {0, 2, 4});
  for (int rep = 0; rep < 2; ++rep) {
    copies.selected.push_back(2);
    copies.beta.push_back(0.0f);
    copies.keys.insert(copies.keys.end(), h.K.begin() + 2 * h.d, h.K.begin() + 3 * h.d);
    copies.values.insert(copies.values.end(), h.V.begin() + 2 * h.d, h.V.begin() + 3 * h.d);
  }
  const std::vector<float> a = compacted_attention_output(weighted, h.Q.data(), h.n, h.d);
  const std::vector<float> b = compacted_attention_output(copies, h.Q.data(), h.n, h.d);
  const std::vector<float> plain = compacted_attention_output(
      head_from_selection(h.in(), {0, 2, 4}), h.Q.data(), h.n, h.d);
  EXPECT_LT(rel_error(a, b), 1e-6);
  EXPECT_GT(rel_error(a, plain), 1e-3);  // the bias does change the output
}

TEST(AttentionMatching, EveryMethodKeepsExactlyTDistinctSortedEntries) {
  const Head h = random_head(48, 24, 8, 600);
  const AttentionMatcher matcher(h.in());
  ASSERT_EQ(matcher.ranking().size(), 24u);
  std::vector<int> previous;
  for (int t = 0; t <= h.T; ++t) {
    const std::vector<CompactedHead> heads = {matcher.compact(t), compact_attention_matching(h.in(), t),
                                              compact_random(h.in(), t, 42), compact_recent(h.in(), t),
                                              compact_attn_nofit(h.in(), t)};
    for (const CompactedHead& c : heads) {
      ASSERT_EQ(c.size(), t);
      ASSERT_EQ(c.keys.size(), static_cast<std::size_t>(t * h.d));
      ASSERT_EQ(c.values.size(), static_cast<std::size_t>(t * h.d));
      ASSERT_EQ(c.beta.size(), static_cast<std::size_t>(t));
      for (int j = 0; j < t; ++j) {
        EXPECT_GE(c.selected[j], 0);
        EXPECT_LT(c.selected[j], h.T);
        if (j > 0) {
          EXPECT_LT(c.selected[j - 1], c.selected[j]);
        }
        for (int k = 0; k < h.d; ++k) EXPECT_EQ(c.keys[j * h.d + k], h.K[c.selected[j] * h.d + k]);
        EXPECT_GE(c.beta[j], -3.0f);
        EXPECT_LE(c.beta[j], 3.0f);
      }
    }
    EXPECT_EQ(heads[0].selected, heads[1].selected);
    // Nested selections: the keys kept at t are kept at t + 1.
    EXPECT_TRUE(std::includes(heads[0].selected.begin(), heads[0].selected.end(), previous.begin(),
                              previous.end()));
    previous = heads[0].selected;
  }
}

TEST(AttentionMatching, BadInputThrows) {
  const Head h = random_head(8, 6, 4, 700);
  EXPECT_THROW(compact_attention_matching(h.in(), 7), Error);
  EXPECT_THROW(compact_attention_matching(h.in(), -1), Error);
  HeadCompactionInput empty{nullptr, nullptr, h.Q.data(), 0, h.n, h.d};
  EXPECT_THROW(compact_attention_matching(empty, 1), Error);
  EXPECT_EQ(compact_attention_matching(empty, 0).size(), 0);
  HeadCompactionInput no_queries = h.in();
  no_queries.n_queries = 0;
  EXPECT_THROW(compact_attention_matching(no_queries, 2), Error);
  HeadCompactionInput bad_dim = h.in();
  bad_dim.head_dim = 0;
  EXPECT_THROW(compact_attention_matching(bad_dim, 2), Error);
  Head nan_head = h;
  nan_head.K[5] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compact_attention_matching(nan_head.in(), 2), Error);
  nan_head = h;
  nan_head.Q[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_THROW(compact_attention_matching(nan_head.in(), 2), Error);
  const AttentionMatcher m(h.in());
  EXPECT_THROW(m.fit({2, 1}), Error);  // not sorted
  EXPECT_THROW(m.fit({0, 6}), Error);  // out of range
}

AttentionMatchingOptions variant(KeySelector sel, BetaFit beta, ValueFit c2, int recent) {
  AttentionMatchingOptions o;
  o.selector = sel;
  o.beta = beta;
  o.c2.kind = c2;
  o.recent = recent;
  return o;
}

TEST(AttentionMatchingVariants, FullSizeReproducesTheHeadForEveryFit) {
  const Head h = random_head(128, 32, 16, 800);
  const std::vector<float> y = original_attention_output(h.in());
  for (KeySelector sel : {KeySelector::Attention, KeySelector::Omp})
    for (BetaFit beta : {BetaFit::NnlsPg, BetaFit::NnlsExact, BetaFit::Zero})
      for (ValueFit c2 : {ValueFit::Lsq, ValueFit::Ridge, ValueFit::Direct})
        for (int recent : {0, 5}) {
          AttentionMatchingOptions o = variant(sel, beta, c2, recent);
          o.c2.lambda = 1e-9;
          const CompactedHead c = compact_attention_matching(h.in(), h.T, o);
          ASSERT_EQ(c.size(), h.T);
          for (int j = 0; j < h.T; ++j) EXPECT_NEAR(c.beta[j], 0.0f, 1e-5);
          EXPECT_LT(rel_error(compacted_attention_output(c, h.Q.data(), h.n, h.d), y), 1e-4)
              << int(sel) << " " << int(beta) << " " << int(c2) << " " << recent;
        }
}

TEST(AttentionMatchingVariants, RecentWindowIsVerbatim) {
  const Head h = random_head(96, 40, 8, 810);
  const int w = 6;
  for (KeySelector sel : {KeySelector::Attention, KeySelector::Omp}) {
    const AttentionMatchingOptions o = variant(sel, BetaFit::NnlsPg, ValueFit::Lsq, w);
    const AttentionMatcher m(h.in(), o);
    EXPECT_EQ(m.ranking().size(), static_cast<std::size_t>(h.T - w));
    for (int t : {1, 4, 6, 7, 12, 20}) {
      const CompactedHead c = m.compact(t);
      ASSERT_EQ(c.size(), t);
      const int kept_window = std::min(t, w);
      for (int r = 0; r < kept_window; ++r) {
        const int j = t - kept_window + r, idx = h.T - kept_window + r;
        EXPECT_EQ(c.selected[j], idx);
        EXPECT_EQ(c.beta[j], 0.0f);
        for (int k = 0; k < h.d; ++k) {
          EXPECT_EQ(c.values[j * h.d + k], h.V[idx * h.d + k]);
          EXPECT_EQ(c.keys[j * h.d + k], h.K[idx * h.d + k]);
        }
      }
      for (int j = 0; j < t - kept_window; ++j) EXPECT_LT(c.selected[j], h.T - w);
    }
    // The fit helps: AM with the window beats keeping the same entries with beta 0 and V.
    const CompactedHead am = m.compact(16);
    const CompactedHead nofit = head_from_selection(h.in(), am.selected);
    const std::vector<float> y = original_attention_output(h.in());
    EXPECT_LT(rel_error(compacted_attention_output(am, h.Q.data(), h.n, h.d), y),
              rel_error(compacted_attention_output(nofit, h.Q.data(), h.n, h.d), y));
  }
}

TEST(AttentionMatchingVariants, KeysThatWouldOverflowFloat32LogitsAreAClearError) {
  // Keys scaled by 1e20 give logits whose float32 rounding alone exceeds exp's range (the fit would
  // see Inf and NaN): refused up front, naming the sizes. A scale of 1e3 is still fine.
  Head h = random_head(40, 16, 8, 900);
  for (float& x : h.K) x *= 1e3f;
  EXPECT_NO_THROW(compact_attention_matching(h.in(), 4));
  for (float& x : h.K) x *= 1e17f;
  try {
    compact_attention_matching(h.in(), 4);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("overflow float32"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("max |K|"), std::string::npos) << e.what();
  }
}

TEST(AttentionMatchingVariants, RecentWindowMassTargetIsThePrefixMass) {
  // With every prefix key kept and exact NNLS, the fitted weights reproduce the prefix mass, so the
  // compacted head's total mass equals the original Z_i (window entries contribute their own).
  const Head h = random_head(64, 20, 8, 820);
  AttentionMatchingOptions o = variant(KeySelector::Attention, BetaFit::NnlsExact, ValueFit::Lsq, 4);
  const CompactedHead c = compact_attention_matching(h.in(), h.T, o);
  const HeadAttentionStats st = compute_head_attention(h.in());
  for (int i = 0; i < h.n; i += 7) {
    double z = 0;
    for (int j = 0; j < h.T; ++j) {
      double s = 0;
      for (int k = 0; k < h.d; ++k) s += double(h.Q[i * h.d + k]) * c.keys[j * h.d + k];
      z += std::exp(s / std::sqrt(double(h.d)) + c.beta[j] - st.row_max[i]);
    }
    EXPECT_NEAR(z, st.mass[i], 1e-5 * st.mass[i]);
  }
}

TEST(AttentionMatchingVariants, OptionsChangeWhatTheyShould) {
  const Head h = random_head(200, 48, 8, 830);
  const int t = 12;
  const AttentionMatchingOptions base;
  const CompactedHead plain = compact_attention_matching(h.in(), t, base);
  // beta = zero: all zero; c2 = direct: original values; both: attn-nofit.
  AttentionMatchingOptions o = base;
  o.beta = BetaFit::Zero;
  const CompactedHead zero = compact_attention_matching(h.in(), t, o);
  for (float b : zero.beta) EXPECT_EQ(b, 0.0f);
  o.c2.kind = ValueFit::Direct;
  const CompactedHead nofit = compact_attention_matching(h.in(), t, o);
  const CompactedHead ref = compact_attn_nofit(h.in(), t);
  EXPECT_EQ(nofit.selected, ref.selected);
  EXPECT_EQ(nofit.values, ref.values);
  EXPECT_EQ(nofit.beta, ref.beta);
  // nnls-exact keeps beta in [lo, hi] and fits the mass at least as well as 2 PG steps.
  o = base;
  o.beta = BetaFit::NnlsExact;
  const CompactedHead exact = compact_attention_matching(h.in(), t, o);
  EXPECT_EQ(exact.selected, plain.selected);
  for (float b : exact.beta) {
    EXPECT_GE(b, -3.0f);
    EXPECT_LE(b, 3.0f);
  }
  // Pooling and score change the ranking source; OMP picks a different set here.
  o = base;
  o.selector = KeySelector::Omp;
  const CompactedHead omp = compact_attention_matching(h.in(), t, o);
  EXPECT_EQ(omp.size(), t);
  // Ridge with a large fixed lambda shrinks C2 towards 0.
  o = base;
  o.c2.kind = ValueFit::Ridge;
  o.c2.scale = RidgeScale::Fixed;
  o.c2.lambda = 1e6;
  const CompactedHead ridge = compact_attention_matching(h.in(), t, o);
  double norm = 0;
  for (float v : ridge.values) norm += double(v) * v;
  EXPECT_LT(std::sqrt(norm), 1e-2);
  o.recent = -1;
  EXPECT_THROW(compact_attention_matching(h.in(), t, o), Error);
  o = base;
  o.pool = {PoolKind::Avg, 2};
  EXPECT_THROW(compact_attention_matching(h.in(), t, o), Error);
}

TEST(AttentionMatchingVariants, RecentWindowC2IsTheShareWeightedPrefixFit) {
  // Plain reference of the documented fit: rows weighted by a_i = Z^P_i / Z_i, target Y^P_i.
  const Head h = random_head(80, 20, 4, 840);
  const int w = 5, P = h.T - w, t = 10;
  const AttentionMatchingOptions o = variant(KeySelector::Attention, BetaFit::Zero, ValueFit::Lsq, w);
  const CompactedHead c = compact_attention_matching(h.in(), t, o);
  std::vector<int> sel;
  for (int j : c.selected)
    if (j < P) sel.push_back(j);
  ASSERT_EQ(static_cast<int>(sel.size()), t - w);
  const int k = static_cast<int>(sel.size());
  std::vector<double> A(h.n * k), B(h.n * h.d);
  for (int i = 0; i < h.n; ++i) {
    std::vector<double> e(h.T);
    double m = -1e300;
    for (int j = 0; j < h.T; ++j) {
      double s = 0;
      for (int c2 = 0; c2 < h.d; ++c2) s += double(h.Q[i * h.d + c2]) * h.K[j * h.d + c2];
      e[j] = s / 2.0;  // 1/sqrt(4)
      m = std::max(m, e[j]);
    }
    double Z = 0, ZP = 0, zs = 0;
    for (int j = 0; j < h.T; ++j) {
      e[j] = std::exp(e[j] - m);
      Z += e[j];
      if (j < P) ZP += e[j];
    }
    for (int j : sel) zs += e[j];
    const double a = ZP / Z;
    for (int r = 0; r < k; ++r) A[i * k + r] = a * e[sel[r]] / zs;
    for (int c2 = 0; c2 < h.d; ++c2) {
      double np = 0;
      for (int j = 0; j < P; ++j) np += e[j] * h.V[j * h.d + c2];
      B[i * h.d + c2] = a * np / ZP;
    }
  }
  const std::vector<double> ref = solve_least_squares(A.data(), h.n, k, B.data(), h.d);
  for (int r = 0; r < k; ++r)
    for (int c2 = 0; c2 < h.d; ++c2)
      EXPECT_NEAR(c.values[r * h.d + c2], ref[r * h.d + c2], 1e-4 * (1 + std::fabs(ref[r * h.d + c2])));
}

TEST(AttentionMatchingVariants, SharedGramGivesTheSameFitsForNestedBudgets) {
  // share_gram takes the beta fit's normal equations from one Gram matrix of the top-m ranked keys;
  // every budget's fit must match the fit that computes its own Gram (to rounding), with and
  // without a recent window, and past m (keys outside the shared block) it computes its own.
  const Head h = random_head(600, 200, 16, 850);
  for (int recent : {0, 10}) {
    AttentionMatchingOptions o;
    o.recent = recent;
    const AttentionMatcher plain(h.in(), o);
    AttentionMatcher shared(h.in(), o);
    shared.share_gram(80);
    double worst_beta = 0, worst_v = 0;
    for (int t : {1, 12, 40, 80, 81, 150}) {
      const CompactedHead a = plain.compact(t), b = shared.compact(t);
      ASSERT_EQ(a.selected, b.selected) << "t " << t;
      for (std::size_t j = 0; j < a.beta.size(); ++j)
        worst_beta = std::max(worst_beta, std::fabs(double(a.beta[j]) - b.beta[j]));
      worst_v = std::max(worst_v, rel_error(b.values, a.values));
      if (t > 80) {  // outside the shared block: computed as without it, bit for bit
        EXPECT_EQ(a.beta, b.beta) << "t " << t;
        EXPECT_EQ(a.values, b.values) << "t " << t;
      }
    }
    EXPECT_LT(worst_beta, 1e-5) << "recent " << recent;
    EXPECT_LT(worst_v, 1e-5) << "recent " << recent;
    shared.drop_shared_gram();
    const CompactedHead a = plain.compact(40), b = shared.compact(40);
    EXPECT_EQ(a.beta, b.beta);
    EXPECT_EQ(a.values, b.values);
    std::printf("recent %d: shared-Gram fits differ by <= %.2e in beta, %.2e relative in C2\n", recent, worst_beta, worst_v);
  }
}

}}  // namespace
}  // namespace kvcompact
