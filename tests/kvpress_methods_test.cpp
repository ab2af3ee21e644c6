// kvcompact's versions of kvpress's presses against kvpress 0.5.5 itself (NVIDIA's code, run as
// installed in .venv by tests/ref/kvpress_scores.py on random keys, values and queries): the
// scores of Knorm, SnapKV, TOVA, ObservedAttention and ExpectedAttention, and the kept indices of
// those and of AdaKV over SnapKV and over ExpectedAttention(epsilon=1e-2) (kvpress's registry
// entry "expected_attention"), must equal kvpress's (scores to 1e-5 relative; ExpectedAttention,
// which un-rotates the queries, to 1e-4).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <unistd.h>
#include <vector>

#include "compaction/adakv.h"
#include "compaction/expected_attention.h"
#include "compaction/knorm.h"
#include "compaction/method_spec.h"
#include "compaction/observed_attention.h"
#include "compaction/tova.h"
#include "compaction/token_eviction.h"
#include "core/error.h"
#include "python_ref.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using nlohmann::json;

std::string fmt_args(int seed, int T, int d, int H, int g, int window, int keep, int vscale) {
  std::string s;
  for (int x : {seed, T, d, H, g, window, keep, vscale}) s += std::to_string(x) + " ";
  return s;
}

std::string fmt_spec(int window) { return "adakv:window=" + std::to_string(window); }

struct Case {
  json j;
  int T = 0, d = 0, H = 0, g = 0, window = 0, keep = 0;
  std::vector<std::vector<float>> keys, values, cq;
  std::vector<float> inv_freq;
  HeadCompactionInput input(int h) const {
    HeadCompactionInput in;
    in.keys = keys[h].data();
    in.values = values[h].data();
    in.T = T;
    in.head_dim = d;
    in.context_queries = cq[h].data();
    in.group_size = g;
    in.rope_inv_freq = inv_freq.data();
    in.rope_half_split = true;  // transformers' RoPE layout
    return in;
  }
  std::vector<double> scores(const std::string& press, int h) const {
    return j["presses"][press]["scores"][h].get<std::vector<double>>();
  }
  std::vector<int> kept(const std::string& press, int h) const {
    return j["presses"][press]["kept"][h].get<std::vector<int>>();
  }
};

Case load_case(int seed, int T, int d, int H, int g, int window, int keep, int vscale) {
  std::filesystem::create_directories(KVC_TEST_TMP);
  const std::string out = std::string(KVC_TEST_TMP) + "/kvpress_" + std::to_string(::getpid()) + "_" +
                          std::to_string(seed) + ".json";
  const std::string args = fmt_args(seed, T, d, H, g, window, keep, vscale);
  EXPECT_EQ(testing::run_python_ref("kvpress_scores.py", args, out), 0) << testing::slurp(out + ".log");
  Case c;
  c.j = json::parse(testing::slurp(out));
  c.T = T, c.d = d, c.H = H, c.g = g, c.window = window, c.keep = keep;
  for (int h = 0; h < H; ++h) {
    c.keys.push_back(c.j["keys"][h].get<std::vector<float>>());
    c.values.push_back(c.j["values"][h].get<std::vector<float>>());
    c.cq.push_back(c.j["context_queries"][h].get<std::vector<float>>());
  }
  c.inv_freq = c.j["inv_freq"].get<std::vector<float>>();
  return c;
}

// Entries [first, n) of ours and ref agree to rtol times ref's largest magnitude there.
void expect_close(const std::vector<double>& ours, const std::vector<double>& ref, double rtol, std::size_t n,
                  const std::string& what, std::size_t first = 0) {
  ASSERT_GE(ours.size(), n);
  ASSERT_GE(ref.size(), n);
  double scale = 0.0;
  for (std::size_t i = first; i < n; ++i) scale = std::max(scale, std::abs(ref[i]));
  for (std::size_t i = first; i < n; ++i)
    ASSERT_NEAR(ours[i], ref[i], rtol * scale) << what << " entry " << i;
}

class KvpressMethods : public ::testing::TestWithParam<std::vector<int>> {};

TEST_P(KvpressMethods, ScoresAndKeptIndicesEqualKvpress) {
  ASSERT_TRUE(testing::python_ready("torch transformers kvpress"));
  const std::vector<int> p = GetParam();
  const Case c = load_case(p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7]);
  const std::size_t T = static_cast<std::size_t>(c.T);
  std::vector<std::vector<double>> tova_heads, ada_heads, ada_expected_heads;
  ExpectedAttentionOptions eo_ada;
  eo_ada.epsilon = 1e-2;
  for (int h = 0; h < c.H; ++h) {
    const HeadCompactionInput in = c.input(h);
    const std::string head = "head " + std::to_string(h);
    expect_close(knorm_scores(in), c.scores("knorm", h), 1e-5, T, "knorm " + head);
    EXPECT_EQ(compact_knorm(in, c.keep).selected, c.kept("knorm", h)) << head;

    // KeyDiff, a plug-in in one file (compaction/methods/keydiff.cpp): reached through its spec.
    EXPECT_EQ(compact_head(parse_method_spec("keydiff"), in, c.keep, 0, 1, 0).selected, c.kept("keydiff", h)) << head;

    expect_close(observed_attention_scores(in), c.scores("observed", h), 1e-5, T, "observed " + head);
    EXPECT_EQ(compact_observed_attention(in, c.keep).selected, c.kept("observed", h)) << head;

    ExpectedAttentionOptions eo;  // kvpress defaults
    // The sinks carry "max + 1": kvpress takes the max over all heads, kvcompact over this head;
    // both rank them first.
    const std::vector<double> ea = expected_attention_scores(in, eo);
    expect_close(ea, c.scores("expected", h), 1e-4, T, "expected " + head, static_cast<std::size_t>(eo.n_sink));
    for (int j = 0; j < eo.n_sink; ++j)
      EXPECT_GT(ea[static_cast<std::size_t>(j)], *std::max_element(ea.begin() + eo.n_sink, ea.end()));
    EXPECT_EQ(compact_expected_attention(in, c.keep, eo).selected, c.kept("expected", h)) << head;
    ada_expected_heads.push_back(expected_attention_scores(in, eo_ada));
    expect_close(ada_expected_heads.back(), c.scores("adakv_expected", h), 1e-4, T, "adakv expected " + head,
                 static_cast<std::size_t>(eo.n_sink));

    // SnapKV: kvpress's window-mean votes (prefix) equal snapkv_press_scores; with keep > window
    // both keep the window plus the same top prefix keys.
    const SnapKvOptions so{c.window, ScorePooling{PoolKind::Avg, 5}};
    const std::vector<double> snap = snapkv_press_scores(in, so);
    expect_close(snap, c.scores("snapkv", h), 1e-5, T - static_cast<std::size_t>(c.window), "snapkv " + head);
    ASSERT_GT(c.keep, c.window);
    EXPECT_EQ(compact_snapkv(in, c.keep, so).selected, c.kept("snapkv", h)) << head;
    ada_heads.push_back(snap);

    tova_heads.push_back(tova_head_scores(in));
  }
  // TOVA: one layer ranking (kvpress repeats it for every KV head); the last key is always kept.
  const std::vector<double> tova = tova_layer_scores(tova_heads);
  expect_close(tova, c.scores("tova", 0), 1e-5, T - 1, "tova layer scores");
  EXPECT_EQ(std::max_element(tova.begin(), tova.end()) - tova.begin(), c.T - 1);
  MethodSpec tova_spec = parse_method_spec("tova");
  const auto tova_sel = layer_scoped_select(tova_spec, tova_heads, std::vector<int>(c.H, c.keep));
  MethodSpec ada_spec = parse_method_spec(fmt_spec(c.window));
  const auto ada_sel = layer_scoped_select(ada_spec, ada_heads, std::vector<int>(c.H, c.keep));
  // The sinks rank first across the layer (kvpress pads them with the layer's max + 1), also when
  // the safeguard floor(0.2 * keep) is below n_sink and one head's scores dwarf the others' (case 3).
  MethodSpec ada_expected_spec = parse_method_spec("adakv:scorer=expected,eps=0.01");
  const auto ada_expected_sel = layer_scoped_select(ada_expected_spec, ada_expected_heads, std::vector<int>(c.H, c.keep));
  int total = 0, total_expected = 0;
  for (int h = 0; h < c.H; ++h) {
    EXPECT_EQ(tova_sel[h], c.kept("tova", h)) << "tova head " << h;
    EXPECT_EQ(ada_sel[h], c.kept("adakv", h)) << "adakv head " << h;
    EXPECT_EQ(ada_expected_sel[h], c.kept("adakv_expected", h)) << "adakv expected head " << h;
    total += static_cast<int>(ada_sel[h].size());
    total_expected += static_cast<int>(ada_expected_sel[h].size());
  }
  EXPECT_EQ(total, c.H * c.keep);
  EXPECT_EQ(total_expected, c.H * c.keep);
}

INSTANTIATE_TEST_SUITE_P(RandomHeads, KvpressMethods,
                         // seed, T, head_dim, KV heads, group, window, keep, value scale of the last head
                         ::testing::Values(std::vector<int>{1, 96, 16, 2, 3, 8, 30, 1},
                                           std::vector<int>{7, 160, 32, 3, 2, 16, 40, 1},
                                           std::vector<int>{3, 128, 16, 4, 2, 8, 10, 30}));

TEST(KvpressMethods, SpecsParseAndRejectBadOptions) {
  for (const char* s : {"knorm", "tova", "observed", "expected", "adakv", "expected:future=64,sink=0,cov=0",
                        "adakv:alpha=0.5,window=32,pool=max:3", "adakv:scorer=expected,future=64,sink=2,vnorm=0"})
    EXPECT_EQ(to_string(parse_method_spec(to_string(parse_method_spec(s)))), to_string(parse_method_spec(s))) << s;
  EXPECT_EQ(to_string(parse_method_spec("expected:future=64,sink=0,cov=0")), "expected:future=64,sink=0,cov=0");
  EXPECT_THROW(parse_method_spec("adakv:alpha=1.5"), Error);
  EXPECT_EQ(to_string(parse_method_spec("adakv:eps=0.01,scorer=expected")), "adakv:scorer=expected,eps=0.01");
  EXPECT_THROW(parse_method_spec("adakv:scorer=expected,window=8"), Error);  // a SnapKV key
  EXPECT_THROW(parse_method_spec("adakv:eps=0.01"), Error);                   // an expected key, SnapKV scorer
  EXPECT_THROW(parse_method_spec("adakv:scorer=h2o"), Error);
  EXPECT_THROW(parse_method_spec("adakv:scorer=expected,eps=-1"), Error);
  EXPECT_THROW(parse_method_spec("expected:cov=2"), Error);
  EXPECT_THROW(parse_method_spec("knorm:window=3"), Error);
  EXPECT_TRUE(is_layer_scoped(parse_method_spec("tova")));
  EXPECT_FALSE(is_layer_scoped(parse_method_spec("knorm")));
  HeadCompactionInput in;  // no context queries: a clear error, not a crash
  std::vector<float> k(8 * 4, 0.5f);
  in.keys = k.data(), in.values = k.data(), in.T = 8, in.head_dim = 4;
  EXPECT_THROW(observed_attention_scores(in), Error);
  EXPECT_THROW(expected_attention_scores(in, {}), Error);
  EXPECT_THROW(compact_head(parse_method_spec("tova"), in, 2, 0, 1, 0), Error);
  EXPECT_THROW(adakv_select({{1.0, 2.0}}, {3}, 0.2), Error);
}

}}  // namespace
}  // namespace kvcompact
