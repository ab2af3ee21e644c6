#include "model/transformer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "core/error.h"
#include "ops/rope.h"

namespace kvcompact {

namespace {

void check_size(const std::vector<float>& v, std::size_t expected, const char* what, int layer) {
  if (v.size() != expected) {
    if (layer >= 0)
      throw Error(fmt::format("model weights: layer {} {} has {} floats, expected {}", layer, what,
                              v.size(), expected));
    throw Error(fmt::format("model weights: {} has {} floats, expected {}", what, v.size(),
                            expected));
  }
}

void check_matrix(const WeightMatrix& w, std::size_t rows, std::size_t cols, const char* what,
                  int layer) {
  const std::string where = layer >= 0 ? fmt::format("layer {} {}", layer, what) : std::string(what);
  if (w.is_view()) {
    if (static_cast<std::size_t>(w.rows()) != rows || static_cast<std::size_t>(w.cols()) != cols)
      throw Error(fmt::format("model weights: {} is {} x {}, expected {} x {}", where, w.rows(),
                              w.cols(), rows, cols));
  } else if (w.size() != rows * cols) {
    throw Error(fmt::format("model weights: {} has {} floats, expected {}", where, w.size(),
                            rows * cols));
  }
}

void ensure(std::vector<float>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

Transformer::Transformer(const ModelConfig& config, const ModelWeights& weights, const Backend& backend)
    : config_(config), weights_(weights), backend_(backend) {
  const ModelConfig& c = config_;
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 ||
      c.head_dim <= 0 || c.vocab_size <= 0)
    throw Error(fmt::format(
        "model config: non-positive size (dim {}, hidden_dim {}, n_layers {}, n_heads {}, "
        "n_kv_heads {}, head_dim {}, vocab_size {})",
        c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.head_dim, c.vocab_size));
  if (c.n_heads % c.n_kv_heads != 0)
    throw Error(fmt::format("model config: n_heads {} is not a multiple of n_kv_heads {}",
                            c.n_heads, c.n_kv_heads));
  if (c.head_dim % 2 != 0)
    throw Error(fmt::format("model config: head_dim {} is odd (RoPE needs pairs)", c.head_dim));
  if (!(c.norm_eps >= 0.0f) || !(c.rope_theta > 0.0f) || !std::isfinite(c.rope_theta))
    throw Error(fmt::format("model config: bad norm_eps {} or rope_theta {}", c.norm_eps,
                            c.rope_theta));
  if (!c.layers.empty() && static_cast<int>(c.layers.size()) != c.n_layers)
    throw Error(fmt::format("model config: {} layer specs for {} layers", c.layers.size(), c.n_layers));
  if (!(c.embedding_scale > 0.0f) || !std::isfinite(c.embedding_scale) || !(c.final_logit_softcap >= 0.0f) ||
      !std::isfinite(c.final_logit_softcap))
    throw Error(fmt::format("model config: bad embedding_scale {} or final_logit_softcap {}", c.embedding_scale,
                            c.final_logit_softcap));
  layer_rope_.resize(static_cast<std::size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerSpec& s = c.layer(l);
    if (s.sliding() != (s.window > 0) || s.window < 0)
      throw Error(fmt::format("model config: layer {} is {} with window {} (sliding layers need a window > 0, "
                              "global layers 0)", l, s.sliding() ? "sliding" : "global", s.window));
    if (!(s.attention_scale >= 0.0f) || !std::isfinite(s.attention_scale))
      throw Error(fmt::format("model config: layer {} attention_scale {} is negative", l, s.attention_scale));
    const RopeSpec r = c.layer_rope(l);
    if (!(r.theta > 0.0f) || !std::isfinite(r.theta))
      throw Error(fmt::format("model config: layer {} rope theta {} is not positive", l, r.theta));
    std::vector<float> inv(static_cast<std::size_t>(c.head_dim / 2));
    rope_inv_freq(c.head_dim, r.theta, r.scaling, inv.data());  // validates scaling
    const float af = rope_attention_factor(r.scaling);
    int g = 0;
    while (g < static_cast<int>(rope_inv_freq_.size()) && (rope_inv_freq_[g] != inv || rope_factor_[g] != af)) ++g;
    if (g == static_cast<int>(rope_inv_freq_.size())) {
      rope_inv_freq_.push_back(std::move(inv));
      rope_factor_.push_back(af);
    }
    layer_rope_[static_cast<std::size_t>(l)] = g;
  }
  const std::size_t dim = c.dim, hid = c.hidden_dim, qd = c.q_dim(), kvd = c.kv_dim(),
                    vocab = c.vocab_size;
  check_matrix(weights_.token_embedding, vocab, dim, "token_embedding", -1);
  check_size(weights_.final_norm, dim, "final_norm", -1);
  if (!weights_.classifier.empty()) check_matrix(weights_.classifier, vocab, dim, "classifier", -1);
  if (static_cast<int>(weights_.layers.size()) != c.n_layers)
    throw Error(fmt::format("model weights: {} layers, config says {}", weights_.layers.size(),
                            c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& w = weights_.layers[l];
    check_size(w.attn_norm, dim, "attn_norm", l);
    check_matrix(w.wq, qd, dim, "wq", l);
    check_matrix(w.wk, kvd, dim, "wk", l);
    check_matrix(w.wv, kvd, dim, "wv", l);
    check_matrix(w.wo, dim, qd, "wo", l);
    check_size(w.ffn_norm, dim, "ffn_norm", l);
    check_matrix(w.w_gate, hid, dim, "w_gate", l);
    check_matrix(w.w_up, hid, dim, "w_up", l);
    check_matrix(w.w_down, dim, hid, "w_down", l);
    const std::size_t hdim = c.head_dim;
    check_size(w.bq, c.attention_qkv_bias ? qd : 0, "bq", l);
    check_size(w.bk, c.attention_qkv_bias ? kvd : 0, "bk", l);
    check_size(w.bv, c.attention_qkv_bias ? kvd : 0, "bv", l);
    check_size(w.bo, c.attention_out_bias ? dim : 0, "bo", l);
    check_size(w.q_norm, c.qk_norm ? hdim : 0, "q_norm", l);
    check_size(w.k_norm, c.qk_norm ? hdim : 0, "k_norm", l);
    const bool post = c.layer(l).norm == NormPlacement::PrePost;
    check_size(w.attn_post_norm, post ? dim : 0, "attn_post_norm", l);
    check_size(w.ffn_post_norm, post ? dim : 0, "ffn_post_norm", l);
  }
}

KVCache Transformer::make_cache() const {
  KVCache cache(config_.n_layers, config_.n_kv_heads, config_.head_dim);
  for (int l = 0; l < config_.n_layers; ++l) cache.set_layer_window(l, config_.layer(l).window);
  return cache;
}

std::vector<int> logit_rows_for(LogitsMode mode, int n, const std::vector<int>& rows) {
  switch (mode) {
    case LogitsMode::None: return {};
    case LogitsMode::Last: return n > 0 ? std::vector<int>{n - 1} : std::vector<int>{};
    case LogitsMode::All: {
      std::vector<int> all(static_cast<std::size_t>(std::max(n, 0)));
      for (int i = 0; i < n; ++i) all[static_cast<std::size_t>(i)] = i;
      return all;
    }
    case LogitsMode::Rows: return rows;
  }
  return {};
}

std::vector<float> Transformer::forward(std::span<const int> tokens, KVCache& cache,
                                        const ForwardOptions& options) const {
  const BatchSequence seq{tokens, &cache, options.layer_input,
                          logit_rows_for(options.logits, static_cast<int>(tokens.size()), options.logit_rows)};
  return run(std::span<const BatchSequence>(&seq, 1), options);
}

std::vector<float> Transformer::forward_batch(std::span<const BatchSequence> sequences, int first_layer) const {
  ForwardOptions o;
  o.first_layer = first_layer;
  return run(sequences, o);
}

Transformer::Batch Transformer::check_batch(std::span<const BatchSequence> seqs, const ForwardOptions& options) const {
  const ModelConfig& c = config_;
  const std::size_t S = seqs.size();
  if (S == 0) throw Error("forward_batch: no sequences");
  if (S > 1 && (options.observer != nullptr || options.end_layer >= 0 || options.hidden_out != nullptr))
    throw Error("forward_batch: observers, end_layer and hidden_out need a single sequence");
  Batch b;
  b.seqs = seqs;
  b.row0.assign(S + 1, 0);
  for (std::size_t s = 0; s < S; ++s) {
    const BatchSequence& sq = seqs[s];
    const std::string which = S == 1 ? std::string() : fmt::format(" (sequence {})", s);
    if (sq.tokens.empty()) throw Error("forward: empty token list" + which);
    if (sq.cache == nullptr) throw Error("forward: no KV cache" + which);
    if (options.first_layer > 0 && sq.layer_input == nullptr)
      throw Error(fmt::format("forward: first_layer {} needs layer_input{}", options.first_layer, which));
    for (std::size_t r = 0; r < s; ++r)
      if (seqs[r].cache == sq.cache)
        throw Error(fmt::format("forward_batch: sequences {} and {} share one KV cache", r, s));
    const int ns = static_cast<int>(sq.tokens.size());
    b.row0[s + 1] = b.row0[s] + ns;
    for (int i = 0; i < ns; ++i)
      if (sq.tokens[i] < 0 || sq.tokens[i] >= c.vocab_size)
        throw Error(fmt::format("forward: token id {} (at index {}) is outside the vocabulary of {}",
                                sq.tokens[i], i, c.vocab_size));
    for (int r : sq.logit_rows)
      if (r < 0 || r >= ns) throw Error(fmt::format("forward: logit row {} outside the {} new tokens", r, ns));
    b.n_logit_rows += sq.logit_rows.size();
    const KVCache& cache = *sq.cache;
    if (cache.n_layers() != c.n_layers || cache.n_kv_heads() != c.n_kv_heads || cache.head_dim() != c.head_dim)
      throw Error(fmt::format(
          "forward: KV cache is {} layers x {} KV heads x head_dim {}, model needs {} x {} x {}",
          cache.n_layers(), cache.n_kv_heads(), cache.head_dim(), c.n_layers, c.n_kv_heads,
          c.head_dim));
    if (cache.next_position < 0)
      throw Error(fmt::format("forward: KV cache next_position {} is negative", cache.next_position));
    for (int l = 0; l < c.n_layers; ++l)
      for (int g = 0; g < c.n_kv_heads; ++g) {
        const HeadCache& h = cache.head(l, g);
        if (!h.consistent(c.head_dim))
          throw Error(fmt::format(
              "forward: KV cache head L{}H{} is inconsistent ({} beta, {} key floats, {} value "
              "floats, {} positions, head_dim {})",
              l, g, h.length(), h.keys.size(), h.values.size(), h.positions.size(), c.head_dim));
      }
  }
  b.n = b.row0[S];
  if (options.first_layer < 0 || options.first_layer > c.n_layers)
    throw Error(fmt::format("forward: first_layer {} must be in [0, {}]",
                            options.first_layer, c.n_layers));
  b.first_layer = options.first_layer;
  b.end_layer = options.end_layer < 0 ? c.n_layers : options.end_layer;
  if (b.end_layer < b.first_layer || b.end_layer > c.n_layers)
    throw Error(fmt::format("forward: end_layer {} must be in [first_layer {}, {}]", options.end_layer,
                            options.first_layer, c.n_layers));
  if (b.end_layer < c.n_layers && b.n_logit_rows > 0)
    throw Error(fmt::format("forward: end_layer {} stops before the last layer; logits need every layer", b.end_layer));
  return b;
}

void Transformer::size_workspace(ForwardWorkspace& ws, std::size_t N) const {
  const ModelConfig& c = config_;
  const std::size_t dim = c.dim, hid = c.hidden_dim, qd = c.q_dim(), kvd = c.kv_dim();
  ensure(ws.x, N * dim);
  ensure(ws.xn, N * dim);
  ensure(ws.q, N * qd);
  ensure(ws.k, N * kvd);
  ensure(ws.v, N * kvd);
  ensure(ws.att, N * qd);
  ensure(ws.proj, N * dim);
  ensure(ws.hb, N * hid);
  ensure(ws.hb2, N * hid);
  const std::size_t n_groups = rope_inv_freq_.size();
  ws.cos.resize(std::max(ws.cos.size(), n_groups));
  ws.sin.resize(std::max(ws.sin.size(), n_groups));
  for (std::size_t g = 0; g < n_groups; ++g) {
    ensure(ws.cos[g], N * (c.head_dim / 2));
    ensure(ws.sin[g], N * (c.head_dim / 2));
  }
  ws.views.resize(c.n_kv_heads);
}

void Transformer::embed(const Batch& b, float* x) const {
  const ModelConfig& c = config_;
  const std::size_t dim = c.dim;
  for (std::size_t s = 0; s < b.seqs.size(); ++s) {
    const BatchSequence& sq = b.seqs[s];
    float* xs = x + static_cast<std::size_t>(b.row0[s]) * dim;
    const std::size_t ns = sq.tokens.size();
    if (b.first_layer > 0) {
      std::copy(sq.layer_input, sq.layer_input + ns * dim, xs);
    } else {
      for (std::size_t i = 0; i < ns; ++i) backend_.weight_row(weights_.token_embedding, sq.tokens[i], c.dim, xs + i * dim);
      if (c.embedding_scale != 1.0f) backend_.scale(xs, static_cast<long>(ns * dim), c.embedding_scale);
    }
  }
}

void Transformer::rope_angles(const Batch& b, ForwardWorkspace& ws) const {
  // A sequence's rows sit at cache->next_position, next_position + 1, ...
  const int half = config_.head_dim / 2;
  for (std::size_t g = 0; g < rope_inv_freq_.size(); ++g)
    for (std::size_t s = 0; s < b.seqs.size(); ++s) {
      const std::size_t r0 = static_cast<std::size_t>(b.row0[s]) * half;
      backend_.rope_tables(rope_inv_freq_[g].data(), half, rope_factor_[g], b.seqs[s].cache->next_position,
                           b.row0[s + 1] - b.row0[s], ws.cos[g].data() + r0, ws.sin[g].data() + r0);
    }
}

void Transformer::attention_block(int l, const Batch& b, const ForwardOptions& options, ForwardWorkspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const LayerWeights& w = weights_.layers[l];
  const LayerSpec& spec = c.layer(l);
  const int n = b.n, hd = c.head_dim, dim = c.dim, qd = c.q_dim(), kvd = c.kv_dim();
  const std::size_t rg = static_cast<std::size_t>(layer_rope_[static_cast<std::size_t>(l)]);
  float *x = ws.x.data(), *xn = ws.xn.data(), *q = ws.q.data(), *k = ws.k.data(), *v = ws.v.data(),
        *att = ws.att.data(), *proj = ws.proj.data();

  be.rmsnorm(x, w.attn_norm.data(), xn, n, dim, c.norm_eps);
  be.matmul_wt(xn, w.wq, q, n, dim, qd);
  be.matmul_wt(xn, w.wk, k, n, dim, kvd);
  be.matmul_wt(xn, w.wv, v, n, dim, kvd);
  if (c.attention_qkv_bias) {
    be.add_bias(q, w.bq.data(), n, qd);
    be.add_bias(k, w.bk.data(), n, kvd);
    be.add_bias(v, w.bv.data(), n, kvd);
  }
  if (c.qk_norm) {  // Qwen3: RMSNorm over each head's head_dim values, before RoPE
    be.rmsnorm(q, w.q_norm.data(), q, n * c.n_heads, hd, c.norm_eps);
    be.rmsnorm(k, w.k_norm.data(), k, n * c.n_kv_heads, hd, c.norm_eps);
  }
  be.rope(q, n, c.n_heads, hd, ws.cos[rg].data(), ws.sin[rg].data(), c.rope_style);
  be.rope(k, n, c.n_kv_heads, hd, ws.cos[rg].data(), ws.sin[rg].data(), c.rope_style);
  if (spec.attention_scale > 0.0f) {
    // A logit scale other than 1/sqrt(head_dim) (Gemma's query_pre_attn_scalar^-1/2) is folded
    // into the queries, so that every consumer of q sees scores q.k/sqrt(head_dim).
    const float m = spec.attention_scale * std::sqrt(static_cast<float>(hd));
    if (m != 1.0f) be.scale(q, static_cast<long>(n) * qd, m);
  }
  // Each sequence appends its rows to its own cache and attends over it.
  for (std::size_t s = 0; s < b.seqs.size(); ++s) {
    KVCache& cache = *b.seqs[s].cache;
    const int first_pos = cache.next_position;
    const int ns = b.row0[s + 1] - b.row0[s];
    const std::size_t r0 = static_cast<std::size_t>(b.row0[s]);
    float* qs = q + r0 * qd;
    float* atts = att + r0 * qd;
    if (options.observer)
      options.observer->on_queries(QueryView{l, first_pos, HeadRows<const float>{qs, ns, c.n_heads, hd}});
    for (int g = 0; g < c.n_kv_heads; ++g) {
      HeadCache& h = cache.head(l, g);
      const std::size_t off = r0 * kvd + static_cast<std::size_t>(g) * hd;
      be.append_kv(h, k + off, v + off, kvd, ns, hd, first_pos);
      ws.views[g] = AttentionHeadView{h.keys.data(), h.values.data(), h.beta.data(),
                                      static_cast<int>(h.length()), h.positions.data(), spec.window};
    }
    be.attention(qs, ns, c.n_heads, c.n_kv_heads, hd, ws.views.data(), atts);
    if (options.observer) {
      const AttentionContext ctx{l, first_pos, HeadRows<const float>{qs, ns, c.n_heads, hd},
                                 std::span<const AttentionHeadView>(ws.views.data(), static_cast<std::size_t>(c.n_kv_heads))};
      options.observer->on_attention_output(ctx, HeadRows<float>{atts, ns, c.n_heads, hd});
    }
  }
  be.matmul_wt(att, w.wo, proj, n, qd, dim);
  if (c.attention_out_bias) be.add_bias(proj, w.bo.data(), n, dim);
  if (spec.norm == NormPlacement::PrePost) be.rmsnorm(proj, w.attn_post_norm.data(), proj, n, dim, c.norm_eps);
  be.add(x, proj, static_cast<long>(n) * dim);
}

void Transformer::mlp_block(int l, int n, ForwardWorkspace& ws) const {
  const ModelConfig& c = config_;
  const Backend& be = backend_;
  const LayerWeights& w = weights_.layers[l];
  const LayerSpec& spec = c.layer(l);
  const int dim = c.dim, hid = c.hidden_dim;
  float *x = ws.x.data(), *xn = ws.xn.data(), *hb = ws.hb.data(), *hb2 = ws.hb2.data(), *proj = ws.proj.data();
  be.rmsnorm(x, w.ffn_norm.data(), xn, n, dim, c.norm_eps);
  be.matmul_wt(xn, w.w_gate, hb, n, dim, hid);
  be.matmul_wt(xn, w.w_up, hb2, n, dim, hid);
  be.gated_activation(spec.mlp, hb, hb2, static_cast<long>(n) * hid);
  be.matmul_wt(hb, w.w_down, proj, n, hid, dim);
  if (spec.norm == NormPlacement::PrePost) be.rmsnorm(proj, w.ffn_post_norm.data(), proj, n, dim, c.norm_eps);
  be.add(x, proj, static_cast<long>(n) * dim);
}

std::vector<float> Transformer::logits_of(const Batch& b, ForwardWorkspace& ws) const {
  const ModelConfig& c = config_;
  const int n = b.n, dim = c.dim;
  std::vector<float> logits;
  if (b.n_logit_rows == 0) return logits;
  // The listed rows, gathered (in place when they are the last rows of a single sequence, in
  // order), normalised and sent through the classifier together.
  const int rows = static_cast<int>(b.n_logit_rows);
  float* x = ws.x.data();
  float* xn = ws.xn.data();
  float* xr = nullptr;
  std::vector<float> picked;
  const std::vector<int>& lr0 = b.seqs[0].logit_rows;
  bool tail = b.seqs.size() == 1;
  for (std::size_t r = 0; tail && r < lr0.size(); ++r) tail = lr0[r] == n - rows + static_cast<int>(r);
  if (tail) {
    xr = x + static_cast<std::size_t>(n - rows) * dim;
  } else {
    picked.resize(static_cast<std::size_t>(rows) * dim);
    std::size_t r = 0;
    for (std::size_t s = 0; s < b.seqs.size(); ++s)
      for (int src : b.seqs[s].logit_rows)
        std::copy_n(x + static_cast<std::size_t>(b.row0[s] + src) * dim, dim, picked.data() + (r++) * dim);
    xr = picked.data();
    if (rows > n) xn = xr;  // normalised in place (the workspace holds only n rows)
  }
  backend_.rmsnorm(xr, weights_.final_norm.data(), xn, rows, dim, c.norm_eps);
  logits.resize(static_cast<std::size_t>(rows) * c.vocab_size);
  backend_.matmul_wt(xn, weights_.classifier_matrix(), logits.data(), rows, dim, c.vocab_size);
  if (c.final_logit_softcap > 0.0f) backend_.softcap(logits.data(), static_cast<long>(logits.size()), c.final_logit_softcap);
  return logits;
}

std::vector<float> Transformer::run(std::span<const BatchSequence> seqs, const ForwardOptions& options) const {
  const ModelConfig& c = config_;
  const Batch b = check_batch(seqs, options);
  const WorkspaceLease lease = backend_.acquire_workspace();
  ForwardWorkspace& ws = *lease;
  size_workspace(ws, static_cast<std::size_t>(b.n));
  embed(b, ws.x.data());
  rope_angles(b, ws);
  // The cache records each layer's window (caches read from .kvc files or built by hand get it
  // here), so that compaction can tell sliding layers apart.
  for (const BatchSequence& sq : seqs)
    for (int l = 0; l < c.n_layers; ++l)
      if (sq.cache->layer_window(l) != c.layer(l).window) sq.cache->set_layer_window(l, c.layer(l).window);

  for (int l = b.first_layer; l < b.end_layer; ++l) {
    if (options.observer)
      options.observer->on_layer_input(LayerInputView{l, TokenRows<const float>{ws.x.data(), b.n, c.dim}});
    attention_block(l, b, options, ws);
    mlp_block(l, b.n, ws);
  }
  for (std::size_t s = 0; s < seqs.size(); ++s) seqs[s].cache->next_position += b.row0[s + 1] - b.row0[s];
  if (options.hidden_out != nullptr)
    options.hidden_out->assign(ws.x.data(), ws.x.data() + static_cast<std::size_t>(b.n) * c.dim);
  return logits_of(b, ws);
}

}  // namespace kvcompact
