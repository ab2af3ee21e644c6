#include "analysis/compact_eval.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "analysis/budget_solver.h"
#include "analysis/continuation_nll.h"
#include "analysis/mean_sem.h"
#include "analysis/perplexity.h"
#include "compaction/head_compaction.h"
#include "core/error.h"
#include "core/log.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Mean NLL (nats/token) of the continuation over a cache holding the context.
double mean_continuation_nll(const Transformer& model, const KVCache& cache, std::span<const int> continuation,
                             std::span<const float> first_logits) {
  return continuation_nll(model, cache, first_logits, continuation).mean_nll();
}

struct Accumulator {
  std::vector<double> delta, secs;
  double nll = 0, bytes = 0, full_bytes = 0, seconds = 0, entries = 0, heads = 1;
};

}  // namespace

CompactEvalResult run_compact_eval(const Model& model, const std::vector<std::string>& documents,
                                   const CompactEvalOptions& options) {
  if (documents.empty()) throw Error("compact-eval: no documents to evaluate");
  if (!(options.context_frac > 0.0 && options.context_frac < 1.0))
    throw Error(fmt::format("--context-frac {} must be in (0, 1)", options.context_frac));
  if (options.methods.empty()) throw Error("compact-eval: no methods given");
  if (options.ratios.empty()) throw Error("compact-eval: no ratios given");
  for (double r : options.ratios) kept_entries(r, 1);  // validates each ratio
  const int n_heads = model.config.n_layers * model.config.n_kv_heads;
  if (!options.budget_proportions.empty() && static_cast<int>(options.budget_proportions.size()) != n_heads)
    throw Error(fmt::format("budgets list {} heads, the model has {}", options.budget_proportions.size(), n_heads));

  const Transformer transformer(model.config, model.weights);
  const Tokenizer& tokenizer = *model.tokenizer;
  const std::size_t n_rows = options.methods.size() * options.ratios.size();
  std::vector<Accumulator> acc(n_rows);
  CompactEvalResult result;
  double full_nll_sum = 0, context_sum = 0, continuation_sum = 0;
  const auto t_start = std::chrono::steady_clock::now();
  bool warned_seq_len = false;

  for (std::size_t d = 0; d < documents.size(); ++d) {
    const std::vector<int> ids = tokenizer.encode(documents[d], /*add_bos=*/true);
    const int T = options.context_tokens > 0 ? options.context_tokens
                                             : static_cast<int>(std::floor(options.context_frac * ids.size()));
    const int N = options.continuation_tokens > 0
                      ? std::min(static_cast<int>(ids.size()), T + options.continuation_tokens)
                      : static_cast<int>(ids.size());
    if (T < 2 || N - T < 1)
      throw Error(fmt::format(
          "document {} has {} tokens: a context of {} and a continuation of {} (need at least 2 and 1)",
          d + 1, ids.size(), T, N - T));
    std::span<const int> context(ids.data(), T), continuation(ids.data() + T, N - T);
    if (model.config.max_seq_len > 0 && N > model.config.max_seq_len && !warned_seq_len) {
      log_line(fmt::format("kvcompact: warning: document {} has {} tokens, past the model's max_seq_len {} "
                   "(positions beyond it were not trained; warned once)", d + 1, N, model.config.max_seq_len));
      warned_seq_len = true;
    }

    // One prefill per distinct reference-query setting.
    std::vector<QuerySpec> specs;
    std::vector<ContextPrefill> prefills;
    auto prefill_for = [&](const MethodSpec& m) -> const ContextPrefill& {
      for (std::size_t i = 0; i < specs.size(); ++i)
        if (specs[i] == m.queries) return prefills[i];
      QueryPlan plan;
      plan.spec = m.queries;
      plan.seed = options.seed + d;
      auto t0 = std::chrono::steady_clock::now();
      prefills.push_back(collect_reference_queries(transformer, tokenizer, context, plan));
      result.reference_seconds += seconds_since(t0);
      specs.push_back(m.queries);
      return prefills.back();
    };
    prefills.reserve(options.methods.size());
    const double ref_before = result.reference_seconds;
    const ContextPrefill& first = prefill_for(options.methods.front());
    const double full_nll = mean_continuation_nll(transformer, first.cache, continuation, first.last_logits);
    full_nll_sum += full_nll;
    CompactEvalDocument doc;
    doc.tokens.assign(ids.begin(), ids.begin() + N);
    doc.context_tokens = T;
    doc.full_nll = full_nll;
    context_sum += T;
    continuation_sum += N - T;

    std::size_t row = 0;
    for (const MethodSpec& method : options.methods) {
      const ContextPrefill& prefill = prefill_for(method);
      for (double ratio : options.ratios) {
        CompactionOptions co;
        co.method = method;
        co.ratio = ratio;
        co.seed = options.seed + d;
        set_rope(co, model.config);
        if (!options.budget_proportions.empty()) {
          std::vector<int> lengths(options.budget_proportions.size(), T);
          co.head_budgets = per_head_budgets(options.budget_proportions, lengths, ratio);
        }
        auto t0 = std::chrono::steady_clock::now();
        KVCache compacted = compact_cache(prefill.cache, prefill.queries, co, &prefill.context_queries);
        const double secs = seconds_since(t0);
        const double nll = mean_continuation_nll(transformer, compacted, continuation, prefill.last_logits);
        if (!std::isfinite(nll))
          throw Error(fmt::format("document {}: {} at ratio {} gave a non-finite NLL", d + 1,
                                  to_string(method), ratio));
        Accumulator& a = acc[row++];
        a.delta.push_back(nll - full_nll);
        a.nll += nll;
        a.bytes += static_cast<double>(compacted.bytes());
        a.full_bytes += static_cast<double>(prefill.cache.bytes());
        a.heads = static_cast<double>(compacted.n_layers()) * compacted.n_kv_heads();
        a.seconds += secs;
        a.entries += static_cast<double>(compacted.total_entries());
        a.secs.push_back(secs);
      }
    }
    doc.reference_seconds = result.reference_seconds - ref_before;
    result.per_document.push_back(std::move(doc));
    if (options.progress)
      log_line(fmt::format("compact-eval: document {}/{} ({} context + {} continuation tokens), {:.1f} s",
                   d + 1, documents.size(), T, N - T, seconds_since(t_start)));
  }

  const double D = static_cast<double>(documents.size());
  result.documents = static_cast<int>(documents.size());
  result.full_nll_mean = full_nll_sum / D;
  result.mean_context_tokens = context_sum / D;
  result.mean_continuation_tokens = continuation_sum / D;
  std::size_t row = 0;
  for (const MethodSpec& method : options.methods) {
    for (double ratio : options.ratios) {
      const Accumulator& a = acc[row++];
      CompactEvalRow r;
      r.method = to_string(method);
      r.ratio = ratio;
      const MeanSem delta = mean_sem(a.delta);
      r.delta_nll_mean = delta.mean;
      r.delta_nll_sem = delta.sem;
      r.nll_mean = a.nll / D;
      r.cache_bytes = a.bytes / D;
      r.full_cache_bytes = a.full_bytes / D;
      r.compaction_seconds = a.seconds / D;
      r.compaction_seconds_per_head = r.compaction_seconds / a.heads;
      r.kept_entries = a.entries / D;
      r.delta_nll_per_document = a.delta;
      r.seconds_per_document = a.secs;
      result.rows.push_back(r);
    }
  }
  return result;
}

}  // namespace kvcompact
