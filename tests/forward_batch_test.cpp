// Transformer::forward_batch: several independent sequences in one pass (stacked rows through
// every projection, attention per sequence over its own cache) give what each sequence gives alone
// through forward(), on a Llama-style and a Gemma-3-style random model, from the embedding or
// resumed at a layer; its caches end as forward() leaves them; misuse is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/error.h"
#include "model/transformer.h"
#include "forward_test_util.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::make_random_model;
using testing::RandomModel;
using testing::small_config;
using testing::gemma_style_model;
using testing::rel_max_diff;
using testing::tokens_for;

/// Three sequences over three different caches: one after a 30-token context (positions 30..),
/// one empty (positions 0..), one after a 9-token context with a biased, compacted-looking head
/// (entries removed and beta set), so that rows of one sequence would change another's logits if
/// they leaked into its attention.
void check_batch_equals_single(const RandomModel& m) {
  const Transformer tr(m.config, m.weights);
  const int V = m.config.vocab_size;
  KVCache c0 = tr.make_cache(), c2 = tr.make_cache();
  tr.forward(tokens_for(30, V, 1), c0, {LogitsMode::None});
  tr.forward(tokens_for(9, V, 2), c2, {LogitsMode::None});
  HeadCache& h = c2.head(m.config.n_layers - 1, 0);
  h.keys.erase(h.keys.begin(), h.keys.begin() + 3 * m.config.head_dim);
  h.values.erase(h.values.begin(), h.values.begin() + 3 * m.config.head_dim);
  h.positions.erase(h.positions.begin(), h.positions.begin() + 3);
  h.beta.assign(h.positions.size(), 0.7f);
  KVCache c1 = tr.make_cache();
  const std::vector<std::vector<int>> toks = {tokens_for(11, V, 3), tokens_for(5, V, 4), tokens_for(17, V, 5)};
  const std::vector<std::vector<int>> rows = {{10, 0, 4}, {0, 1, 2, 3, 4}, {16}};

  // Each alone, on copies of the caches.
  std::vector<KVCache> alone = {c0, c1, c2};
  std::vector<float> want;
  for (int s = 0; s < 3; ++s) {
    ForwardOptions o;
    o.logits = LogitsMode::Rows;
    o.logit_rows = rows[s];
    const std::vector<float> l = tr.forward(toks[s], alone[s], o);
    want.insert(want.end(), l.begin(), l.end());
  }
  std::vector<KVCache> batched = {c0, c1, c2};
  std::vector<BatchSequence> seqs;
  for (int s = 0; s < 3; ++s) seqs.push_back(BatchSequence{toks[s], &batched[s], nullptr, rows[s]});
  const std::vector<float> got = tr.forward_batch(seqs);
  ASSERT_EQ(got.size(), (3u + 5u + 1u) * static_cast<std::size_t>(V));
  EXPECT_LT(rel_max_diff(got, want), 1e-5);
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(batched[s].next_position, alone[s].next_position);
    for (int l = 0; l < m.config.n_layers; ++l)
      for (int g = 0; g < m.config.n_kv_heads; ++g) {
        const HeadCache &a = batched[s].head(l, g), &b = alone[s].head(l, g);
        ASSERT_EQ(a.positions, b.positions);
        EXPECT_EQ(a.beta, b.beta);
        EXPECT_LT(rel_max_diff(a.keys, b.keys), 1e-5);
        EXPECT_LT(rel_max_diff(a.values, b.values), 1e-5);
      }
  }
  // The test can fail: the same batch with the third sequence's tokens changed moves its logits.
  std::vector<KVCache> other = {c0, c1, c2};
  std::vector<int> changed = toks[2];
  changed[3] = (changed[3] + 1) % V;
  std::vector<BatchSequence> seqs2;
  for (int s = 0; s < 3; ++s) seqs2.push_back(BatchSequence{s == 2 ? changed : toks[s], &other[s], nullptr, rows[s]});
  const std::vector<float> got2 = tr.forward_batch(seqs2);
  const std::size_t first_two = 8u * static_cast<std::size_t>(V);
  EXPECT_LT(rel_max_diff(std::vector<float>(got2.begin(), got2.begin() + first_two),
                         std::vector<float>(want.begin(), want.begin() + first_two)),
            1e-5);
  EXPECT_GT(rel_max_diff(std::vector<float>(got2.begin() + first_two, got2.end()),
                         std::vector<float>(want.begin() + first_two, want.end())),
            1e-4);
}

TEST(ForwardBatch, EqualsEachSequenceAloneLlamaStyle) { check_batch_equals_single(make_random_model(small_config(), 3)); }

TEST(ForwardBatch, EqualsEachSequenceAloneGemmaStyle) { check_batch_equals_single(gemma_style_model()); }

/// Hidden states entering one layer, captured from a forward.
struct Capture : ForwardObserver {
  int layer = 0;
  std::vector<float> x;
  void on_layer_input(const LayerInputView& v) override {
    if (v.layer == layer) x.assign(v.x.all().begin(), v.x.all().end());
  }
};

TEST(ForwardBatch, ResumesAtALayerFromCapturedInputs) {
  const RandomModel m = make_random_model(small_config(), 6);
  const Transformer tr(m.config, m.weights);
  const int V = m.config.vocab_size;
  KVCache ctx = tr.make_cache();
  tr.forward(tokens_for(20, V, 7), ctx, {LogitsMode::None});
  const std::vector<int> a = tokens_for(6, V, 8), b = tokens_for(9, V, 9);
  Capture ca, cb;
  ca.layer = cb.layer = 1;
  KVCache ka = ctx, kb = ctx;
  ForwardOptions oa{LogitsMode::All, &ca}, ob{LogitsMode::All, &cb};
  std::vector<float> want = tr.forward(a, ka, oa);
  const std::vector<float> wb = tr.forward(b, kb, ob);
  want.insert(want.end(), wb.begin(), wb.end());
  KVCache ra = ctx, rb = ctx;
  std::vector<BatchSequence> seqs = {{a, &ra, ca.x.data(), {0, 1, 2, 3, 4, 5}},
                                     {b, &rb, cb.x.data(), {0, 1, 2, 3, 4, 5, 6, 7, 8}}};
  EXPECT_LT(rel_max_diff(tr.forward_batch(seqs, 1), want), 1e-5);
  // Layer 0 of the resumed caches was neither read nor extended.
  EXPECT_EQ(ra.head(0, 0).length(), ctx.head(0, 0).length());
  EXPECT_EQ(ra.head(1, 0).length(), ctx.head(1, 0).length() + a.size());
}

TEST(ForwardBatch, RefusesMisuse) {
  const RandomModel m = make_random_model(small_config(), 7);
  const Transformer tr(m.config, m.weights);
  KVCache c = tr.make_cache(), d = tr.make_cache();
  const std::vector<int> t = {1, 2, 3};
  const std::vector<int> none;
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{}), Error);
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{t, &c, nullptr, {}}, {t, &c, nullptr, {}}}), Error);
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{t, nullptr, nullptr, {}}}), Error);
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{none, &c, nullptr, {}}}), Error);
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{t, &c, nullptr, {3}}}), Error);
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{t, &c, nullptr, {}}}, 1), Error);  // no layer_input
  const std::vector<int> bad = {1, 99999, 3};
  EXPECT_THROW(tr.forward_batch(std::vector<BatchSequence>{{bad, &d, nullptr, {}}}), Error);
  // Nothing was appended by the refused calls.
  EXPECT_EQ(c.head(0, 0).length(), 0u);
  EXPECT_EQ(d.next_position, 0);
}

}}  // namespace
}  // namespace kvcompact
