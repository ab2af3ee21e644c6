#include "heads/head_scores.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <nlohmann/json.hpp>

#include "tasks/answer_generation.h"
#include "io/atomic_file.h"
#include "core/error.h"
#include "io/json_number.h"
#include "io/json_file.h"
#include "core/model_fingerprint.h"
#include "model/transformer.h"

namespace kvcompact {

namespace {

// Attention weights of one query row of query head h against the visible entries of its KV head
// view: scores q.k/sqrt(d) + beta, softmax. Writes `visible` weights into w.
void row_weights(const AttentionContext& ctx, int row, int h, std::vector<double>& w) {
  const int hd = ctx.head_dim();
  const AttentionHeadView& v = ctx.heads[static_cast<std::size_t>(h / ctx.group_size())];
  const int visible = v.length - ctx.n_tokens() + row + 1;
  const int lo = first_visible(v, ctx.n_tokens(), row);  // sliding window: earlier entries weigh 0
  const float* q = ctx.q.head(row, h).data();
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  w.assign(visible, 0.0);
  double mx = -INFINITY;
  for (int j = lo; j < visible; ++j) {
    const float* k = v.keys + static_cast<std::size_t>(j) * hd;
    double s = 0;
    for (int d = 0; d < hd; ++d) s += static_cast<double>(q[d]) * k[d];
    w[j] = s * scale + v.beta[j];
    mx = std::max(mx, w[j]);
  }
  double total = 0;
  for (int j = lo; j < visible; ++j) total += (w[j] = std::exp(w[j] - mx));
  for (int j = lo; j < visible; ++j) w[j] /= total;
}

// Every query head with its score (per_head [n_layers * n_heads], layer-major), stably sorted
// (ties keep layer, head order).
HeadScores make_scores(const ModelConfig& c, const std::string& fingerprint, const std::string& method,
                       const std::string& order, int items, const std::vector<double>& per_head, bool descending) {
  HeadScores s;
  s.method = method;
  s.model_fingerprint = fingerprint;
  s.order = order;
  s.n_layers = c.n_layers;
  s.n_heads = c.n_heads;
  s.n_kv_heads = c.n_kv_heads;
  s.items = items;
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h)
      s.ranked.push_back({{l, h}, per_head[static_cast<std::size_t>(l) * c.n_heads + h]});
  std::stable_sort(s.ranked.begin(), s.ranked.end(), [&](const HeadScore& a, const HeadScore& b) {
    return descending ? a.score > b.score : a.score < b.score;
  });
  return s;
}

std::string model_fingerprint_hex(const Model& model) {
  return fingerprint_hex(model_fingerprint(model.config, model.weights));
}

struct RetrievalObserver : ForwardObserver {
  const std::vector<int>* ids = nullptr;
  const std::vector<char>* in_span = nullptr;
  int first_row = 0;  // row predicting the first needle token
  int n_heads = 0;
  std::vector<double> hits;  // [n_layers * n_heads]
  void on_attention_output(const AttentionContext& ctx, HeadRows<float>) override {
    std::vector<double> w;
    for (int row = first_row; row + 1 < ctx.n_tokens(); ++row) {
      const int target = (*ids)[row + 1];
      for (int h = 0; h < ctx.n_heads(); ++h) {
        row_weights(ctx, row, h, w);
        const int j = static_cast<int>(std::max_element(w.begin(), w.end()) - w.begin());
        // entries are the sequence's own tokens: the cache started empty
        if (j < static_cast<int>(in_span->size()) && (*in_span)[j] && (*ids)[j] == target)
          hits[static_cast<std::size_t>(ctx.layer) * n_heads + h] += 1;
      }
    }
  }
};

}  // namespace

RetrievalProbeResult retrieval_probe(const Model& model, const RetrievalProbe& probe) {
  if (!model.tokenizer) throw Error(fmt::format("{}: model has no tokenizer", model.path));
  const Tokenizer& tok = *model.tokenizer;
  const ModelConfig& c = model.config;
  RetrievalProbeResult r;
  r.hit_rate.assign(static_cast<std::size_t>(c.n_layers) * c.n_heads, 0.0);
  if (probe.needle.empty()) return r;
  const PromptAnswerTokens t = encode_prompt_answer(tok, probe.prompt, probe.needle);
  const std::vector<int>& ids = t.ids;
  const std::size_t k0 = static_cast<std::size_t>(t.prompt_tokens);
  if (k0 < 1 || k0 >= ids.size()) return r;
  // character offsets of the context tokens in the decoded context
  std::string decoded;
  std::vector<std::size_t> start(k0), end(k0);
  int prev = -1;
  for (std::size_t i = 0; i < k0; ++i) {
    start[i] = decoded.size();
    if (ids[i] != tok.bos_id() && ids[i] != tok.eos_id()) decoded += tok.decode_token(prev, ids[i]);
    end[i] = decoded.size();
    prev = ids[i];
  }
  const std::size_t c0 = decoded.find(probe.needle);
  if (c0 == std::string::npos) return r;
  const std::size_t c1 = c0 + probe.needle.size();
  std::vector<char> in_span(k0, 0);
  for (std::size_t i = 0; i < k0; ++i)
    if (end[i] > start[i] && start[i] < c1 && end[i] > c0) {
      in_span[i] = 1;
      ++r.needle_span_tokens;
    }
  RetrievalObserver obs;
  obs.ids = &ids;
  obs.in_span = &in_span;
  obs.first_row = static_cast<int>(k0) - 1;
  obs.n_heads = c.n_heads;
  obs.hits.assign(r.hit_rate.size(), 0.0);
  Transformer tr(c, model.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::None;
  o.observer = &obs;
  tr.forward(ids, cache, o);
  r.needle_tokens = static_cast<int>(ids.size() - k0);
  for (std::size_t i = 0; i < r.hit_rate.size(); ++i) r.hit_rate[i] = obs.hits[i] / r.needle_tokens;
  return r;
}

HeadScores retrieval_scores(const Model& model, const std::vector<RetrievalProbe>& probes,
                            const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config;
  std::vector<double> sum(static_cast<std::size_t>(c.n_layers) * c.n_heads, 0.0);
  int scored = 0;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const RetrievalProbeResult r = retrieval_probe(model, probes[i]);
    if (r.needle_tokens > 0) {
      ++scored;
      for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += r.hit_rate[j];
    }
    if (progress) progress(static_cast<int>(i) + 1, static_cast<int>(probes.size()));
  }
  if (scored == 0)
    throw Error(fmt::format("retrieval scores: none of the {} probes has its answer inside its prompt",
                            probes.size()));
  for (double& s : sum) s /= scored;
  return make_scores(model.config, model_fingerprint_hex(model), "retrieval",
                     "retrieval score (hits / needle tokens), highest first; ties by layer, head",
                     scored, sum, true);
}

namespace {

struct EntropyObserver : ForwardObserver {
  int n_heads = 0;
  std::vector<double> sum;  // [n_layers * n_heads]
  long long rows = 0;       // rows counted per head
  void on_attention_output(const AttentionContext& ctx, HeadRows<float>) override {
    const int first = ctx.heads[0].length - ctx.n_tokens();  // entries before row 0
    std::vector<double> w;
    for (int row = std::max(0, 1 - first); row < ctx.n_tokens(); ++row) {
      for (int h = 0; h < ctx.n_heads(); ++h) {
        row_weights(ctx, row, h, w);
        double e = 0;
        for (double p : w)
          if (p > 0) e -= p * std::log(p);
        sum[static_cast<std::size_t>(ctx.layer) * n_heads + h] += e;
      }
      if (ctx.layer == 0) ++rows;
    }
  }
};

}  // namespace

HeadScores entropy_scores(const Model& model, const std::vector<std::vector<int>>& documents,
                          const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config;
  EntropyObserver obs;
  obs.n_heads = c.n_heads;
  obs.sum.assign(static_cast<std::size_t>(c.n_layers) * c.n_heads, 0.0);
  Transformer tr(c, model.weights);
  int used = 0;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    if (documents[d].size() >= 2) {
      KVCache cache = tr.make_cache();
      ForwardOptions o;
      o.logits = LogitsMode::None;
      o.observer = &obs;
      tr.forward(documents[d], cache, o);
      ++used;
    }
    if (progress) progress(static_cast<int>(d) + 1, static_cast<int>(documents.size()));
  }
  if (used == 0 || obs.rows == 0)
    throw Error("entropy scores: no document has 2 or more tokens");
  for (double& s : obs.sum) s /= static_cast<double>(obs.rows);
  return make_scores(model.config, model_fingerprint_hex(model), "entropy",
                     "mean attention entropy (nats), lowest (most focused) first; ties by layer, head",
                     used, obs.sum, false);
}

HeadScores make_head_scores(const ModelConfig& config, const std::string& model_fingerprint,
                            const std::string& method, const std::string& order, int items,
                            const std::vector<double>& per_head, bool descending) {
  if (per_head.size() != static_cast<std::size_t>(config.n_layers) * static_cast<std::size_t>(config.n_heads))
    throw Error(fmt::format("head scores: {} scores for {} x {} query heads", per_head.size(), config.n_layers,
                            config.n_heads));
  return make_scores(config, model_fingerprint, method, order, items, per_head, descending);
}

HeadScores influence_scores(const InfluenceCurves& curves, const ModelConfig& config,
                            const std::string& model_fingerprint) {
  if (curves.n_layers != config.n_layers || curves.n_kv_heads != config.n_kv_heads)
    throw Error(fmt::format(
        "influence scores: the curves are for {} layers x {} KV heads, the model has {} x {}",
        curves.n_layers, curves.n_kv_heads, config.n_layers, config.n_kv_heads));
  if (!model_fingerprint.empty() && !curves.model_fingerprint.empty() &&
      curves.model_fingerprint != model_fingerprint)
    throw Error(fmt::format("influence scores: the curves were made with model {}, not this model ({})",
                            curves.model_fingerprint, model_fingerprint));
  std::vector<double> per_head(static_cast<std::size_t>(config.n_layers) * config.n_heads, 0.0);
  int documents = 0;
  for (int l = 0; l < config.n_layers; ++l)
    for (int g = 0; g < config.n_kv_heads; ++g) {
      const HeadCurve* curve = curves.find(l, g);
      if (curve == nullptr)
        throw Error(fmt::format("influence scores: head {} was not swept (sweep --heads all)",
                                head_name(l, g)));
      const double area = curve->area();
      documents = std::max(documents, curve->documents);
      for (const QueryHeadId& q : query_heads_of_kv_head(config, l, g))
        per_head[static_cast<std::size_t>(l) * config.n_heads + q.head] = -area;
    }
  return make_scores(config, curves.model_fingerprint, "influence",
                     "minus the area under the KV head's influence curve (nats/token x ratio), highest first; "
                     "query heads of a group share it; ties by layer, head",
                     documents, per_head, true);
}

void write_head_scores(const std::string& path, const HeadScores& scores) {
  nlohmann::json j;
  j["method"] = scores.method;
  j["model_fingerprint"] = scores.model_fingerprint;
  j["order"] = scores.order;
  j["n_layers"] = scores.n_layers;
  j["n_heads"] = scores.n_heads;
  j["n_kv_heads"] = scores.n_kv_heads;
  j["items"] = scores.items;
  nlohmann::json heads = nlohmann::json::array();
  const int group = scores.n_kv_heads > 0 ? scores.n_heads / scores.n_kv_heads : 1;
  for (std::size_t i = 0; i < scores.ranked.size(); ++i) {
    const HeadScore& h = scores.ranked[i];
    heads.push_back({{"rank", i + 1},
                     {"name", query_head_name(h.head)},
                     {"layer", h.head.layer},
                     {"head", h.head.head},
                     {"kv_head", h.head.head / group},
                     {"score", h.score}});
  }
  j["heads"] = heads;
  write_file_atomic(path, j.dump(2) + "\n");
}

HeadScores read_head_scores(const std::string& path, const ModelConfig* config) {
  const nlohmann::json j = read_json_file(path);
  if (!j.is_object() || !j.contains("method") || !j.contains("heads"))
    throw Error(fmt::format("{}: not a head-scores file (no \"method\" and \"heads\"; write one with `kvcompact "
                            "head-scores`)",
                            path));
  HeadScores s;
  std::string field = "method";
  try {
    s.method = j.at("method").get<std::string>();
    field = "model_fingerprint";
    s.model_fingerprint = j.value("model_fingerprint", std::string());
    s.order = j.value("order", std::string());
    field = "n_layers";
    s.n_layers = json_int(j.at("n_layers"), path, "n_layers");
    field = "n_heads";
    s.n_heads = json_int(j.at("n_heads"), path, "n_heads");
    field = "n_kv_heads";
    s.n_kv_heads = j.value("n_kv_heads", s.n_heads);
    s.items = j.value("items", 0);
    field = "heads";
    const nlohmann::json& heads = j.at("heads");
    if (!heads.is_array()) throw Error(fmt::format("{}: heads: not an array", path));
    std::vector<long long> ranks;
    for (std::size_t i = 0; i < heads.size(); ++i) {
      field = fmt::format("heads[{}]", i);
      const nlohmann::json& e = heads[i];
      if (!e.at("layer").is_number_integer() || !e.at("head").is_number_integer())
        throw Error(fmt::format("{}: {}: layer and head must be whole numbers", path, field));
      HeadScore h;
      h.head.layer = json_int(e.at("layer"), path, "layer");
      h.head.head = json_int(e.at("head"), path, "head");
      h.score = e.at("score").get<double>();
      if (e.contains("name") && e.at("name").get<std::string>() != query_head_name(h.head))
        throw Error(fmt::format("{}: {}: name \"{}\" does not match layer {} head {}", path, field,
                                e.at("name").get<std::string>(), h.head.layer, h.head.head));
      if (e.contains("rank")) {
        if (!e.at("rank").is_number_integer()) throw Error(fmt::format("{}: {}: rank must be a whole number", path, field));
        ranks.push_back(e.at("rank").get<long long>());
      }
      s.ranked.push_back(h);
    }
    // The ranking is the "rank" field when every entry has one (a permutation of 1..N), else the
    // array order.
    if (!ranks.empty()) {
      if (ranks.size() != s.ranked.size())
        throw Error(fmt::format("{}: some heads have a \"rank\" and some do not", path));
      std::vector<std::size_t> order(ranks.size());
      for (std::size_t i = 0; i < ranks.size(); ++i) {
        if (ranks[i] < 1 || ranks[i] > static_cast<long long>(ranks.size()) || order[ranks[i] - 1] != 0)
          throw Error(fmt::format("{}: heads[{}]: rank {} is out of range or repeated (ranks must be 1..{})", path, i,
                                  ranks[i], ranks.size()));
        order[ranks[i] - 1] = i + 1;
      }
      std::vector<HeadScore> sorted;
      for (std::size_t r = 0; r < order.size(); ++r) sorted.push_back(s.ranked[order[r] - 1]);
      s.ranked = std::move(sorted);
    }
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: {}: {}", path, field, e.what()));
  }
  if (s.n_layers < 1 || s.n_heads < 1)
    throw Error(fmt::format("{}: n_layers and n_heads must be >= 1", path));
  if (config && (config->n_layers != s.n_layers || config->n_heads != s.n_heads))
    throw Error(fmt::format("{}: scores are for {} layers x {} heads, the model has {} x {}", path,
                            s.n_layers, s.n_heads, config->n_layers, config->n_heads));
  std::vector<char> seen(static_cast<std::size_t>(s.n_layers) * s.n_heads, 0);
  for (std::size_t i = 0; i < s.ranked.size(); ++i) {
    const HeadScore& h = s.ranked[i];
    if (h.head.layer < 0 || h.head.layer >= s.n_layers || h.head.head < 0 || h.head.head >= s.n_heads)
      throw Error(fmt::format("{}: heads[{}]: head {} is outside {} layers x {} heads", path, i,
                              query_head_name(h.head), s.n_layers, s.n_heads));
    char& flag = seen[static_cast<std::size_t>(h.head.layer) * s.n_heads + h.head.head];
    if (flag) throw Error(fmt::format("{}: heads[{}]: head {} listed twice", path, i, query_head_name(h.head)));
    flag = 1;
    if (!std::isfinite(h.score))
      throw Error(fmt::format("{}: heads[{}]: score is not finite", path, i));
  }
  if (s.ranked.size() != seen.size())
    throw Error(fmt::format("{}: lists {} heads, the model has {} (every head must be ranked)", path,
                            s.ranked.size(), seen.size()));
  return s;
}

}  // namespace kvcompact
