#include "compaction/chunked.h"

#include <fmt/format.h>

#include <algorithm>
#include <span>

#include "core/error.h"

namespace kvcompact {
namespace {

/// Entries [a, b) of a head whose entry i sits at position i (a context cache).
HeadCache slice(const HeadCache& h, std::size_t a, std::size_t b, std::size_t d) {
  HeadCache out;
  out.keys.assign(h.keys.begin() + a * d, h.keys.begin() + b * d);
  out.values.assign(h.values.begin() + a * d, h.values.begin() + b * d);
  out.beta.assign(h.beta.begin() + a, h.beta.begin() + b);
  out.positions.assign(h.positions.begin() + a, h.positions.begin() + b);
  return out;
}

void append(HeadCache& dst, const HeadCache& src) {
  dst.keys.insert(dst.keys.end(), src.keys.begin(), src.keys.end());
  dst.values.insert(dst.values.end(), src.values.begin(), src.values.end());
  dst.beta.insert(dst.beta.end(), src.beta.begin(), src.beta.end());
  dst.positions.insert(dst.positions.end(), src.positions.begin(), src.positions.end());
}

}  // namespace

void check_chunk_size(int chunk_size) {
  if (chunk_size < 0 || chunk_size == 1)
    throw Error(fmt::format("chunk size {}: must be 0 (the whole context at once) or at least 2 tokens", chunk_size));
}

KVCache compact_cache_chunked(const Transformer& model, const Tokenizer& tokenizer, const ContextPrefill& prefill,
                              const CompactionOptions& options) {
  const int C = options.chunk_size;
  check_chunk_size(C);
  if (C == 0) throw Error("chunked compaction: chunk size 0 (use compact_cache for the whole context)");
  if (!options.head_budgets.empty())
    throw Error("chunked compaction: per-head budgets are not supported with chunks (use a ratio)");
  for (const QuerySource& s : options.method.queries.sources)
    if (s.kind != QuerySourceKind::Repeat || s.cap > 0)
      throw Error("chunked compaction: the chunks' reference queries are repeat-prefill of each chunk "
                  "(queries=repeat, optionally with total:N); other sources and per-source caps are not supported");
  const KVCache& full = prefill.cache;
  const int T = static_cast<int>(prefill.context.size());
  if (T < 2 || full.next_position != T)
    throw Error(fmt::format("chunked compaction: the prefill holds {} context tokens for a cache at position {}", T,
                            full.next_position));
  const int L = full.n_layers(), H = full.n_kv_heads();
  const std::size_t d = static_cast<std::size_t>(full.head_dim());
  const int group = prefill.context_queries.count(0, 0) / std::max(T, 1);
  KVCache out(L, H, full.head_dim());
  out.next_position = full.next_position;
  for (int l = 0; l < L; ++l) {
    out.set_layer_window(l, full.layer_window(l));
    if (full.sliding(l))
      for (int h = 0; h < H; ++h) out.head(l, h) = full.head(l, h);  // never compacted
  }
  for (int a = 0, chunk = 0; a < T; a += C, ++chunk) {
    const int b = std::min(T, a + C);
    KVCache part(L, H, full.head_dim());
    part.next_position = T;
    for (int l = 0; l < L; ++l) {
      part.set_layer_window(l, full.layer_window(l));
      for (int h = 0; h < H; ++h)  // sliding layers: their whole cache (the paper's rule), never compacted
        part.head(l, h) = full.sliding(l) ? full.head(l, h) : slice(full.head(l, h), a, b, d);
    }
    // kRepeatPrompt, then the chunk's tokens (repeat_queries_over drops the first token it is
    // given: the BOS for chunk 0, the token before the chunk otherwise).
    const std::span<const int> tokens(prefill.context.data() + std::max(a - 1, 0), static_cast<std::size_t>(b - std::max(a - 1, 0)));
    ReferenceQueries q = repeat_queries_over(model, tokenizer, part, tokens);
    q.subsample(options.method.queries.total_cap, options.seed + static_cast<uint64_t>(chunk));
    ReferenceQueries cq(L, H, full.head_dim());
    for (int l = 0; l < L; ++l)
      for (int h = 0; h < H; ++h) {
        const std::vector<float>& rows = prefill.context_queries.at(l, h);
        if (!rows.empty())
          cq.at(l, h).assign(rows.begin() + static_cast<std::size_t>(a) * group * d,
                             rows.begin() + static_cast<std::size_t>(b) * group * d);
      }
    CompactionOptions co = options;
    co.chunk_size = 0;
    co.seed = options.seed + static_cast<uint64_t>(chunk);
    const KVCache compacted = compact_cache(part, q, co, &cq);
    for (int l = 0; l < L; ++l)
      if (!full.sliding(l))
        for (int h = 0; h < H; ++h) append(out.head(l, h), compacted.head(l, h));
  }
  return out;
}

}  // namespace kvcompact
