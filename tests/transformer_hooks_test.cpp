// Forward-pass hooks: resuming at a layer from captured hidden states, and editing the attention
// output before the output projection.
#include <gtest/gtest.h>

#include <algorithm>

#include "core/error.h"
#include "model/transformer.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::make_random_model;
using testing::small_config;

struct LayerInputs : ForwardObserver {
  std::vector<std::vector<float>> x;
  void on_layer_input(const LayerInputView& v) override {
    if (static_cast<int>(x.size()) <= v.layer) x.resize(v.layer + 1);
    x[v.layer].assign(v.x.all().begin(), v.x.all().end());
  }
};

TEST(TransformerHooks, ResumingAtALayerIsBitIdentical) {
  auto m = make_random_model(small_config(), 3);
  Transformer tr(m.config, m.weights);
  const std::vector<int> context = {1, 5, 9, 13, 2, 40}, cont = {7, 8, 30, 11};
  KVCache base = tr.make_cache();
  tr.forward(context, base);
  LayerInputs cap;
  ForwardOptions all;
  all.logits = LogitsMode::All;
  all.observer = &cap;
  KVCache c0 = base;
  const std::vector<float> full = tr.forward(cont, c0, all);
  ASSERT_EQ(cap.x.size(), 3u);
  for (int l = 0; l < 3; ++l) {
    KVCache c = base;
    ForwardOptions resume;
    resume.logits = LogitsMode::All;
    resume.first_layer = l;
    resume.layer_input = cap.x[l].data();
    EXPECT_EQ(tr.forward(cont, c, resume), full) << "layer " << l;
    EXPECT_EQ(c.next_position, c0.next_position);
  }
  ForwardOptions bad;
  bad.first_layer = 1;  // no layer_input
  KVCache c = base;
  EXPECT_THROW(tr.forward(cont, c, bad), Error);
}

struct ZeroLayerAttention : ForwardObserver {
  int layer = 0, q_dim = 0;
  void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override {
    ASSERT_EQ(att.width(), static_cast<std::size_t>(q_dim));
    if (ctx.layer == layer) std::fill(att.all().begin(), att.all().end(), 0.0f);
  }
};

// Zeroing every head's attention output in a layer equals zeroing that layer's output projection.
TEST(TransformerHooks, ZeroedAttentionOutputEqualsZeroedOutputProjection) {
  auto m = make_random_model(small_config(), 4);
  auto z = make_random_model(small_config(), 4);
  std::fill(z.weights.layers[1].wo.f32().begin(), z.weights.layers[1].wo.f32().end(), 0.0f);
  Transformer tr(m.config, m.weights), tz(z.config, z.weights);
  const std::vector<int> ids = {1, 3, 5, 7, 9, 11, 13};
  ZeroLayerAttention zero;
  zero.layer = 1;
  zero.q_dim = m.config.q_dim();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  o.observer = &zero;
  KVCache a = tr.make_cache(), b = tz.make_cache(), c = tr.make_cache();
  ForwardOptions plain;
  plain.logits = LogitsMode::All;
  const auto masked = tr.forward(ids, a, o);
  const auto zeroed = tz.forward(ids, b, plain);
  const auto normal = tr.forward(ids, c, plain);
  ASSERT_EQ(masked.size(), zeroed.size());
  for (std::size_t i = 0; i < masked.size(); ++i) EXPECT_NEAR(masked[i], zeroed[i], 1e-6f);
  EXPECT_NE(masked, normal);
}

}}  // namespace
}  // namespace kvcompact
