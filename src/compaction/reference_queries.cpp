#include "compaction/reference_queries.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "core/error.h"
#include "model/sampler.h"

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

void ReferenceQueries::append(const ReferenceQueries& other) {
  if (other.n_layers_ != n_layers_ || other.n_kv_heads_ != n_kv_heads_ || other.head_dim_ != head_dim_)
    throw Error("reference queries: cannot combine query sets of different shapes");
  for (std::size_t i = 0; i < rows_.size(); ++i)
    rows_[i].insert(rows_[i].end(), other.rows_[i].begin(), other.rows_[i].end());
}

void ReferenceQueries::subsample(int cap, uint64_t seed) {
  if (cap <= 0) return;
  const std::size_t d = static_cast<std::size_t>(head_dim_);
  for (std::size_t h = 0; h < rows_.size(); ++h) {
    const int n = static_cast<int>(rows_[h].size() / d);
    if (n <= cap) continue;
    std::vector<int> idx(n);
    std::iota(idx.begin(), idx.end(), 0);
    std::mt19937_64 rng(seed + h);
    for (int i = 0; i < cap; ++i) {  // partial Fisher-Yates
      std::uniform_int_distribution<int> pick(i, n - 1);
      std::swap(idx[i], idx[pick(rng)]);
    }
    idx.resize(cap);
    std::sort(idx.begin(), idx.end());
    std::vector<float> kept;
    kept.reserve(static_cast<std::size_t>(cap) * d);
    for (int i : idx) kept.insert(kept.end(), rows_[h].begin() + i * d, rows_[h].begin() + (i + 1) * d);
    rows_[h] = std::move(kept);
  }
}

void QueryCollector::on_queries(const QueryView& v) {
  const int d = c_.head_dim, g = c_.group_size(), n_tokens = v.q.n_tokens;
  if (n_tokens <= skip_) return;
  for (int kv = 0; kv < c_.n_kv_heads; ++kv) {
    auto& rows = out_.at(v.layer, kv);
    rows.reserve(rows.size() + static_cast<std::size_t>(n_tokens - skip_) * g * d);
    for (int i = skip_; i < n_tokens; ++i)
      for (int h = kv * g; h < (kv + 1) * g; ++h) {
        const std::span<const float> src = v.q.head(i, h);
        rows.insert(rows.end(), src.begin(), src.end());
      }
  }
}

namespace {

ReferenceQueries empty_like(const ModelConfig& c) { return ReferenceQueries(c.n_layers, c.n_kv_heads, c.head_dim); }

/// Queries of the repeat: kRepeatPrompt then context[1:], fed after the context cache and rolled
/// back (KVCache::mark), so `cache` is returned as it came.
ReferenceQueries repeat_queries(const Transformer& model, const Tokenizer& tokenizer, KVCache& cache,
                                std::span<const int> context, int source, std::vector<QuerySequence>& sequences) {
  std::vector<int> tail = tokenizer.encode(kRepeatPrompt, /*add_bos=*/false);
  const int skip = static_cast<int>(tail.size());
  tail.insert(tail.end(), context.begin() + 1, context.end());
  sequences.push_back(QuerySequence{source, tail, skip});
  ReferenceQueries q = empty_like(model.config());
  QueryCollector collector(model.config(), skip, q);
  ForwardOptions opt;
  opt.logits = LogitsMode::None;
  opt.observer = &collector;
  const CacheMark mark = cache.mark();
  model.forward(tail, cache, opt);
  cache.rollback(mark);
  return q;
}

/// Queries of self-study generations continuing the context cache; each generation is rolled back
/// (KVCache::mark), so context_cache is returned as it came.
ReferenceQueries self_study_queries(const Transformer& model, const Tokenizer& tokenizer,
                                    KVCache& context_cache, std::span<const float> last_logits,
                                    const SelfStudyOptions& o, uint64_t seed, int source,
                                    std::vector<QuerySequence>& sequences) {
  if (o.count < 0 || o.length < 1)
    throw Error(fmt::format("self-study: count {} and length {} must be >= 0 and >= 1", o.count, o.length));
  ReferenceQueries q = empty_like(model.config());
  QueryCollector collector(model.config(), 0, q);
  ForwardOptions opt;
  opt.logits = LogitsMode::Last;
  opt.observer = &collector;
  const CacheMark context_mark = context_cache.mark();
  for (int s = 0; s < o.count; ++s) {
    KVCache& cache = context_cache;
    cache.rollback(context_mark);
    // Sized by the tokenizer: padded vocabulary rows (no token) are never drawn.
    Sampler sampler(std::min(model.config().vocab_size, tokenizer.vocab_size()), o.temperature, o.top_p,
                    seed * 7919 + s + 1);
    std::vector<float> logits(last_logits.begin(), last_logits.end());
    QuerySequence fed{source, {}, 0};
    if (!o.prompts.empty()) {
      const std::vector<int> prompt = tokenizer.encode(o.prompts[s % o.prompts.size()], false);
      if (!prompt.empty()) logits = model.forward(prompt, cache, opt);
      fed.tokens = prompt;
    }
    for (int i = 0; i < o.length; ++i) {
      const int next = sampler.sample(logits);
      if (next == tokenizer.eos_id() || next == tokenizer.bos_id()) break;
      logits = model.forward(std::span<const int>(&next, 1), cache, opt);
      fed.tokens.push_back(next);
    }
    if (!fed.tokens.empty()) sequences.push_back(std::move(fed));
  }
  context_cache.rollback(context_mark);
  return q;
}

/// Gaussian directions scaled by norms resampled from the head's real context queries.
ReferenceQueries random_queries(const ReferenceQueries& real, int count, uint64_t seed) {
  ReferenceQueries q(real.n_layers(), real.n_kv_heads(), real.head_dim());
  const int d = real.head_dim();
  for (int l = 0; l < real.n_layers(); ++l)
    for (int h = 0; h < real.n_kv_heads(); ++h) {
      const std::vector<float>& src = real.at(l, h);
      const int n_real = real.count(l, h);
      std::vector<float> norms(n_real);
      for (int i = 0; i < n_real; ++i) {
        double ss = 0;
        for (int j = 0; j < d; ++j) ss += double(src[std::size_t(i) * d + j]) * src[std::size_t(i) * d + j];
        norms[i] = static_cast<float>(std::sqrt(ss));
      }
      const int n = count > 0 ? count : n_real;
      std::mt19937_64 rng(seed * 1000003ULL + static_cast<uint64_t>(l * real.n_kv_heads() + h));
      std::normal_distribution<float> gauss(0.0f, 1.0f);
      std::uniform_int_distribution<int> pick(0, std::max(0, n_real - 1));
      std::vector<float>& dst = q.at(l, h);
      dst.resize(static_cast<std::size_t>(n) * d);
      for (int i = 0; i < n; ++i) {
        double ss = 0;
        float* row = dst.data() + std::size_t(i) * d;
        for (int j = 0; j < d; ++j) {
          row[j] = gauss(rng);
          ss += double(row[j]) * row[j];
        }
        const float scale = n_real > 0 ? norms[pick(rng)] / static_cast<float>(std::sqrt(ss) + 1e-30) : 0.0f;
        for (int j = 0; j < d; ++j) row[j] *= scale;
      }
    }
  return q;
}

}  // namespace

ContextPrefill collect_reference_queries(const Transformer& model, const Tokenizer& tokenizer,
                                         std::span<const int> context, const QueryPlan& plan) {
  const int T = static_cast<int>(context.size());
  if (T < 2) throw Error(fmt::format("reference queries need a context of at least 2 tokens, got {}", T));
  if (plan.spec.sources.empty()) throw Error("reference queries: no query source given");
  if (plan.spec.total_cap < 0)
    throw Error(fmt::format("reference queries: total cap {} is negative", plan.spec.total_cap));
  ContextPrefill out;
  out.context.assign(context.begin(), context.end());
  out.cache = model.make_cache();
  out.context_queries = empty_like(model.config());
  QueryCollector own(model.config(), 0, out.context_queries);
  ForwardOptions first;
  first.logits = LogitsMode::Last;
  first.observer = &own;
  out.last_logits = model.forward(context, out.cache, first);

  out.queries = empty_like(model.config());
  for (std::size_t s = 0; s < plan.spec.sources.size(); ++s) {
    const QuerySource& spec = plan.spec.sources[s];
    if (spec.cap < 0)
      throw Error(fmt::format("reference queries: cap {} of source {} is negative", spec.cap,
                              query_source_name(spec.kind)));
    ReferenceQueries q;
    switch (spec.kind) {
      case QuerySourceKind::Repeat:
        q = repeat_queries(model, tokenizer, out.cache, context, static_cast<int>(s), out.sequences);
        break;
      case QuerySourceKind::Context: q = out.context_queries; break;
      case QuerySourceKind::SelfStudy:
        q = self_study_queries(model, tokenizer, out.cache, out.last_logits, plan.self_study, plan.seed,
                               static_cast<int>(s), out.sequences);
        break;
      case QuerySourceKind::Random: q = random_queries(out.context_queries, plan.random_count, plan.seed); break;
    }
    q.subsample(spec.cap, plan.seed + 101 * (s + 1));
    out.queries.append(q);
  }
  out.queries.subsample(plan.spec.total_cap, plan.seed);
  return out;
}

ReferenceQueries repeat_queries_over(const Transformer& model, const Tokenizer& tokenizer, KVCache& cache,
                                     std::span<const int> context) {
  if (context.size() < 2)
    throw Error(fmt::format("reference queries need a context of at least 2 tokens, got {}", context.size()));
  std::vector<QuerySequence> unused;
  return repeat_queries(model, tokenizer, cache, context, 0, unused);
}

ContextPrefill repeat_prefill(const Transformer& model, const Tokenizer& tokenizer,
                              std::span<const int> context) {
  QueryPlan plan;
  plan.spec.total_cap = 0;
  return collect_reference_queries(model, tokenizer, context, plan);
}

namespace {
constexpr const char* kSourceNames[] = {"repeat", "context", "self-study", "random"};
}

std::string query_source_name(QuerySourceKind source) { return kSourceNames[static_cast<int>(source)]; }

}  // namespace kvcompact
