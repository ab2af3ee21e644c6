// Head interventions: no mask is exact; zero/uniform/scale masks equal independent weight edits
// (zeroed or scaled output-projection columns, zeroed query rows); KV heads expand to their query
// heads; mean ablation with the means of the same single position is a no-op; masking the last
// row of each call changes only the last prefill row and equals an edit from that position on.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "heads/head_intervention.h"
#include "heads/head_means.h"
#include "core/error.h"
#include "model/transformer.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::make_random_model;
using testing::small_config;

// small_config: 3 layers, 6 query heads, 2 KV heads (groups of 3), head_dim 8.
const std::vector<int> kIds = {1, 5, 9, 13, 2, 40, 7, 8, 30, 11};

std::vector<float> run(const testing::RandomModel& m, ForwardObserver* obs,
                       const std::vector<int>& ids = kIds) {
  Transformer tr(m.config, m.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  o.observer = obs;
  return tr.forward(ids, cache, o);
}

// Prefill of all but the last 3 tokens, then token-by-token decoding; returns the last logits.
std::vector<float> run_decoding(const testing::RandomModel& m, ForwardObserver* obs) {
  Transformer tr(m.config, m.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::Last;
  o.observer = obs;
  const std::size_t split = kIds.size() - 3;
  std::vector<float> last = tr.forward(std::span(kIds).first(split), cache, o);
  for (std::size_t i = split; i < kIds.size(); ++i) last = tr.forward(std::span(kIds).subspan(i, 1), cache, o);
  return last;
}

void expect_near(const std::vector<float>& a, const std::vector<float>& b, float tol) {
  ASSERT_EQ(a.size(), b.size());
  float worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(a[i] - b[i]));
  EXPECT_LE(worst, tol);
}

TEST(HeadSet, ParsesQueryKvAndLayerNames) {
  const ModelConfig c = small_config();
  const auto kv = parse_head_set("L1H1", c);
  ASSERT_EQ(kv.size(), 3u);
  EXPECT_EQ(kv[0], (QueryHeadId{1, 3}));
  EXPECT_EQ(kv[2], (QueryHeadId{1, 5}));
  EXPECT_EQ(parse_head_set("L1Q5, L1Q3,L1Q4,L1Q3", c), kv);
  EXPECT_EQ(parse_head_set("L2", c).size(), 6u);
  EXPECT_TRUE(parse_head_set("none", c).empty());
  for (const char* bad : {"L3Q0", "L0Q6", "L0H2", "X1", "L1Q", "L1Q1x", "L1Q1,,L1Q2", "L-1Q0"})
    EXPECT_THROW(parse_head_set(bad, c), Error) << bad;
  EXPECT_THROW(parse_ablation("ones"), Error);
}

TEST(HeadIntervention, NoMaskedHeadIsExact) {
  auto m = make_random_model(small_config(), 7);
  const auto plain = run(m, nullptr);
  const auto plain_dec = run_decoding(m, nullptr);
  for (Ablation a : {Ablation::Zero, Ablation::Uniform}) {
    HeadIntervention none(m.config, {}, a);
    EXPECT_EQ(run(m, &none), plain);
    EXPECT_EQ(run_decoding(m, &none), plain_dec);
  }
}

// Zeroing a query head's output == zeroing its columns of the output projection, in prefill and
// in decoding; a KV head == its query heads (also when masked by three chained interventions).
TEST(HeadIntervention, ZeroMaskEqualsZeroedOutputProjectionColumns) {
  auto m = make_random_model(small_config(), 8);
  auto z = make_random_model(small_config(), 8);
  const int hd = m.config.head_dim, qd = m.config.q_dim();
  for (int h = 3; h < 6; ++h)  // query heads of KV head 1
    for (int r = 0; r < m.config.dim; ++r)
      std::fill_n(z.weights.layers[1].wo.f32().begin() + r * qd + h * hd, hd, 0.0f);
  HeadIntervention kv(m.config, parse_head_set("L1H1", m.config), Ablation::Zero);
  const auto edited = run(z, nullptr);
  expect_near(run(m, &kv), edited, 1e-5f);
  expect_near(run_decoding(m, &kv), run_decoding(z, nullptr), 1e-5f);
  HeadIntervention a(m.config, {{1, 3}}, Ablation::Zero);
  HeadIntervention b(m.config, {{1, 4}}, Ablation::Zero, nullptr, &a);
  HeadIntervention c(m.config, {{1, 5}}, Ablation::Zero, nullptr, &b);
  EXPECT_EQ(run(m, &c), run(m, &kv));
  EXPECT_NE(run(m, &kv), run(m, nullptr));
}

// Uniform attention == a head whose queries are zero (scores 0 + beta), made by zeroing the
// query head's rows of wq; also over a cache holding beta != 0 entries (weights softmax(beta)).
TEST(HeadIntervention, UniformEqualsZeroedQueryRows) {
  auto m = make_random_model(small_config(), 9);
  auto z = make_random_model(small_config(), 9);
  const int hd = m.config.head_dim, dim = m.config.dim;
  std::fill_n(z.weights.layers[2].wq.f32().begin() + 4 * hd * dim, hd * dim, 0.0f);
  HeadIntervention u(m.config, {{2, 4}}, Ablation::Uniform);
  expect_near(run(m, &u), run(z, nullptr), 2e-5f);
  expect_near(run_decoding(m, &u), run_decoding(z, nullptr), 2e-5f);

  Transformer tm(m.config, m.weights), tz(z.config, z.weights);
  KVCache cm = tm.make_cache(), cz = tz.make_cache();
  const std::vector<int> ctx = {1, 4, 9, 16, 25}, cont = {3, 6, 9};
  tm.forward(ctx, cm);
  tz.forward(ctx, cz);
  // both caches hold the same keys/values (only layer 2's queries differ); give them beta != 0
  for (KVCache* c : {&cm, &cz})
    for (int g = 0; g < 2; ++g)
      for (std::size_t j = 0; j < c->head(2, g).beta.size(); ++j) c->head(2, g).beta[j] = 0.3f * j - 0.5f;
  ForwardOptions o;
  o.logits = LogitsMode::All;
  const auto zl = tz.forward(cont, cz, o);
  o.observer = &u;
  expect_near(tm.forward(cont, cm, o), zl, 2e-5f);
}

TEST(HeadIntervention, MeanOfTheSamePositionIsANoOpAndMeansAreAverages) {
  Model model;
  auto m = make_random_model(small_config(), 10);
  model.config = m.config;
  model.weights = m.weights;
  // One position: each head's output is its own value vector, so its mean is exactly that.
  const HeadMeans one = compute_head_means(model, {{7}});
  EXPECT_EQ(one.tokens, 1);
  HeadIntervention mean_all(m.config, all_query_heads(m.config), Ablation::Mean, &one);
  EXPECT_EQ(run(m, &mean_all, {7}), run(m, nullptr, {7}));

  // Means over two documents == plain average of captured outputs.
  struct Capture : ForwardObserver {
    std::vector<std::vector<float>> rows;  // per layer, concatenated rows
    void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override {
      if (static_cast<int>(rows.size()) <= ctx.layer) rows.resize(ctx.layer + 1);
      rows[ctx.layer].insert(rows[ctx.layer].end(), att.all().begin(), att.all().end());
    }
  } cap;
  const std::vector<std::vector<int>> docs = {{1, 2, 3, 4}, {9, 8, 7}};
  for (const auto& d : docs) run(m, &cap, d);
  const HeadMeans hm = compute_head_means(model, docs);
  EXPECT_EQ(hm.tokens, 7);
  const int width = m.config.q_dim();
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int j = 0; j < width; ++j) {
      double s = 0;
      for (int r = 0; r < 7; ++r) s += cap.rows[l][r * width + j];
      EXPECT_NEAR(hm.values[l][j], s / 7, 1e-6);
    }
  // a mean-ablated head's output is the stored mean at every position
  struct After : ForwardObserver {
    std::vector<float> got;
    void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override {
      if (ctx.layer == 1)
        for (int i = 0; i < ctx.n_tokens(); ++i) got.insert(got.end(), att.head(i, 2).begin(), att.head(i, 2).end());
    }
  } after;
  HeadIntervention mean_one(m.config, {{1, 2}}, Ablation::Mean, &hm, &after);
  run(m, &mean_one);
  ASSERT_EQ(after.got.size(), kIds.size() * m.config.head_dim);
  for (std::size_t i = 0; i < after.got.size(); ++i)
    EXPECT_EQ(after.got[i], hm.head(1, 2)[i % m.config.head_dim]);

  const std::string path = std::string(KVC_TEST_TMP) + "/head_means_test.json";
  write_head_means(path, hm);
  const HeadMeans back = read_head_means(path);
  EXPECT_EQ(back.values, hm.values);
  EXPECT_EQ(back.tokens, 7);
  HeadMeans wrong = hm;
  wrong.head_dim = 4;
  EXPECT_THROW(HeadIntervention(m.config, {{0, 0}}, Ablation::Mean, &wrong), Error);
  EXPECT_THROW(HeadIntervention(m.config, {{0, 0}}, Ablation::Mean, nullptr), Error);
  EXPECT_THROW(HeadIntervention(m.config, {{3, 0}}, Ablation::Zero), Error);
}

// Multiplies the o_proj columns of query head h of layer l by f.
void scale_output_columns(testing::RandomModel& m, int l, int h, float f) {
  const int hd = m.config.head_dim, qd = m.config.q_dim();
  for (int r = 0; r < m.config.dim; ++r)
    for (int d = 0; d < hd; ++d) m.weights.layers[l].wo.f32()[r * qd + h * hd + d] *= f;
}

TEST(HeadIntervention, ParsesScaleAblationsAndPositions) {
  EXPECT_EQ(parse_ablation_spec("zero").ablation, Ablation::Zero);
  const AblationSpec def = parse_ablation_spec("scale");
  EXPECT_EQ(def.ablation, Ablation::Scale);
  EXPECT_EQ(def.scale, 1e-4);
  EXPECT_EQ(to_string(def), "scale:0.0001");
  EXPECT_EQ(parse_ablation_spec("scale:0.5").scale, 0.5);
  EXPECT_EQ(parse_ablation_spec("scale:1").scale, 1.0);
  EXPECT_EQ(to_string(parse_ablation_spec("scale:0.25")), "scale:0.25");
  EXPECT_EQ(to_string(parse_ablation_spec("uniform")), "uniform");
  for (const char* bad : {"scale:0", "scale:1.5", "scale:-0.1", "scale:", "scale:abc", "scale:0.5x", "scale:nan"})
    EXPECT_THROW(parse_ablation_spec(bad), Error) << bad;
  try {
    parse_ablation_spec("scale:2");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "ablation \"scale:2\": the scale factor 2 is outside (0, 1]");
  }
  EXPECT_EQ(parse_mask_positions("last"), MaskPositions::Last);
  EXPECT_EQ(parse_mask_positions("all"), MaskPositions::All);
  EXPECT_THROW(parse_mask_positions("first"), Error);
  const ModelConfig c = small_config();
  EXPECT_THROW(HeadIntervention(c, {{0, 0}}, Ablation::Scale, nullptr, nullptr, {0.0, MaskPositions::All}), Error);
  EXPECT_THROW(HeadIntervention(c, {{0, 0}}, Ablation::Scale, nullptr, nullptr, {1.01, MaskPositions::All}), Error);
}

TEST(HeadIntervention, ScaleOneLeavesLogitsUnchanged) {
  auto m = make_random_model(small_config(), 11);
  HeadIntervention one(m.config, all_query_heads(m.config), Ablation::Scale, nullptr, nullptr,
                       {1.0, MaskPositions::All});
  EXPECT_EQ(run(m, &one), run(m, nullptr));
  EXPECT_EQ(run_decoding(m, &one), run_decoding(m, nullptr));
}

// Scaling a head's output by F at every position == its o_proj columns multiplied by F.
TEST(HeadIntervention, ScaleEqualsScaledOutputProjectionColumns) {
  for (const float f : {1e-4f, 0.3f}) {
    auto m = make_random_model(small_config(), 12);
    auto z = make_random_model(small_config(), 12);
    scale_output_columns(z, 1, 4, f);
    scale_output_columns(z, 2, 0, f);
    HeadIntervention iv(m.config, {{1, 4}, {2, 0}}, Ablation::Scale, nullptr, nullptr, {f, MaskPositions::All});
    expect_near(run(m, &iv), run(z, nullptr), 1e-5f);
    expect_near(run_decoding(m, &iv), run_decoding(z, nullptr), 1e-5f);
    EXPECT_NE(run(m, &iv), run(m, nullptr));
  }
}

// `last` in one prefill: every row but the last has the unmasked logits; the last row differs and
// equals a forward whose last token alone goes through the edited model.
TEST(HeadIntervention, LastChangesOnlyTheLastRowOfAPrefill) {
  auto m = make_random_model(small_config(), 13);
  auto z = make_random_model(small_config(), 13);
  scale_output_columns(z, 0, 2, 1e-4f);
  const int vocab = m.config.vocab_size, n = static_cast<int>(kIds.size());
  for (Ablation a : {Ablation::Scale, Ablation::Zero}) {
    HeadIntervention last(m.config, {{0, 2}}, a, nullptr, nullptr, {1e-4, MaskPositions::Last});
    const auto plain = run(m, nullptr), masked = run(m, &last);
    ASSERT_EQ(masked.size(), plain.size());
    for (int i = 0; i + 1 < n; ++i)
      for (int v = 0; v < vocab; ++v) ASSERT_EQ(masked[i * vocab + v], plain[i * vocab + v]) << "row " << i;
    float diff = 0;
    for (int v = 0; v < vocab; ++v) diff = std::max(diff, std::abs(masked[(n - 1) * vocab + v] - plain[(n - 1) * vocab + v]));
    EXPECT_GT(diff, 1e-3f);
  }
  // prefill of ids[0, split) + decoding one token a call under `last` == ids[0, split-1) through the
  // plain model, then ids[split-1, n) through the model with scaled columns (one shared cache)
  HeadIntervention last(m.config, {{0, 2}}, Ablation::Scale, nullptr, nullptr, {1e-4, MaskPositions::Last});
  const std::size_t split = kIds.size() - 3;
  Transformer tm(m.config, m.weights), tz(z.config, z.weights);
  KVCache cache = tm.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::Last;
  tm.forward(std::span(kIds).first(split - 1), cache, o);
  std::vector<float> want;
  for (std::size_t i = split - 1; i < kIds.size(); ++i) want = tz.forward(std::span(kIds).subspan(i, 1), cache, o);
  expect_near(run_decoding(m, &last), want, 1e-5f);
}

}}  // namespace
}  // namespace kvcompact
