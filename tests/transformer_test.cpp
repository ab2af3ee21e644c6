// The fast matrix-form forward pass vs an independent token-at-a-time reference written here
// (naive loops, double accumulation, llama2.c run.c structure), and cache invariants.
#include "model/transformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::make_random_model;
using testing::RandomModel;
using testing::small_config;

// One cached entry of the reference: key (after RoPE), value, bias.
struct RefEntry {
  std::vector<double> k, v;
  double beta = 0.0;
};
// [layer][kv_head] -> entries
using RefCache = std::vector<std::vector<std::vector<RefEntry>>>;

RefCache ref_cache_from(const KVCache& cache) {
  RefCache rc(cache.n_layers(), std::vector<std::vector<RefEntry>>(cache.n_kv_heads()));
  const int hd = cache.head_dim();
  for (int l = 0; l < cache.n_layers(); ++l)
    for (int g = 0; g < cache.n_kv_heads(); ++g) {
      const HeadCache& h = cache.head(l, g);
      for (std::size_t j = 0; j < h.length(); ++j) {
        RefEntry e;
        e.k.assign(h.keys.begin() + j * hd, h.keys.begin() + (j + 1) * hd);
        e.v.assign(h.values.begin() + j * hd, h.values.begin() + (j + 1) * hd);
        e.beta = h.beta[j];
        rc[l][g].push_back(e);
      }
    }
  return rc;
}

std::vector<double> ref_matvec(const std::vector<float>& W, const std::vector<double>& x,
                               int out) {
  const int in = static_cast<int>(x.size());
  std::vector<double> y(out, 0.0);
  for (int o = 0; o < out; ++o)
    for (int i = 0; i < in; ++i) y[o] += W[static_cast<std::size_t>(o) * in + i] * x[i];
  return y;
}

std::vector<double> ref_rmsnorm(const std::vector<double>& x, const std::vector<float>& w,
                                double eps) {
  double ss = 0.0;
  for (double a : x) ss += a * a;
  const double s = 1.0 / std::sqrt(ss / x.size() + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = w[i] * (s * x[i]);
  return y;
}

void ref_rope(std::vector<double>& vec, int n_heads, int hd, int pos, double theta,
              RopeStyle style) {
  for (int h = 0; h < n_heads; ++h)
    for (int j = 0; j < hd / 2; ++j) {
      const double freq = 1.0 / std::pow(theta, 2.0 * j / hd);
      const double c = std::cos(pos * freq), s = std::sin(pos * freq);
      const int a = h * hd + (style == RopeStyle::Interleaved ? 2 * j : j);
      const int b = h * hd + (style == RopeStyle::Interleaved ? 2 * j + 1 : j + hd / 2);
      const double v0 = vec[a], v1 = vec[b];
      vec[a] = v0 * c - v1 * s;
      vec[b] = v0 * s + v1 * c;
    }
}

// Token-at-a-time reference forward (llama2.c run.c). Token t sits at position start_pos + t and
// attends over `cache` (initial entries, extended as tokens are fed). Returns logits [n, vocab].
std::vector<std::vector<double>> ref_forward(const ModelConfig& c, const ModelWeights& w,
                                             const std::vector<int>& tokens, int start_pos,
                                             RefCache cache) {
  const int hd = c.head_dim, group = c.n_heads / c.n_kv_heads;
  if (cache.empty())
    cache.assign(c.n_layers, std::vector<std::vector<RefEntry>>(c.n_kv_heads));
  std::vector<std::vector<double>> all_logits;
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const int pos = start_pos + static_cast<int>(t);
    std::vector<double> x(c.dim);
    for (int i = 0; i < c.dim; ++i)
      x[i] = w.token_embedding[static_cast<std::size_t>(tokens[t]) * c.dim + i];
    for (int l = 0; l < c.n_layers; ++l) {
      const LayerWeights& L = w.layers[l];
      auto xb = ref_rmsnorm(x, L.attn_norm, c.norm_eps);
      auto q = ref_matvec(L.wq, xb, c.q_dim());
      auto k = ref_matvec(L.wk, xb, c.kv_dim());
      auto v = ref_matvec(L.wv, xb, c.kv_dim());
      ref_rope(q, c.n_heads, hd, pos, c.rope_theta, c.rope_style);
      ref_rope(k, c.n_kv_heads, hd, pos, c.rope_theta, c.rope_style);
      for (int g = 0; g < c.n_kv_heads; ++g) {
        RefEntry e;
        e.k.assign(k.begin() + g * hd, k.begin() + (g + 1) * hd);
        e.v.assign(v.begin() + g * hd, v.begin() + (g + 1) * hd);
        cache[l][g].push_back(e);
      }
      std::vector<double> att(c.q_dim(), 0.0);
      for (int h = 0; h < c.n_heads; ++h) {
        const auto& entries = cache[l][h / group];
        std::vector<double> score(entries.size());
        double mx = -1e300;
        for (std::size_t j = 0; j < entries.size(); ++j) {
          double s = 0.0;
          for (int d = 0; d < hd; ++d) s += q[h * hd + d] * entries[j].k[d];
          score[j] = s / std::sqrt(static_cast<double>(hd)) + entries[j].beta;
          mx = std::max(mx, score[j]);
        }
        double sum = 0.0;
        for (auto& s : score) sum += (s = std::exp(s - mx));
        for (std::size_t j = 0; j < entries.size(); ++j)
          for (int d = 0; d < hd; ++d) att[h * hd + d] += score[j] / sum * entries[j].v[d];
      }
      auto o = ref_matvec(L.wo, att, c.dim);
      for (int i = 0; i < c.dim; ++i) x[i] += o[i];
      xb = ref_rmsnorm(x, L.ffn_norm, c.norm_eps);
      auto h1 = ref_matvec(L.w_gate, xb, c.hidden_dim);
      auto h3 = ref_matvec(L.w_up, xb, c.hidden_dim);
      for (int i = 0; i < c.hidden_dim; ++i) h1[i] = h1[i] / (1.0 + std::exp(-h1[i])) * h3[i];
      auto d = ref_matvec(L.w_down, h1, c.dim);
      for (int i = 0; i < c.dim; ++i) x[i] += d[i];
    }
    x = ref_rmsnorm(x, w.final_norm, c.norm_eps);
    all_logits.push_back(ref_matvec(c.tied_classifier ? w.token_embedding : w.classifier, x,
                                    c.vocab_size));
  }
  return all_logits;
}

std::vector<int> test_tokens(int n, int vocab, int seed = 0) {
  std::vector<int> t(n);
  for (int i = 0; i < n; ++i) t[i] = (i * 17 + 5 + seed * 31) % vocab;
  return t;
}

void expect_logits_near(const std::vector<float>& got, const std::vector<std::vector<double>>& ref,
                        std::size_t first_ref_row, double tol) {
  const std::size_t vocab = ref[0].size();
  ASSERT_EQ(got.size() % vocab, 0u);
  for (std::size_t r = 0; r < got.size() / vocab; ++r)
    for (std::size_t i = 0; i < vocab; ++i)
      ASSERT_NEAR(got[r * vocab + i], ref[first_ref_row + r][i], tol) << "row " << r << " id " << i;
}

void expect_vec_near(const std::vector<float>& a, const std::vector<float>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], tol) << "index " << i;
}

TEST(Transformer, ForwardMatchesReferenceGqa) {
  const RandomModel m = make_random_model(small_config(), 11);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  const auto tokens = test_tokens(23, m.config.vocab_size);
  const auto logits = tf.forward(tokens, cache, {LogitsMode::All});
  ASSERT_EQ(logits.size(), tokens.size() * m.config.vocab_size);
  const auto ref = ref_forward(m.config, m.weights, tokens, 0, {});
  expect_logits_near(logits, ref, 0, 1e-4);
  EXPECT_EQ(cache.next_position, 23);
  EXPECT_EQ(cache.head(2, 1).length(), 23u);
  EXPECT_EQ(cache.head(0, 0).positions[22], 22);
  // Last returns only the last row, None nothing.
  KVCache c2 = tf.make_cache();
  const auto last = tf.forward(tokens, c2, {LogitsMode::Last});
  ASSERT_EQ(last.size(), static_cast<std::size_t>(m.config.vocab_size));
  expect_logits_near(last, ref, 22, 1e-4);
  KVCache c3 = tf.make_cache();
  EXPECT_TRUE(tf.forward(tokens, c3, {LogitsMode::None}).empty());
  // Rows returns the listed rows in order (repeats and more rows than tokens allowed), each equal
  // to the reference row; a row outside the new tokens is an error.
  ForwardOptions rows_opt{LogitsMode::Rows};
  rows_opt.logit_rows = {22, 0, 7, 7};
  for (int k = 0; k < 8; ++k) rows_opt.logit_rows.push_back(k * 3);
  KVCache c4 = tf.make_cache();
  const auto picked = tf.forward(tokens, c4, rows_opt);
  ASSERT_EQ(picked.size(), rows_opt.logit_rows.size() * m.config.vocab_size);
  for (std::size_t r = 0; r < rows_opt.logit_rows.size(); ++r) {
    const std::vector<float> row(picked.begin() + r * m.config.vocab_size, picked.begin() + (r + 1) * m.config.vocab_size);
    expect_logits_near(row, ref, rows_opt.logit_rows[r], 1e-4);
  }
  const std::vector<int> two(tokens.begin(), tokens.begin() + 2);
  ForwardOptions many{LogitsMode::Rows};
  many.logit_rows = {1, 0, 1, 1, 0};  // 5 rows from 2 tokens
  KVCache c5 = tf.make_cache();
  const auto rep = tf.forward(two, c5, many);
  ASSERT_EQ(rep.size(), 5u * m.config.vocab_size);
  for (std::size_t r = 0; r < 5; ++r) {
    const std::vector<float> row(rep.begin() + r * m.config.vocab_size, rep.begin() + (r + 1) * m.config.vocab_size);
    expect_logits_near(row, ref, many.logit_rows[r], 1e-4);
  }
  ForwardOptions bad{LogitsMode::Rows};
  bad.logit_rows = {23};
  KVCache c6 = tf.make_cache();
  EXPECT_THROW(tf.forward(tokens, c6, bad), Error);
}

TEST(Transformer, ForwardMatchesReferenceHalfSplitUntiedMha) {
  ModelConfig cfg = small_config(32, 48, 2, 4, 4, 29, RopeStyle::HalfSplit, false);
  const RandomModel m = make_random_model(cfg, 12);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  const auto tokens = test_tokens(17, cfg.vocab_size, 1);
  const auto logits = tf.forward(tokens, cache, {LogitsMode::All});
  expect_logits_near(logits, ref_forward(cfg, m.weights, tokens, 0, {}), 0, 1e-4);
}

TEST(Transformer, HalfSplitEqualsInterleavedWithPermutedQkRows) {
  // A HalfSplit model whose wq/wk rows (j, j+hd/2) are an Interleaved model's rows (2j, 2j+1)
  // computes the same function (the llama.cpp HF-conversion permutation).
  ModelConfig ci = small_config();
  const RandomModel a = make_random_model(ci, 13);
  RandomModel b = a;
  b.config.rope_style = RopeStyle::HalfSplit;
  const int hd = ci.head_dim, dim = ci.dim;
  auto permute = [&](const std::vector<float>& src, int heads) {
    std::vector<float> dst(src.size());
    for (int h = 0; h < heads; ++h)
      for (int j = 0; j < hd / 2; ++j)
        for (int half = 0; half < 2; ++half)
          std::copy_n(src.begin() + (static_cast<std::size_t>(h) * hd + 2 * j + half) * dim, dim,
                      dst.begin() + (static_cast<std::size_t>(h) * hd + j + half * hd / 2) * dim);
    return dst;
  };
  for (int l = 0; l < ci.n_layers; ++l) {
    b.weights.layers[l].wq = permute(a.weights.layers[l].wq, ci.n_heads);
    b.weights.layers[l].wk = permute(a.weights.layers[l].wk, ci.n_kv_heads);
  }
  Transformer ta(a.config, a.weights), tb(b.config, b.weights);
  KVCache ca = ta.make_cache(), cb = tb.make_cache();
  const auto tokens = test_tokens(19, ci.vocab_size, 2);
  expect_vec_near(ta.forward(tokens, ca, {LogitsMode::All}), tb.forward(tokens, cb, {LogitsMode::All}),
                  1e-4);
  // ... and the two styles really differ on the same weights.
  Transformer tc(b.config, a.weights);
  KVCache cc = tc.make_cache(), cd = ta.make_cache();
  const auto lc = tc.forward(tokens, cc, {LogitsMode::Last});
  const auto ld = ta.forward(tokens, cd, {LogitsMode::Last});
  double diff = 0;
  for (std::size_t i = 0; i < lc.size(); ++i) diff = std::max(diff, double(std::fabs(lc[i] - ld[i])));
  EXPECT_GT(diff, 1e-2);
}

TEST(Transformer, PrefillSplitsAndTokenByTokenAgree) {
  const RandomModel m = make_random_model(small_config(), 14);
  Transformer tf(m.config, m.weights);
  const auto tokens = test_tokens(30, m.config.vocab_size, 3);
  KVCache full = tf.make_cache();
  const auto l_full = tf.forward(tokens, full, {LogitsMode::All});

  KVCache split = tf.make_cache();
  std::span<const int> all(tokens);
  tf.forward(all.subspan(0, 21), split, {LogitsMode::None});
  const auto l_split = tf.forward(all.subspan(21), split, {LogitsMode::All});
  EXPECT_EQ(split.next_position, 30);
  expect_vec_near(std::vector<float>(l_full.begin() + 21 * m.config.vocab_size, l_full.end()),
                  l_split, 1e-4);

  KVCache step = tf.make_cache();
  std::vector<float> l_step;
  for (int i = 0; i < 30; ++i) l_step = tf.forward(all.subspan(i, 1), step, {LogitsMode::Last});
  expect_vec_near(std::vector<float>(l_full.end() - m.config.vocab_size, l_full.end()), l_step,
                  1e-4);
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int g = 0; g < m.config.n_kv_heads; ++g) {
      expect_vec_near(full.head(l, g).keys, step.head(l, g).keys, 1e-4);
      expect_vec_near(full.head(l, g).values, split.head(l, g).values, 1e-4);
    }
}

TEST(Transformer, BetaLogWeightEqualsDuplicatedEntries) {
  // An entry with beta = log(w) must act exactly like w copies of it with beta 0.
  const RandomModel m = make_random_model(small_config(), 15);
  Transformer tf(m.config, m.weights);
  const auto ctx = test_tokens(12, m.config.vocab_size, 4);
  KVCache base = tf.make_cache();
  tf.forward(ctx, base, {LogitsMode::None});
  KVCache biased = base, dup = tf.make_cache();
  dup.next_position = base.next_position;
  const int hd = m.config.head_dim;
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int g = 0; g < m.config.n_kv_heads; ++g) {
      const HeadCache& src = base.head(l, g);
      for (std::size_t j = 0; j < src.length(); ++j) {
        const int w = 1 + static_cast<int>((j * 7 + l + g) % 4);  // 1..4 copies
        biased.head(l, g).beta[j] = std::log(static_cast<float>(w));
        for (int r = 0; r < w; ++r)
          dup.head(l, g).append(&src.keys[j * hd], &src.values[j * hd], hd, 0.0f,
                                src.positions[j]);
      }
    }
  const RefCache biased_ref = ref_cache_from(biased);
  const auto next = test_tokens(5, m.config.vocab_size, 5);
  const auto lb = tf.forward(next, biased, {LogitsMode::All});
  const auto ld = tf.forward(next, dup, {LogitsMode::All});
  expect_vec_near(lb, ld, 2e-5);
  // The bias matters: without it the logits differ.
  KVCache plain = base;
  const auto lp = tf.forward(next, plain, {LogitsMode::All});
  double diff = 0;
  for (std::size_t i = 0; i < lp.size(); ++i) diff = std::max(diff, double(std::fabs(lp[i] - lb[i])));
  EXPECT_GT(diff, 1e-3);
  // And the reference on the biased cache agrees.
  expect_logits_near(lb, ref_forward(m.config, m.weights, next, 12, biased_ref), 0, 1e-4);
}

TEST(Transformer, RaggedPerHeadCacheMatchesReference) {
  // Drop different entries from different heads (as non-uniform compaction does), add biases,
  // then feed more tokens: must match the reference on the same entry sets.
  const RandomModel m = make_random_model(small_config(), 16);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  tf.forward(test_tokens(20, m.config.vocab_size, 6), cache, {LogitsMode::None});
  const int hd = m.config.head_dim;
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int g = 0; g < m.config.n_kv_heads; ++g) {
      const HeadCache src = cache.head(l, g);
      HeadCache dst;
      const int keep_every = 1 + (l * 2 + g) % 4;  // 20, 10, 7, 5 ... entries
      for (std::size_t j = 0; j < src.length(); ++j)
        if (j % keep_every == 0)
          dst.append(&src.keys[j * hd], &src.values[j * hd], hd, 0.1f * static_cast<float>(j % 3),
                     src.positions[j]);
      cache.head(l, g) = dst;
    }
  EXPECT_NE(cache.head(0, 0).length(), cache.head(0, 1).length());
  const RefCache rc = ref_cache_from(cache);
  const auto next = test_tokens(6, m.config.vocab_size, 7);
  const auto logits = tf.forward(next, cache, {LogitsMode::All});
  EXPECT_EQ(cache.next_position, 26);
  expect_logits_near(logits, ref_forward(m.config, m.weights, next, 20, rc), 0, 1e-4);
}

TEST(Transformer, RopePositionContinuityFromNextPosition) {
  // After compaction a cache holds fewer entries than its next_position: new tokens must use
  // positions next_position, next_position+1, ... (not the cache length).
  const RandomModel m = make_random_model(small_config(), 17);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  tf.forward(test_tokens(10, m.config.vocab_size, 9), cache, {LogitsMode::None});
  cache.next_position = 50;
  const RefCache rc = ref_cache_from(cache);
  const auto tokens = test_tokens(7, m.config.vocab_size, 8);
  const auto logits = tf.forward(tokens, cache, {LogitsMode::All});
  EXPECT_EQ(cache.head(1, 0).positions[10], 50);
  EXPECT_EQ(cache.next_position, 57);
  expect_logits_near(logits, ref_forward(m.config, m.weights, tokens, 50, rc), 0, 1e-4);
  // The position really matters: the reference at position 10 disagrees.
  const auto at10 = ref_forward(m.config, m.weights, tokens, 10, rc);
  double diff = 0;
  for (int i = 0; i < m.config.vocab_size; ++i)
    diff = std::max(diff, std::fabs(logits[i] - at10[0][i]));
  EXPECT_GT(diff, 1e-3);
  // With an empty cache only relative positions matter (RoPE): start 100 == start 0.
  KVCache empty = tf.make_cache();
  empty.next_position = 100;
  expect_logits_near(tf.forward(tokens, empty, {LogitsMode::All}),
                     ref_forward(m.config, m.weights, tokens, 0, {}), 0, 1e-3);
}

// mark() + forward + rollback() is a fork of the cache: afterwards the cache equals a deep copy taken
// at the mark, and feeding other tokens gives the logits the copy gives.
TEST(Transformer, RollbackAfterAForwardEqualsADeepCopy) {
  const RandomModel m = make_random_model(small_config(), 21);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  tf.forward(test_tokens(9, m.config.vocab_size, 3), cache, {LogitsMode::None});
  cache.head(1, 0).beta[2] = 0.75f;  // a biased entry, as after compaction
  const KVCache copy = cache;
  const CacheMark mark = cache.mark();
  tf.forward(test_tokens(5, m.config.vocab_size, 4), cache, {LogitsMode::None});
  ASSERT_EQ(cache.next_position, 14);
  cache.rollback(mark);
  EXPECT_EQ(cache.next_position, copy.next_position);
  for (int l = 0; l < m.config.n_layers; ++l)
    for (int g = 0; g < m.config.n_kv_heads; ++g) {
      EXPECT_EQ(cache.head(l, g).keys, copy.head(l, g).keys);
      EXPECT_EQ(cache.head(l, g).values, copy.head(l, g).values);
      EXPECT_EQ(cache.head(l, g).beta, copy.head(l, g).beta);
      EXPECT_EQ(cache.head(l, g).positions, copy.head(l, g).positions);
    }
  KVCache from_copy = copy;
  const auto tokens = test_tokens(4, m.config.vocab_size, 5);
  EXPECT_EQ(tf.forward(tokens, cache, {LogitsMode::All}), tf.forward(tokens, from_copy, {LogitsMode::All}));
}

TEST(Transformer, ObserverSeesRopedQueries) {
  struct Obs : ForwardObserver {
    std::vector<int> layers, firsts, ns;
    std::vector<float> q0;
    void on_queries(const QueryView& v) override {
      layers.push_back(v.layer), firsts.push_back(v.first_position), ns.push_back(v.q.n_tokens);
      EXPECT_EQ(v.q.width(), 48u);
      if (v.layer == 0) q0.assign(v.q.all().begin(), v.q.all().end());
    }
  } obs;
  const RandomModel m = make_random_model(small_config(), 18);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  cache.next_position = 3;
  const std::vector<int> tokens{4, 9};
  tf.forward(tokens, cache, {LogitsMode::Last, &obs});
  EXPECT_EQ(obs.layers, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(obs.firsts, (std::vector<int>{3, 3, 3}));
  EXPECT_EQ(obs.ns, (std::vector<int>{2, 2, 2}));
  // Layer-0 query of token 1 (position 4): RoPE of wq * rmsnorm(embedding).
  const ModelConfig& c = m.config;
  std::vector<double> x(c.dim);
  for (int i = 0; i < c.dim; ++i) x[i] = m.weights.token_embedding[9 * c.dim + i];
  auto q = ref_matvec(m.weights.layers[0].wq, ref_rmsnorm(x, m.weights.layers[0].attn_norm, c.norm_eps),
                      c.q_dim());
  ref_rope(q, c.n_heads, c.head_dim, 4, c.rope_theta, c.rope_style);
  for (int i = 0; i < c.q_dim(); ++i) EXPECT_NEAR(obs.q0[c.q_dim() + i], q[i], 1e-4);
}

TEST(Transformer, BadInputThrows) {
  const RandomModel m = make_random_model(small_config(), 19);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  const std::vector<int> bad{1, 61};
  EXPECT_THROW(tf.forward(bad, cache), Error);
  try {
    tf.forward(bad, cache);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("61"), std::string::npos);
  }
  const std::vector<int> neg{-1};
  EXPECT_THROW(tf.forward(neg, cache), Error);
  EXPECT_THROW(tf.forward(std::vector<int>{}, cache), Error);
  EXPECT_EQ(cache.next_position, 0);  // nothing was fed
  EXPECT_EQ(cache.total_entries(), 0u);
  KVCache wrong(3, 3, 8);
  EXPECT_THROW(tf.forward(std::vector<int>{1}, wrong), Error);
  KVCache broken = tf.make_cache();
  broken.head(1, 1).beta.push_back(0.0f);  // beta without key/value
  EXPECT_THROW(tf.forward(std::vector<int>{1}, broken), Error);
  ModelWeights short_w = m.weights;
  short_w.layers[2].w_up.pop_back();
  EXPECT_THROW(Transformer(m.config, short_w), Error);
  ModelConfig odd = m.config;
  odd.n_kv_heads = 4;  // 6 % 4 != 0
  EXPECT_THROW(Transformer(odd, m.weights), Error);
}

}}  // namespace
}  // namespace kvcompact
