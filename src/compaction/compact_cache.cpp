#include "compaction/compact_cache.h"

#include <fmt/format.h>

#include <exception>

#include "compaction/baselines.h"
#include "compaction/head_compaction.h"
#include "ops/rope.h"
#include "core/error.h"

namespace kvcompact {

std::vector<MethodSpec> parse_method_list(std::string_view text) {
  const auto families = method_family_names();
  auto starts_spec = [&](std::string_view item) {
    for (const auto& f : families)
      if (item == f || (item.size() > f.size() && item.substr(0, f.size()) == f && item[f.size()] == ':'))
        return true;
    return false;
  };
  std::vector<std::string> specs;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (!item.empty()) {
      if (specs.empty() || starts_spec(item)) specs.emplace_back(item);
      else {
        specs.back() += ',';
        specs.back() += item;
      }
    }
    start = end + 1;
  }
  if (specs.empty()) throw Error("--methods: empty list");
  std::vector<MethodSpec> out;
  for (const auto& s : specs) out.push_back(parse_method_spec(s));
  return out;
}

uint64_t head_seed(uint64_t seed, int layer, int kv_head, int n_kv_heads) {
  return seed * 1000003ULL + static_cast<uint64_t>(layer * n_kv_heads + kv_head);
}

void set_rope(CompactionOptions& options, const ModelConfig& config) {
  const int d = config.head_dim;
  options.rope_inv_freq.assign(static_cast<std::size_t>(d / 2), 0.0f);
  rope_inv_freq(d, config.rope_theta, config.rope_scaling, options.rope_inv_freq.data());
  options.rope_half_split = config.rope_style == RopeStyle::HalfSplit;
}

HeadCache to_head_cache(CompactedHead c, const HeadCache& source) {
  HeadCache dst;
  dst.keys = std::move(c.keys);
  dst.values = std::move(c.values);
  dst.beta = std::move(c.beta);
  dst.positions.resize(c.selected.size());
  for (std::size_t i = 0; i < c.selected.size(); ++i) dst.positions[i] = source.positions.at(c.selected[i]);
  return dst;
}

namespace {

/// The shared part of compact_cache and compact_cache_layer: argument checks, the per-head
/// inputs and budgets, and the compaction of one head or of one layer-scoped layer.
class CacheCompactor {
 public:
  CacheCompactor(const KVCache& full, const ReferenceQueries& queries, const CompactionOptions& options,
                 const ReferenceQueries* context_queries)
      : full_(full), queries_(queries), options_(options), context_queries_(context_queries),
        L_(full.n_layers()), H_(full.n_kv_heads()), d_(full.head_dim()) {
    if (queries.n_layers() != L_ || queries.n_kv_heads() != H_ || queries.head_dim() != d_)
      throw Error(fmt::format(
          "reference queries are shaped {}x{}x{} but the cache is {} layers x {} KV heads x head_dim {}",
          queries.n_layers(), queries.n_kv_heads(), queries.head_dim(), L_, H_, d_));
    if (context_queries && (context_queries->n_layers() != L_ || context_queries->n_kv_heads() != H_ ||
                            context_queries->head_dim() != d_))
      throw Error("context queries are shaped differently from the cache");
    if (uses_context_queries(options.method) && context_queries == nullptr)
      throw Error(fmt::format("method {} needs the context's own queries", to_string(options.method)));
    budgets_ = !options.head_budgets.empty();
    if (budgets_ && options.head_budgets.size() != static_cast<std::size_t>(L_) * H_)
      throw Error(fmt::format("per-head budgets list {} heads, the cache has {}", options.head_budgets.size(), L_ * H_));
    if (!budgets_) kept_entries(options.ratio, 1);  // validates the ratio before any work
    if (!options.rope_inv_freq.empty() && options.rope_inv_freq.size() != static_cast<std::size_t>(d_ / 2))
      throw Error(fmt::format("RoPE frequencies list {} pairs, head_dim {} has {}", options.rope_inv_freq.size(), d_,
                              d_ / 2));
  }

  int n_layers() const { return L_; }
  int n_kv_heads() const { return H_; }
  bool layer_scoped() const { return is_layer_scoped(options_.method); }

  HeadCompactionInput input_for(int layer, int kv) const {
    const HeadCache& src = full_.head(layer, kv);
    HeadCompactionInput in;
    in.keys = src.keys.data();
    in.values = src.values.data();
    in.queries = queries_.at(layer, kv).data();
    in.T = static_cast<int>(src.length());
    in.n_queries = queries_.count(layer, kv);
    in.head_dim = d_;
    if (context_queries_) {
      in.context_queries = context_queries_->at(layer, kv).data();
      in.group_size = in.T > 0 ? context_queries_->count(layer, kv) / in.T : 1;
    }
    if (!options_.rope_inv_freq.empty()) in.rope_inv_freq = options_.rope_inv_freq.data();
    in.rope_half_split = options_.rope_half_split;
    return in;
  }

  int budget_for(int layer, int kv) const {
    const int idx = layer * H_ + kv, T = static_cast<int>(full_.head(layer, kv).length());
    const int t = budgets_ ? options_.head_budgets[static_cast<std::size_t>(idx)] : kept_entries(options_.ratio, T);
    if (t < 0 || t > T) throw Error(fmt::format("head L{}H{}: budget {} outside [0, {}]", layer, kv, t, T));
    return t;
  }

  /// One head of a per-head method (sliding layers: the head unchanged).
  HeadCache head(int layer, int kv) const {
    if (full_.sliding(layer)) return full_.head(layer, kv);  // sliding-window layers keep their window
    CompactedHead c = compact_head(options_.method, input_for(layer, kv), budget_for(layer, kv), layer, L_,
                                   head_seed(options_.seed, layer, kv, H_));
    return to_head_cache(std::move(c), full_.head(layer, kv));
  }

  /// Every head of one layer of a layer-scoped method, from the heads' scores [H].
  std::vector<HeadCache> layer_from_scores(int layer, const std::vector<std::vector<double>>& layer_scores) const {
    std::vector<HeadCache> out;
    if (full_.sliding(layer)) {  // never compacted (see compact_cache)
      for (int kv = 0; kv < H_; ++kv) out.push_back(full_.head(layer, kv));
      return out;
    }
    std::vector<int> b;
    for (int kv = 0; kv < H_; ++kv) b.push_back(budget_for(layer, kv));
    const std::vector<std::vector<int>> sel = layer_scoped_select(options_.method, layer_scores, b);
    for (int kv = 0; kv < H_; ++kv)
      out.push_back(to_head_cache(head_from_selection(input_for(layer, kv), sel[static_cast<std::size_t>(kv)]),
                                  full_.head(layer, kv)));
    return out;
  }

  std::vector<double> scores(int layer, int kv) const {
    return layer_scoped_head_scores(options_.method, input_for(layer, kv));
  }

 private:
  const KVCache& full_;
  const ReferenceQueries& queries_;
  const CompactionOptions& options_;
  const ReferenceQueries* context_queries_;
  int L_, H_, d_;
  bool budgets_ = false;
};

/// Runs f(i) for i in [0, n) in parallel (OpenMP), rethrowing the first exception.
template <class F>
void parallel_for(int n, F&& f) {
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int i = 0; i < n; ++i) {
    try {
      f(i);
    } catch (...) {
#pragma omp critical(kvc_compact_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace

KVCache compact_cache(const KVCache& full, const ReferenceQueries& queries, const CompactionOptions& options,
                      const ReferenceQueries* context_queries) {
  const CacheCompactor cc(full, queries, options, context_queries);
  const int L = cc.n_layers(), H = cc.n_kv_heads();
  KVCache out(L, H, full.head_dim());
  out.next_position = full.next_position;
  for (int l = 0; l < L; ++l) out.set_layer_window(l, full.layer_window(l));
  if (cc.layer_scoped()) {  // score every head first, then select layer by layer
    std::vector<std::vector<double>> scores(static_cast<std::size_t>(L) * H);
    parallel_for(L * H, [&](int idx) { scores[static_cast<std::size_t>(idx)] = cc.scores(idx / H, idx % H); });
    for (int layer = 0; layer < L; ++layer) {
      std::vector<HeadCache> heads = cc.layer_from_scores(
          layer, std::vector<std::vector<double>>(scores.begin() + layer * H, scores.begin() + (layer + 1) * H));
      for (int kv = 0; kv < H; ++kv) out.head(layer, kv) = std::move(heads[static_cast<std::size_t>(kv)]);
    }
    return out;
  }
  parallel_for(L * H, [&](int idx) { out.head(idx / H, idx % H) = cc.head(idx / H, idx % H); });
  return out;
}

std::vector<HeadCache> compact_cache_layer(const KVCache& full, int layer, const ReferenceQueries& queries,
                                           const CompactionOptions& options, const ReferenceQueries* context_queries) {
  const CacheCompactor cc(full, queries, options, context_queries);
  const int H = cc.n_kv_heads();
  if (layer < 0 || layer >= cc.n_layers())
    throw Error(fmt::format("compact_cache_layer: no layer {} (cache has {})", layer, cc.n_layers()));
  if (cc.layer_scoped()) {
    std::vector<std::vector<double>> scores(static_cast<std::size_t>(H));
    parallel_for(H, [&](int kv) { scores[static_cast<std::size_t>(kv)] = cc.scores(layer, kv); });
    return cc.layer_from_scores(layer, scores);
  }
  std::vector<HeadCache> heads(static_cast<std::size_t>(H));
  parallel_for(H, [&](int kv) { heads[static_cast<std::size_t>(kv)] = cc.head(layer, kv); });
  return heads;
}

}  // namespace kvcompact
