#include "heads/head_means.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "core/error.h"
#include "io/json_number.h"
#include "io/json_file.h"
#include "core/model_fingerprint.h"
#include "model/transformer.h"

namespace kvcompact {

namespace {

struct MeanAccumulator : ForwardObserver {
  std::vector<std::vector<double>> sum;  // [n_layers][n_heads*head_dim]
  void on_attention_output(const AttentionContext& ctx, HeadRows<float> att) override {
    std::vector<double>& s = sum[ctx.layer];
    for (int i = 0; i < att.n_tokens; ++i) {
      const std::span<const float> row = att.row(i);
      for (std::size_t j = 0; j < row.size(); ++j) s[j] += row[j];
    }
  }
};

}  // namespace

HeadMeans compute_head_means(const Model& model, const std::vector<std::vector<int>>& documents) {
  if (documents.empty()) throw Error("head means: no documents");
  const ModelConfig& c = model.config;
  const std::size_t width = static_cast<std::size_t>(c.n_heads) * c.head_dim;
  MeanAccumulator acc;
  acc.sum.assign(c.n_layers, std::vector<double>(width, 0.0));
  Transformer tr(c, model.weights);
  long long tokens = 0;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    if (documents[d].empty()) throw Error(fmt::format("head means: document {} is empty", d));
    KVCache cache = tr.make_cache();
    ForwardOptions o;
    o.logits = LogitsMode::None;
    o.observer = &acc;
    tr.forward(documents[d], cache, o);
    tokens += static_cast<long long>(documents[d].size());
  }
  HeadMeans m;
  m.model_fingerprint = fingerprint_hex(model_fingerprint(c, model.weights));
  m.n_layers = c.n_layers;
  m.n_heads = c.n_heads;
  m.head_dim = c.head_dim;
  m.tokens = tokens;
  m.values.assign(c.n_layers, std::vector<float>(width));
  for (int l = 0; l < c.n_layers; ++l)
    for (std::size_t j = 0; j < width; ++j)
      m.values[l][j] = static_cast<float>(acc.sum[l][j] / static_cast<double>(tokens));
  return m;
}

void check_head_means_model(const HeadMeans& m, const ModelConfig& c, const std::string& fingerprint,
                            const std::string& source) {
  if (m.n_layers != c.n_layers || m.n_heads != c.n_heads || m.head_dim != c.head_dim)
    throw Error(fmt::format("{}: head means are for {} layers x {} heads x head_dim {}, the model has {} x {} x {}",
                            source, m.n_layers, m.n_heads, m.head_dim, c.n_layers, c.n_heads, c.head_dim));
  if (m.model_fingerprint != fingerprint)
    throw Error(fmt::format("{}: head means of model {}, not this model ({})", source, m.model_fingerprint,
                            fingerprint));
}

void write_head_means(const std::string& path, const HeadMeans& means) {
  nlohmann::json j;
  j["model_fingerprint"] = means.model_fingerprint;
  j["n_layers"] = means.n_layers;
  j["n_heads"] = means.n_heads;
  j["head_dim"] = means.head_dim;
  j["tokens"] = means.tokens;
  j["values"] = means.values;
  write_file_atomic(path, j.dump() + "\n");
}

HeadMeans read_head_means(const std::string& path) {
  const nlohmann::json j = read_json_file(path);
  HeadMeans m;
  try {
    m.model_fingerprint = j.at("model_fingerprint").get<std::string>();
    m.n_layers = json_int(j.at("n_layers"), path, "n_layers");
    m.n_heads = json_int(j.at("n_heads"), path, "n_heads");
    m.head_dim = json_int(j.at("head_dim"), path, "head_dim");
    m.tokens = json_int64(j.at("tokens"), path, "tokens");
    m.values = j.at("values").get<std::vector<std::vector<float>>>();
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not a head-means file ({})", path, e.what()));
  }
  if (m.n_layers < 1 || m.n_heads < 1 || m.head_dim < 1 || m.tokens < 1)
    throw Error(fmt::format("{}: non-positive n_layers, n_heads, head_dim or tokens", path));
  if (static_cast<int>(m.values.size()) != m.n_layers)
    throw Error(fmt::format("{}: values has {} layers, n_layers is {}", path, m.values.size(), m.n_layers));
  for (int l = 0; l < m.n_layers; ++l) {
    if (m.values[l].size() != static_cast<std::size_t>(m.n_heads) * m.head_dim)
      throw Error(fmt::format("{}: values[{}] has {} numbers, expected n_heads x head_dim = {}", path,
                              l, m.values[l].size(), m.n_heads * m.head_dim));
    for (float v : m.values[l])
      if (!std::isfinite(v)) throw Error(fmt::format("{}: values[{}] holds a non-finite number", path, l));
  }
  return m;
}

}  // namespace kvcompact
