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

KVCache compact_cache(const KVCache& full, const ReferenceQueries& queries, const CompactionOptions& options,
                      const ReferenceQueries* context_queries) {
  const int L = full.n_layers(), H = full.n_kv_heads(), d = full.head_dim();
  if (queries.n_layers() != L || queries.n_kv_heads() != H || queries.head_dim() != d)
    throw Error(fmt::format(
        "reference queries are shaped {}x{}x{} but the cache is {} layers x {} KV heads x head_dim {}",
        queries.n_layers(), queries.n_kv_heads(), queries.head_dim(), L, H, d));
  if (context_queries && (context_queries->n_layers() != L || context_queries->n_kv_heads() != H ||
                          context_queries->head_dim() != d))
    throw Error("context queries are shaped differently from the cache");
  if (uses_context_queries(options.method) && context_queries == nullptr)
    throw Error(fmt::format("method {} needs the context's own queries", to_string(options.method)));
  const bool budgets = !options.head_budgets.empty();
  if (budgets && options.head_budgets.size() != static_cast<std::size_t>(L) * H)
    throw Error(fmt::format("per-head budgets list {} heads, the cache has {}", options.head_budgets.size(), L * H));
  if (!budgets) kept_entries(options.ratio, 1);  // validates the ratio before any work

  if (!options.rope_inv_freq.empty() && options.rope_inv_freq.size() != static_cast<std::size_t>(d / 2))
    throw Error(fmt::format("RoPE frequencies list {} pairs, head_dim {} has {}", options.rope_inv_freq.size(), d, d / 2));

  auto input_for = [&](int layer, int kv) {
    const HeadCache& src = full.head(layer, kv);
    HeadCompactionInput in;
    in.keys = src.keys.data();
    in.values = src.values.data();
    in.queries = queries.at(layer, kv).data();
    in.T = static_cast<int>(src.length());
    in.n_queries = queries.count(layer, kv);
    in.head_dim = d;
    if (context_queries) {
      in.context_queries = context_queries->at(layer, kv).data();
      in.group_size = in.T > 0 ? context_queries->count(layer, kv) / in.T : 1;
    }
    if (!options.rope_inv_freq.empty()) in.rope_inv_freq = options.rope_inv_freq.data();
    in.rope_half_split = options.rope_half_split;
    return in;
  };
  auto budget_for = [&](int idx, int T) {
    const int t = budgets ? options.head_budgets[static_cast<std::size_t>(idx)] : kept_entries(options.ratio, T);
    if (t < 0 || t > T)
      throw Error(fmt::format("head L{}H{}: budget {} outside [0, {}]", idx / H, idx % H, t, T));
    return t;
  };

  KVCache out(L, H, d);
  out.next_position = full.next_position;
  for (int l = 0; l < L; ++l) out.set_layer_window(l, full.layer_window(l));
  std::exception_ptr failure;
  const bool layer_scoped = is_layer_scoped(options.method);
  std::vector<std::vector<double>> scores(layer_scoped ? static_cast<std::size_t>(L) * H : 0);
  if (layer_scoped) {
#pragma omp parallel for schedule(dynamic, 1)
    for (int idx = 0; idx < L * H; ++idx) {
      try {
        scores[static_cast<std::size_t>(idx)] = layer_scoped_head_scores(options.method, input_for(idx / H, idx % H));
      } catch (...) {
#pragma omp critical(kvc_compact_failure)
        if (!failure) failure = std::current_exception();
      }
    }
    if (failure) std::rethrow_exception(failure);
    for (int layer = 0; layer < L; ++layer) {
      if (full.sliding(layer)) {  // never compacted (see above)
        for (int kv = 0; kv < H; ++kv) out.head(layer, kv) = full.head(layer, kv);
        continue;
      }
      std::vector<std::vector<double>> layer_scores(scores.begin() + layer * H, scores.begin() + (layer + 1) * H);
      std::vector<int> b;
      for (int kv = 0; kv < H; ++kv) b.push_back(budget_for(layer * H + kv, static_cast<int>(full.head(layer, kv).length())));
      const std::vector<std::vector<int>> sel = layer_scoped_select(options.method, layer_scores, b);
      for (int kv = 0; kv < H; ++kv)
        out.head(layer, kv) = to_head_cache(head_from_selection(input_for(layer, kv), sel[static_cast<std::size_t>(kv)]),
                                            full.head(layer, kv));
    }
    return out;
  }
#pragma omp parallel for schedule(dynamic, 1)
  for (int idx = 0; idx < L * H; ++idx) {
    const int layer = idx / H, kv = idx % H;
    try {
      if (full.sliding(layer)) {  // sliding-window layers keep their window: never compacted
        out.head(layer, kv) = full.head(layer, kv);
        continue;
      }
      const HeadCompactionInput in = input_for(layer, kv);
      const int t = budget_for(idx, in.T);
      CompactedHead c = compact_head(options.method, in, t, layer, L, head_seed(options.seed, layer, kv, H));
      out.head(layer, kv) = to_head_cache(std::move(c), full.head(layer, kv));
    } catch (...) {
#pragma omp critical(kvc_compact_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace kvcompact
