#include "compaction/reference_queries.h"

#include <fmt/format.h>

#include "io/error.h"

namespace kvcompact {

ReferenceQueries::ReferenceQueries(int n_layers, int n_kv_heads, int head_dim)
    : n_layers_(n_layers), n_kv_heads_(n_kv_heads), head_dim_(head_dim),
      rows_(static_cast<std::size_t>(n_layers) * n_kv_heads) {}

std::size_t ReferenceQueries::index(int layer, int kv_head) const {
  if (layer < 0 || layer >= n_layers_ || kv_head < 0 || kv_head >= n_kv_heads_)
    throw Error(fmt::format("reference queries: no head L{}H{}", layer, kv_head));
  return static_cast<std::size_t>(layer) * n_kv_heads_ + kv_head;
}

const std::vector<float>& ReferenceQueries::at(int layer, int kv_head) const {
  return rows_[index(layer, kv_head)];
}
std::vector<float>& ReferenceQueries::at(int layer, int kv_head) { return rows_[index(layer, kv_head)]; }

int ReferenceQueries::count(int layer, int kv_head) const {
  return static_cast<int>(rows_[index(layer, kv_head)].size() / head_dim_);
}

namespace {

/// Copies the queries of rows [skip, n) into per-KV-head lists.
class QueryCollector : public ForwardObserver {
 public:
  QueryCollector(const ModelConfig& c, int skip, ReferenceQueries& out) : c_(c), skip_(skip), out_(out) {}
  void on_queries(int layer, const float* q, int n_tokens, int) override {
    const int d = c_.head_dim, g = c_.group_size();
    for (int kv = 0; kv < c_.n_kv_heads; ++kv) {
      auto& rows = out_.at(layer, kv);
      rows.reserve(rows.size() + static_cast<std::size_t>(n_tokens - skip_) * g * d);
      for (int i = skip_; i < n_tokens; ++i)
        for (int h = kv * g; h < (kv + 1) * g; ++h) {
          const float* src = q + (static_cast<std::size_t>(i) * c_.n_heads + h) * d;
          rows.insert(rows.end(), src, src + d);
        }
    }
  }

 private:
  const ModelConfig& c_;
  int skip_;
  ReferenceQueries& out_;
};

}  // namespace

ContextPrefill repeat_prefill(const Transformer& model, const Tokenizer& tokenizer,
                              std::span<const int> context) {
  const ModelConfig& c = model.config();
  const int T = static_cast<int>(context.size());
  if (T < 2) throw Error(fmt::format("repeat-prefill needs a context of at least 2 tokens, got {}", T));
  ContextPrefill out;
  KVCache cache = model.make_cache();
  ForwardOptions first;
  first.logits = LogitsMode::Last;
  out.last_logits = model.forward(context, cache, first);
  out.cache = cache;  // the context's own cache, before the repeat

  std::vector<int> tail = tokenizer.encode(kRepeatPrompt, /*add_bos=*/false);
  const int skip = static_cast<int>(tail.size());
  tail.insert(tail.end(), context.begin() + 1, context.end());
  out.queries = ReferenceQueries(c.n_layers, c.n_kv_heads, c.head_dim);
  QueryCollector collector(c, skip, out.queries);
  ForwardOptions second;
  second.logits = LogitsMode::None;
  second.observer = &collector;
  model.forward(tail, cache, second);
  return out;
}

}  // namespace kvcompact
