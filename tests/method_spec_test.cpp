#include "compaction/method_spec.h"
#include "compaction/methods/am.h"
#include "compaction/methods/h2o.h"
#include "compaction/methods/snapkv.h"
#include "compaction/methods/streaming.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "compaction/attention_matching.h"
#include "compaction/baselines.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// Expects parse_method_spec(text) to throw an Error whose message contains every fragment.
void expect_error(const std::string& text, const std::vector<std::string>& fragments) {
  try {
    parse_method_spec(text);
    ADD_FAILURE() << "no error for '" << text << "'";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    for (const std::string& f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << msg << " / " << f;
  }
}

TEST(MethodSpec, ParsesTheDocumentedExamples) {
  MethodSpec s = parse_method_spec("am:select=omp,beta=nnls-pg:iters=2:lo=-3:hi=3,c2=ridge:1e-4,recent=8");
  EXPECT_EQ(s.name(), "am");
  EXPECT_EQ(s.as<AmMethod>().options().selector, KeySelector::Omp);
  EXPECT_EQ(s.as<AmMethod>().options().beta, BetaFit::NnlsPg);
  EXPECT_EQ(s.as<AmMethod>().options().nnls.iters, 2);
  EXPECT_EQ(s.as<AmMethod>().options().nnls.lo, -3.0);
  EXPECT_EQ(s.as<AmMethod>().options().nnls.hi, 3.0);
  EXPECT_EQ(s.as<AmMethod>().options().c2.kind, ValueFit::Ridge);
  EXPECT_EQ(s.as<AmMethod>().options().c2.lambda, 1e-4);
  EXPECT_EQ(s.as<AmMethod>().options().c2.scale, RidgeScale::Sigma);
  EXPECT_EQ(s.as<AmMethod>().options().recent, 8);

  s = parse_method_spec("am:select=attn:score=mean:pool=max:5");
  EXPECT_EQ(s.as<AmMethod>().options().selector, KeySelector::Attention);
  EXPECT_EQ(s.as<AmMethod>().options().score, SelectionScore::Mean);
  EXPECT_EQ(s.as<AmMethod>().options().pool, (ScorePooling{PoolKind::Max, 5}));
  EXPECT_EQ(parse_method_spec("am"), MethodSpec{});
  EXPECT_EQ(parse_method_spec("am:c2=ridge:1e-3:fro").as<AmMethod>().options().c2.scale, RidgeScale::Fro);
  EXPECT_EQ(parse_method_spec("am:c2=ridge:0.5:fixed").as<AmMethod>().options().c2.lambda, 0.5);
  EXPECT_EQ(parse_method_spec("am:beta=nnls-exact:lo=-5").as<AmMethod>().options().nnls.lo, -5.0);
  EXPECT_EQ(parse_method_spec("random").name(), "random");
  EXPECT_EQ(parse_method_spec("recent").name(), "recent");
  EXPECT_EQ(parse_method_spec("attn-nofit:score=max").as<AmMethod>().options().score, SelectionScore::Max);

  s = parse_method_spec("snapkv:window=8:pool=max:5");
  EXPECT_EQ(s.name(), "snapkv");
  EXPECT_EQ(s.as<SnapKvMethod>().options().window, 8);
  EXPECT_EQ(s.as<SnapKvMethod>().options().pool, (ScorePooling{PoolKind::Max, 5}));
  EXPECT_EQ(parse_method_spec("streaming:sink=4").as<StreamingMethod>().sink(), 4);
  EXPECT_EQ(parse_method_spec("h2o:recent=0.25").as<H2oMethod>().recent(), 0.25);
  EXPECT_EQ(parse_method_spec("pyramidkv:beta=10").as<PyramidKvMethod>().beta(), 10.0);

  s = parse_method_spec("am:queries=repeat+context:4096+self-study+random:100+total:20000,recent=2");
  ASSERT_EQ(s.queries.sources.size(), 4u);
  EXPECT_EQ(s.queries.sources[0], (QuerySource{QuerySourceKind::Repeat, 0}));
  EXPECT_EQ(s.queries.sources[1], (QuerySource{QuerySourceKind::Context, 4096}));
  EXPECT_EQ(s.queries.sources[2], (QuerySource{QuerySourceKind::SelfStudy, 0}));
  EXPECT_EQ(s.queries.sources[3], (QuerySource{QuerySourceKind::Random, 100}));
  EXPECT_EQ(s.queries.total_cap, 20000);
  EXPECT_EQ(s.as<AmMethod>().options().recent, 2);
  EXPECT_EQ(parse_method_spec("am").queries.total_cap, 50000);
}

TEST(MethodSpec, CanonicalRoundTrip) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"am", "am"},
      {"am:select=attn:score=rms:pool=none", "am"},
      {"am:select=omp,beta=nnls-pg:iters=2:lo=-3:hi=3,c2=ridge:1e-4,recent=8",
       "am:select=omp,c2=ridge:0.0001:sigma,recent=8"},
      {"am:recent=8,select=omp", "am:select=omp,recent=8"},
      {"am:select=omp,drop=-7,schedule=progressive,refit=bounded,iters=0,hi=7",
       "am:select=omp,refit=bounded,schedule=progressive,drop=-7,iters=0,hi=7"},
      {"am:select=omp,refit=exact,schedule=single", "am:select=omp"},
      {"am:select=attn:score=rms:pool=max:5", "am:pool=max:5"},
      {"am:beta=nnls-exact:hi=2,c2=direct", "am:beta=nnls-exact,hi=2,c2=direct"},
      {"am:beta=zero", "am:beta=zero"},
      {"am:queries=repeat+context:4096+total:100", "am:queries=repeat+context:4096+total:100"},
      {"am:queries=repeat", "am"},
      {"attn-nofit:score=max,recent=3", "attn-nofit:score=max,recent=3"},
      {"snapkv:window=8:pool=max:5", "snapkv:window=8,pool=max:5"},
      {"snapkv:pool=avg:5,window=32", "snapkv"},
      {"streaming:sink=4", "streaming"},
      {"streaming:sink=0", "streaming:sink=0"},
      {"h2o:recent=0.5", "h2o"},
      {"h2o:recent=0.1", "h2o:recent=0.1"},
      {"pyramidkv:beta=20", "pyramidkv"},
      {"pyramidkv:beta=8,pool=none", "pyramidkv:beta=8,pool=none"},
      {"random", "random"},
  };
  for (const auto& [text, canonical] : cases) {
    const MethodSpec s = parse_method_spec(text);
    EXPECT_EQ(to_string(s), canonical) << text;
    EXPECT_EQ(parse_method_spec(to_string(s)), s) << text;
    EXPECT_EQ(to_string(parse_method_spec(canonical)), canonical);
  }
}

TEST(MethodSpec, BadSpecsNameTheTokenAndTheValidChoices) {
  expect_error("", {"empty"});
  expect_error("amm", {"'amm'", "am", "snapkv", "pyramidkv"});
  expect_error("am:foo=1", {"'foo'", "select", "queries"});
  expect_error("am:select=greedy", {"'greedy'", "attn", "omp"});
  expect_error("am:score=median", {"'median'", "rms, mean, max"});
  expect_error("am:beta=nnls", {"'nnls'", "nnls-pg", "nnls-exact", "zero"});
  expect_error("am:c2=svd", {"'svd'", "lsq", "ridge", "direct"});
  expect_error("am:c2=ridge:1e-4:l2", {"'l2'", "sigma", "fro", "fixed"});
  expect_error("am:c2=ridge:abc", {"'abc'"});
  expect_error("am:c2=lsq:3", {"c2=lsq"});
  expect_error("am:pool=max:4", {"4", "odd"});
  expect_error("am:pool=max", {"kernel"});
  expect_error("am:pool=mean:3", {"'mean'", "none, avg, max"});
  expect_error("am:select=omp,score=rms", {"score", "select=attn"});
  expect_error("am:refit=bounded", {"refit", "select=omp"});
  expect_error("am:drop=-7", {"drop", "select=omp"});
  expect_error("am:select=omp,schedule=fast", {"'fast'", "single, progressive"});
  expect_error("am:select=omp,refit=pg", {"'pg'", "exact, bounded"});
  expect_error("am:select=omp,refit=bounded,drop=3", {"drop", "hi"});
  expect_error("attn-nofit:select=omp,drop=-7", {"'drop'"});
  expect_error("am:beta=nnls-exact,iters=3", {"iters", "nnls-pg"});
  expect_error("am:beta=zero,lo=-1", {"lo"});
  expect_error("am:lo=2,hi=1", {"lo", "hi"});
  expect_error("am:iters=-1", {"iters", "-1"});
  expect_error("am:iters=2.5", {"'2.5'"});
  expect_error("am:recent=8,recent=4", {"recent", "twice"});
  expect_error("am:queries=repeat+web", {"'web'", "repeat, context, self-study, random"});
  expect_error("am:queries=repeat+repeat", {"repeat", "twice"});
  expect_error("am:queries=context:0", {"context", "0"});
  expect_error("am:queries=total:10", {"no source"});
  expect_error("am:,recent=1", {"empty"});
  expect_error("am:8", {"'8'"});
  expect_error("random:seed=3", {"'seed'", "none"});
  expect_error("snapkv:window=0", {"window", "0"});
  expect_error("snapkv:recent=3", {"'recent'", "window, pool"});
  expect_error("streaming:sink=-2", {"sink"});
  expect_error("h2o:recent=1.5", {"recent", "1.5"});
  expect_error("pyramidkv:beta=0.5", {"beta", "0.5"});
  expect_error("attn-nofit:beta=zero", {"'beta'"});
}

TEST(MethodSpec, HelpListsEveryFamilyAndKey) {
  const std::string help = method_help();
  for (const char* word : {"am", "random", "recent", "attn-nofit", "snapkv", "streaming", "h2o",
                           "pyramidkv", "select=attn|omp", "score=rms|mean|max", "pool=none|avg:K|max:K",
                           "nnls-exact", "iters=N", "lo=X", "ridge", "fro", "fixed", "recent=N",
                           "queries=", "self-study", "50000", "window=W", "sink=S", "beta=B"})
    EXPECT_NE(help.find(word), std::string::npos) << word;
  for (const std::string& f : method_family_names()) {
    EXPECT_EQ(parse_method_spec(f).name(), f);
    EXPECT_NE(help.find("\n" + f + " "), std::string::npos) << f;
  }
}

struct RandomHead {
  int n = 64, T = 30, d = 8, g = 2;
  std::vector<float> Q, K, V, CQ;
  explicit RandomHead(std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (auto* v : {&Q, &K, &V}) v->resize(static_cast<std::size_t>((v == &Q ? n : T) * d));
    CQ.resize(static_cast<std::size_t>(T * g * d));
    for (auto* v : {&Q, &K, &V, &CQ})
      for (float& x : *v) x = nd(rng);
  }
  HeadCompactionInput in() const {
    HeadCompactionInput x{K.data(), V.data(), Q.data(), T, n, d};
    x.context_queries = CQ.data();
    x.group_size = g;
    return x;
  }
};

TEST(MethodSpec, DispatchMatchesTheMethods) {
  const RandomHead h(7);
  const int t = 9, L = 5;
  const MethodSpec am = parse_method_spec("am:select=omp,c2=ridge:1e-4,recent=3");
  const CompactedHead a = compact_head(am, h.in(), t, 0, L, 1);
  const CompactedHead b = compact_attention_matching(h.in(), t, am.as<AmMethod>().options());
  EXPECT_EQ(a.selected, b.selected);
  EXPECT_EQ(a.values, b.values);
  EXPECT_EQ(a.beta, b.beta);
  const CompactedHead nofit = compact_head(parse_method_spec("attn-nofit"), h.in(), t, 2, L, 1);
  // attn-nofit: AM's ranking, beta 0 and the head's own values.
  EXPECT_EQ(nofit.selected, AttentionMatcher(h.in()).select(t));
  EXPECT_EQ(nofit.beta, std::vector<float>(static_cast<std::size_t>(t), 0.0f));
  for (int j = 0; j < t; ++j)
    for (int k = 0; k < h.d; ++k)
      EXPECT_EQ(nofit.values[static_cast<std::size_t>(j * h.d + k)], h.V[static_cast<std::size_t>(nofit.selected[j] * h.d + k)]);
  EXPECT_EQ(compact_head(parse_method_spec("random"), h.in(), t, 0, L, 99).selected,
            compact_random(h.in(), t, 99).selected);
  EXPECT_EQ(compact_head(parse_method_spec("recent"), h.in(), t, 0, L, 0).selected,
            compact_recent(h.in(), t).selected);
  EXPECT_EQ(compact_head(parse_method_spec("streaming:sink=2"), h.in(), t, 0, L, 0).selected,
            compact_streaming(h.in(), t, 2).selected);
  EXPECT_EQ(compact_head(parse_method_spec("h2o"), h.in(), t, 0, L, 0).selected,
            compact_h2o(h.in(), t, 0.5).selected);
  const MethodSpec snap = parse_method_spec("snapkv:window=4");
  EXPECT_EQ(compact_head(snap, h.in(), t, 0, L, 0).selected, compact_snapkv(h.in(), t, snap.as<SnapKvMethod>().options()).selected);
  // PyramidKV: per-layer budgets with the uniform total.
  const MethodSpec pyr = parse_method_spec("pyramidkv:beta=4,window=2");
  int total = 0;
  for (int layer = 0; layer < L; ++layer) {
    const int b_l = method_budget(pyr, t, h.T, layer, L);
    EXPECT_EQ(compact_head(pyr, h.in(), t, layer, L, 0).size(), b_l);
    total += b_l;
  }
  EXPECT_EQ(total, L * t);
  EXPECT_GT(method_budget(pyr, t, h.T, 0, L), method_budget(pyr, t, h.T, L - 1, L));
  EXPECT_EQ(method_budget(am, t, h.T, 3, L), t);
  EXPECT_THROW(compact_head(am, h.in(), t, L, L, 0), Error);  // layer out of range
  EXPECT_THROW(compact_head(am, h.in(), h.T + 1, 0, L, 0), Error);
  EXPECT_TRUE(uses_reference_queries(am));
  EXPECT_FALSE(uses_context_queries(am));
  EXPECT_TRUE(uses_context_queries(pyr));
  EXPECT_FALSE(uses_context_queries(parse_method_spec("streaming")));
}

}}  // namespace
}  // namespace kvcompact
