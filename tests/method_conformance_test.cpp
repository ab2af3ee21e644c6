// Conformance of every registered compaction method (compaction/methods/registry.cpp): the same
// invariants for each plug-in, so a new method is checked the moment it is registered.
//  - its spec round-trips (name -> to_string -> parse) and `kvcompact methods` lists it and its keys;
//  - per-head methods: budget b gives b entries, sorted distinct indices, C1 = K[selected] exactly;
//    methods that do not fit keep beta 0 and their own values; keeping every entry reproduces the
//    cache (exactly, or to 1e-3 for Attention Matching's fit); prepare() gives what compact() gives;
//  - layer-scoped methods refuse compact_head and give each head its budget via layer_select;
//  - a budget above T, a NaN key and an unknown key are errors.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compaction/method_spec.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

struct Head {
  int T = 40, d = 8, g = 2, n = 48;
  std::vector<float> K, V, Q, CQ, inv_freq;
  explicit Head(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    K.resize(static_cast<std::size_t>(T * d)), V.resize(K.size()), Q.resize(static_cast<std::size_t>(n * d));
    CQ.resize(static_cast<std::size_t>(T * g * d));
    for (auto* v : {&K, &V, &Q, &CQ})
      for (float& x : *v) x = nd(rng);
    for (int j = 0; j < d / 2; ++j) inv_freq.push_back(std::pow(10000.0f, -2.0f * j / d));
  }
  HeadCompactionInput in() const {
    HeadCompactionInput x{K.data(), V.data(), Q.data(), T, n, d};
    x.context_queries = CQ.data();
    x.group_size = g;
    x.rope_inv_freq = inv_freq.data();
    return x;
  }
};

class EveryMethod : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryMethod, SpecRoundTripsAndHelpListsIt) {
  const std::string& name = GetParam();
  const MethodSpec spec = parse_method_spec(name);
  EXPECT_EQ(spec.name(), name);
  EXPECT_EQ(to_string(spec), name);  // defaults print as the bare family
  EXPECT_EQ(parse_method_spec(to_string(spec)), spec);
  const std::string help = method_help();
  EXPECT_NE(help.find("\n" + name + " "), std::string::npos);
  for (const MethodOption& o : spec.method->info().options)
    EXPECT_NE(help.find("  " + o.key + "="), std::string::npos) << name << " " << o.key;
}

TEST_P(EveryMethod, KeepsItsBudgetWithTheOriginalKeys) {
  const MethodSpec spec = parse_method_spec(GetParam());
  const Head h(11);
  const HeadCompactionInput in = h.in();
  if (spec.method->layer_scoped()) {
    EXPECT_THROW(compact_head(spec, in, 5, 0, 1, 0), Error);
    std::vector<std::vector<double>> scores;
    for (int k = 0; k < 3; ++k) scores.push_back(layer_scoped_head_scores(spec, in));
    const std::vector<int> budgets{3, 7, 12};
    const auto sel = layer_scoped_select(spec, scores, budgets);
    ASSERT_EQ(sel.size(), 3u);
    int total = 0;
    for (const auto& s : sel) {
      total += static_cast<int>(s.size());
      for (std::size_t i = 1; i < s.size(); ++i) EXPECT_LT(s[i - 1], s[i]);
    }
    EXPECT_EQ(total, 3 + 7 + 12);  // adakv moves budget between heads, the layer total stays
    return;
  }
  const bool fits = spec.name() == "am";
  const auto prepared = spec.method->prepare(in, h.T, 5);
  for (int b : {0, 1, 9, h.T / 2, h.T}) {
    const CompactedHead c = compact_head(spec, in, b, 0, 1, 5);
    ASSERT_EQ(c.size(), b) << spec.name();
    ASSERT_EQ(c.keys.size(), static_cast<std::size_t>(b * h.d));
    ASSERT_EQ(c.values.size(), c.keys.size());
    ASSERT_EQ(c.beta.size(), static_cast<std::size_t>(b));
    for (int i = 0; i < b; ++i) {
      const int j = c.selected[i];
      ASSERT_TRUE(j >= 0 && j < h.T);
      if (i > 0) {
        ASSERT_LT(c.selected[i - 1], j);
      }
      for (int k = 0; k < h.d; ++k) {
        ASSERT_EQ(c.keys[i * h.d + k], h.K[j * h.d + k]) << spec.name();
        if (!fits) {
          ASSERT_EQ(c.values[i * h.d + k], h.V[j * h.d + k]) << spec.name();
        }
      }
      if (!fits) {
        ASSERT_EQ(c.beta[i], 0.0f) << spec.name();
      }
    }
    const CompactedHead p = prepared->compact(b);
    EXPECT_EQ(p.selected, c.selected) << spec.name() << " b=" << b;
    EXPECT_EQ(p.values, c.values) << spec.name() << " b=" << b;
    EXPECT_EQ(p.beta, c.beta) << spec.name() << " b=" << b;
  }
  // Keeping every entry reproduces the cache (AM: its fit recovers beta ~ 0 and V).
  const CompactedHead all = compact_head(spec, in, h.T, 0, 1, 5);
  for (std::size_t i = 0; i < all.values.size(); ++i) EXPECT_NEAR(all.values[i], h.V[i], fits ? 1e-3 : 0.0);
  for (float b : all.beta) EXPECT_NEAR(b, 0.0f, fits ? 1e-3 : 0.0);
}

TEST_P(EveryMethod, BadInputIsAnError) {
  const MethodSpec spec = parse_method_spec(GetParam());
  Head h(3);
  EXPECT_THROW(compact_head(spec, h.in(), h.T + 1, 0, 1, 0), Error);
  EXPECT_THROW(compact_head(spec, h.in(), 4, 1, 1, 0), Error);  // layer outside [0, n_layers)
  if (!spec.method->layer_scoped()) {
    h.K[5] = std::numeric_limits<float>::quiet_NaN();
    EXPECT_THROW(compact_head(spec, h.in(), 4, 0, 1, 0), Error) << spec.name();
  }
  try {
    (void)parse_method_spec(GetParam() + ":nosuchkey=1");
    ADD_FAILURE() << "unknown key accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown key 'nosuchkey'"), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryMethod, ::testing::ValuesIn(method_family_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           std::string s = p.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}}  // namespace
}  // namespace kvcompact
