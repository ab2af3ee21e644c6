#include "compaction/compact_cache.h"

#include <fmt/format.h>

#include <exception>

#include "compaction/baselines.h"
#include "compaction/head_compaction.h"
#include "io/error.h"

namespace kvcompact {

namespace {
constexpr const char* kMethodNames[] = {"am", "random", "recent", "attn-nofit"};
}

CompactionMethod parse_compaction_method(std::string_view name) {
  for (int i = 0; i < 4; ++i)
    if (name == kMethodNames[i]) return static_cast<CompactionMethod>(i);
  throw Error(fmt::format("unknown compaction method '{}' (valid: {})", name,
                          fmt::join(compaction_method_names(), ", ")));
}

std::string compaction_method_name(CompactionMethod method) {
  return kMethodNames[static_cast<int>(method)];
}

std::vector<std::string> compaction_method_names() {
  return {std::begin(kMethodNames), std::end(kMethodNames)};
}

uint64_t head_seed(uint64_t seed, int layer, int kv_head, int n_kv_heads) {
  return seed * 1000003ULL + static_cast<uint64_t>(layer * n_kv_heads + kv_head);
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

KVCache compact_cache(const KVCache& full, const ReferenceQueries& queries,
                      const CompactionOptions& options) {
  const int L = full.n_layers(), H = full.n_kv_heads(), d = full.head_dim();
  if (queries.n_layers() != L || queries.n_kv_heads() != H || queries.head_dim() != d)
    throw Error(fmt::format(
        "reference queries are shaped {}x{}x{} but the cache is {} layers x {} KV heads x head_dim {}",
        queries.n_layers(), queries.n_kv_heads(), queries.head_dim(), L, H, d));
  kept_entries(options.ratio, 1);  // validates the ratio before any work

  KVCache out(L, H, d);
  out.next_position = full.next_position;
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (int idx = 0; idx < L * H; ++idx) {
    const int layer = idx / H, kv = idx % H;
    try {
      const HeadCache& src = full.head(layer, kv);
      HeadCompactionInput in;
      in.keys = src.keys.data();
      in.values = src.values.data();
      in.queries = queries.at(layer, kv).data();
      in.T = static_cast<int>(src.length());
      in.n_queries = queries.count(layer, kv);
      in.head_dim = d;
      const int t = kept_entries(options.ratio, in.T);
      CompactedHead c;
      switch (options.method) {
        case CompactionMethod::AttentionMatching:
          c = compact_attention_matching(in, t, options.am);
          break;
        case CompactionMethod::Random:
          c = compact_random(in, t, head_seed(options.seed, layer, kv, H));
          break;
        case CompactionMethod::Recent: c = compact_recent(in, t); break;
        case CompactionMethod::AttnNoFit: c = compact_attn_nofit(in, t, options.am.score); break;
      }
      out.head(layer, kv) = to_head_cache(std::move(c), src);
    } catch (...) {
#pragma omp critical(kvc_compact_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  return out;
}

}  // namespace kvcompact
