// Patching head scores (heads/patching_scores.h): a head's score is the gold answer's NLL
// increase when that head alone is masked, checked against NLLs computed here from two separate
// plain forwards (an edited model or a hand-written observer), with a log-softmax written here.
#include <gtest/gtest.h>

#include <cmath>

#include "heads/patching_scores.h"
#include "core/error.h"
#include "model/transformer.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::make_random_model;
using testing::small_config;

// small_config: 3 layers x 6 query heads, 2 KV heads, head_dim 8, vocab 61.
const std::vector<int> kIds = {1, 5, 9, 13, 2, 40, 7, 8, 30, 11};
constexpr int kPrompt = 6;  // ids[0, 6) prompt, ids[6, 10) answer

// Sum over the answer tokens of -log softmax(logits row p-1)[ids[p]], rows from one full forward.
double answer_nll_by_hand(const ModelConfig& c, const ModelWeights& w, ForwardObserver* obs) {
  Transformer tr(c, w);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  o.observer = obs;
  const std::vector<float> logits = tr.forward(kIds, cache, o);
  double total = 0;
  for (std::size_t p = kPrompt; p < kIds.size(); ++p) {
    const float* row = logits.data() + (p - 1) * c.vocab_size;
    double mx = -INFINITY, sum = 0;
    for (int v = 0; v < c.vocab_size; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (int v = 0; v < c.vocab_size; ++v) sum += std::exp(row[v] - mx);
    total += std::log(sum) + mx - row[kIds[p]];
  }
  return total;
}

// Multiplies head h of layer l's attention output by f at positions >= from (written here, not
// HeadIntervention).
struct ScaleFrom : ForwardObserver {
  int layer, head, from;
  float f;
  ScaleFrom(int l, int h, int p, float factor) : layer(l), head(h), from(p), f(factor) {}
  void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override {
    if (ctx.layer != layer) return;
    for (int i = 0; i < ctx.n_tokens(); ++i)
      if (ctx.first_position + i >= from)
        for (float& x : att.head(i, head)) x *= f;
  }
};

Model as_model(const testing::RandomModel& m) {
  Model model;
  model.config = m.config;
  model.weights = m.weights;
  return model;
}

TEST(PatchingScores, ZeroAtAllPositionsEqualsZeroedOutputColumns) {
  auto m = make_random_model(small_config(), 21);
  const Model model = as_model(m);
  PatchingOptions opt;
  opt.ablation = Ablation::Zero;
  opt.positions = MaskPositions::All;
  const PatchingProbeResult r = patching_probe(model, {kIds, kPrompt}, opt);
  EXPECT_EQ(r.answer_tokens, 4);
  const double base = answer_nll_by_hand(m.config, m.weights, nullptr);
  EXPECT_NEAR(r.base_nll, base, 1e-4);
  for (auto [l, h] : {std::pair{0, 0}, std::pair{1, 3}, std::pair{2, 5}}) {
    auto z = make_random_model(small_config(), 21);
    const int hd = z.config.head_dim, qd = z.config.q_dim();
    for (int row = 0; row < z.config.dim; ++row)
      std::fill_n(z.weights.layers[l].wo.f32().begin() + row * qd + h * hd, hd, 0.0f);
    const double masked = answer_nll_by_hand(z.config, z.weights, nullptr);
    EXPECT_NEAR(r.masked_nll[l * 6 + h] - r.base_nll, masked - base, 1e-4) << l << "," << h;
  }
}

TEST(PatchingScores, ScaleAtTheAnswerPositionsEqualsTwoPlainForwards) {
  auto m = make_random_model(small_config(), 22);
  const Model model = as_model(m);
  const PatchingProbeResult r = patching_probe(model, {kIds, kPrompt}, PatchingOptions{});  // scale 1e-4, last
  const double base = answer_nll_by_hand(m.config, m.weights, nullptr);
  EXPECT_NEAR(r.base_nll, base, 1e-4);
  double spread = 0;
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 6; ++h) {
      ScaleFrom obs(l, h, kPrompt - 1, 1e-4f);  // rows predicting the answer: the prompt's last token on
      const double masked = answer_nll_by_hand(m.config, m.weights, &obs);
      EXPECT_NEAR(r.masked_nll[l * 6 + h] - r.base_nll, masked - base, 1e-4) << l << "," << h;
      spread = std::max(spread, std::abs(masked - base));
    }
  EXPECT_GT(spread, 1e-3);  // masking does something
}

TEST(PatchingScores, RanksTheMeanDropOverItems) {
  auto m = make_random_model(small_config(), 23);
  const Model model = as_model(m);
  const std::vector<PatchingProbe> probes = {{kIds, kPrompt}, {{1, 4, 4, 9, 33, 2}, 3}, {{1, 2}, 2}};  // last: no answer
  const PatchingProbeResult a = patching_probe(model, probes[0], {}), b = patching_probe(model, probes[1], {});
  EXPECT_EQ(patching_probe(model, probes[2], {}).answer_tokens, 0);
  int calls = 0;
  const HeadScores s = patching_scores(model, probes, {}, [&](int done, int total) {
    ++calls;
    EXPECT_EQ(total, 3);
    EXPECT_EQ(done, calls);
  });
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(s.method, "patching");
  EXPECT_EQ(s.items, 2);
  ASSERT_EQ(s.ranked.size(), 18u);
  for (std::size_t i = 0; i < s.ranked.size(); ++i) {
    const int idx = s.ranked[i].head.layer * 6 + s.ranked[i].head.head;
    const double want = ((a.masked_nll[idx] - a.base_nll) + (b.masked_nll[idx] - b.base_nll)) / 2;
    EXPECT_NEAR(s.ranked[i].score, want, 1e-9);
    if (i > 0) {
      EXPECT_GE(s.ranked[i - 1].score, s.ranked[i].score);
    }
  }
  EXPECT_THROW(patching_scores(model, {probes[2]}, {}), Error);
  PatchingOptions mean;
  mean.ablation = Ablation::Mean;
  EXPECT_THROW(patching_probe(model, probes[0], mean), Error);
  PatchingOptions big;
  big.scale = 2;
  EXPECT_THROW(patching_probe(model, probes[0], big), Error);
}

}}  // namespace
}  // namespace kvcompact
