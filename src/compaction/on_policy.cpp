#include "compaction/on_policy.h"

#include <fmt/format.h>

#include <vector>

#include "compaction/chunked.h"
#include "core/error.h"

namespace kvcompact {
namespace {

/// Runs layer `layer` of `tokens` (hidden states x entering it) over `cache`, then drops the
/// entries the run appended to that layer; returns the hidden states leaving the layer.
std::vector<float> run_layer(const Transformer& model, const QuerySequence& seq, const std::vector<float>& x,
                             KVCache& cache, int layer, ForwardObserver* observer) {
  const int T = cache.next_position;
  std::vector<std::size_t> lengths;
  for (int kv = 0; kv < cache.n_kv_heads(); ++kv) lengths.push_back(cache.head(layer, kv).length());
  std::vector<float> out;
  ForwardOptions opt;
  opt.logits = LogitsMode::None;
  opt.first_layer = layer;
  opt.end_layer = layer + 1;
  opt.layer_input = x.data();
  opt.hidden_out = &out;
  opt.observer = observer;
  model.forward(seq.tokens, cache, opt);
  for (int kv = 0; kv < cache.n_kv_heads(); ++kv) cache.head(layer, kv).truncate(lengths[static_cast<std::size_t>(kv)]);
  cache.next_position = T;
  return out;
}

}  // namespace

KVCache compact_cache_on_policy(const Transformer& model, const ContextPrefill& prefill,
                                const CompactionOptions& options) {
  const uint64_t seed = options.seed;  // the query plan's seed
  const QuerySpec& spec = options.method.queries;
  for (const QuerySource& s : spec.sources)
    if (s.kind != QuerySourceKind::Repeat && s.kind != QuerySourceKind::SelfStudy)
      throw Error(fmt::format("on-policy queries: the source {} has no token sequence to run again (use repeat or "
                              "self-study)", query_source_name(s.kind)));
  if (prefill.sequences.empty())
    throw Error("on-policy queries: the prefill ran no repeat or self-study sequence");
  const ModelConfig& c = model.config();
  const KVCache& full = prefill.cache;
  if (full.n_layers() != c.n_layers || full.n_kv_heads() != c.n_kv_heads || full.head_dim() != c.head_dim)
    throw Error("on-policy queries: the prefill cache is not shaped for this model");
  KVCache work = full;  // layers < l compacted, layers >= l full, while layer l is processed

  // Hidden states entering layer 0: the sequences' embeddings.
  std::vector<std::vector<float>> x(prefill.sequences.size());
  for (std::size_t s = 0; s < x.size(); ++s) {
    ForwardOptions opt;
    opt.logits = LogitsMode::None;
    opt.end_layer = 0;
    opt.hidden_out = &x[s];
    KVCache scratch = model.make_cache();
    scratch.next_position = full.next_position;
    model.forward(prefill.sequences[s].tokens, scratch, opt);
  }

  for (int l = 0; l < c.n_layers; ++l) {
    if (!full.sliding(l)) {
      // This layer's on-policy queries, per source, capped as collect_reference_queries caps them.
      std::vector<ReferenceQueries> per_source(spec.sources.size(),
                                               ReferenceQueries(c.n_layers, c.n_kv_heads, c.head_dim));
      for (std::size_t s = 0; s < x.size(); ++s) {
        const QuerySequence& seq = prefill.sequences[s];
        // a one-layer forward: only layer l's queries are collected
        QueryCollector collect(c, seq.skip, per_source.at(static_cast<std::size_t>(seq.source)));
        run_layer(model, seq, x[s], work, l, &collect);
      }
      ReferenceQueries queries(c.n_layers, c.n_kv_heads, c.head_dim);
      for (std::size_t s = 0; s < per_source.size(); ++s) {
        per_source[s].subsample(spec.sources[s].cap, seed + 101 * (s + 1));
        queries.append(per_source[s]);
      }
      queries.subsample(spec.total_cap, seed);
      std::vector<HeadCache> heads = compact_cache_layer(full, l, queries, options, &prefill.context_queries);
      for (int kv = 0; kv < c.n_kv_heads; ++kv) work.head(l, kv) = std::move(heads[static_cast<std::size_t>(kv)]);
    }
    if (l + 1 < c.n_layers)  // hidden states entering layer l + 1, through the compacted layer l
      for (std::size_t s = 0; s < x.size(); ++s) x[s] = run_layer(model, prefill.sequences[s], x[s], work, l, nullptr);
  }
  work.next_position = full.next_position;
  return work;
}

KVCache compact_prefill(const Transformer& model, const Tokenizer& tokenizer, const ContextPrefill& prefill,
                        const CompactionOptions& options) {
  check_chunk_size(options.chunk_size);
  if (options.chunk_size > 0) {
    if (options.method.queries.on_policy)
      throw Error("chunked compaction: on-policy queries (queries=...+onpolicy) are not supported with chunks");
    return compact_cache_chunked(model, tokenizer, prefill, options);
  }
  if (options.method.queries.on_policy) return compact_cache_on_policy(model, prefill, options);
  return compact_cache(prefill.cache, prefill.queries, options, &prefill.context_queries);
}

}  // namespace kvcompact
