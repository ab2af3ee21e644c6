#include "studies/compact_eval.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>

#include "budgets/budget_solver.h"
#include "metrics/continuation_nll.h"
#include "metrics/mean_sem.h"
#include "metrics/perplexity.h"
#include "compaction/head_compaction.h"
#include "compaction/on_policy.h"
#include "core/error.h"
#include "core/log.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

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

void validate_compact_eval_options(const Model& model, const CompactEvalOptions& options) {
  if (!(options.context_frac > 0.0 && options.context_frac < 1.0))
    throw Error(fmt::format("--context-frac {} must be in (0, 1)", options.context_frac));
  if (options.methods.empty()) throw Error("compact-eval: no methods given");
  if (options.ratios.empty()) throw Error("compact-eval: no ratios given");
  for (double r : options.ratios) kept_entries(r, 1);  // validates each ratio
  const int n_heads = model.config.n_layers * model.config.n_kv_heads;
  if (!options.budget_proportions.empty() && static_cast<int>(options.budget_proportions.size()) != n_heads)
    throw Error(fmt::format("budgets list {} heads, the model has {}", options.budget_proportions.size(), n_heads));
  if (!options.budget_proportions.empty())
    for (double r : options.ratios)
      if (!(r > 0.0))
        throw Error(fmt::format("--ratios {}: with --budgets a ratio is the total ratio of the budgets and must be in (0, 1]", r));
}

CompactEvalUnit evaluate_compact_eval_document(const Model& model, const Transformer& transformer,
                                               const std::string& document, std::size_t d,
                                               const CompactEvalOptions& options, bool& warned_seq_len) {
  const Tokenizer& tokenizer = *model.tokenizer;
  const std::vector<int> ids = tokenizer.encode(document, /*add_bos=*/true);
  const int T = options.context_tokens > 0 ? options.context_tokens
                                           : static_cast<int>(std::floor(options.context_frac * ids.size()));
  const int N = options.continuation_tokens > 0 ? std::min(static_cast<int>(ids.size()), T + options.continuation_tokens)
                                                : static_cast<int>(ids.size());
  if (T < 2 || N - T < 1)
    throw Error(fmt::format("document {} has {} tokens: a context of {} and a continuation of {} (need at least 2 and 1)",
                            d + 1, ids.size(), T, N - T));
  std::span<const int> context(ids.data(), T), continuation(ids.data() + T, N - T);
  if (model.config.max_seq_len > 0 && N > model.config.max_seq_len && !warned_seq_len) {
    log_line(fmt::format("kvcompact: warning: document {} has {} tokens, past the model's max_seq_len {} "
                         "(positions beyond it were not trained; warned once)",
                         d + 1, N, model.config.max_seq_len));
    warned_seq_len = true;
  }

  CompactEvalUnit unit;
  unit.document = static_cast<int>(d);
  // One prefill per distinct reference-query setting.
  std::vector<QuerySpec> specs;
  std::vector<ContextPrefill> prefills;
  prefills.reserve(options.methods.size());
  auto prefill_for = [&](const MethodSpec& m) -> const ContextPrefill& {
    for (std::size_t i = 0; i < specs.size(); ++i)
      if (specs[i] == m.queries) return prefills[i];
    QueryPlan plan;
    plan.spec = m.queries;
    plan.seed = options.seed + d;
    auto t0 = std::chrono::steady_clock::now();
    prefills.push_back(collect_reference_queries(transformer, tokenizer, context, plan));
    unit.doc.reference_seconds += seconds_since(t0);
    specs.push_back(m.queries);
    return prefills.back();
  };
  const ContextPrefill& first = prefill_for(options.methods.front());
  const double full_nll = mean_continuation_nll(transformer, first.cache, continuation, first.last_logits);
  unit.doc.tokens.assign(ids.begin(), ids.begin() + N);
  unit.doc.context_tokens = T;
  unit.doc.full_nll = full_nll;

  for (const MethodSpec& method : options.methods) {
    const ContextPrefill& prefill = prefill_for(method);
    for (double ratio : options.ratios) {
      CompactionOptions co;
      co.method = method;
      co.ratio = ratio;
      co.seed = options.seed + d;
      co.chunk_size = options.chunk_size;
      set_rope(co, model.config);
      if (!options.budget_proportions.empty()) {
        std::vector<int> lengths(options.budget_proportions.size(), T);
        co.head_budgets = compacted_head_budgets(options.budget_proportions, lengths, model.config.n_kv_heads,
                                                 model.config.sliding_layers(), ratio, options.max_head_ratio);
      }
      auto t0 = std::chrono::steady_clock::now();
      KVCache compacted = compact_prefill(transformer, tokenizer, prefill, co);
      const double secs = seconds_since(t0);
      const double nll = mean_continuation_nll(transformer, compacted, continuation, prefill.last_logits);
      if (!std::isfinite(nll))
        throw Error(fmt::format("document {}: {} at ratio {} gave a non-finite NLL", d + 1, to_string(method), ratio));
      CompactEvalCell c;
      c.nll = nll;
      c.bytes = static_cast<double>(compacted.bytes());
      c.full_bytes = static_cast<double>(prefill.cache.bytes());
      // heads compacted: sliding-window layers are copied, not compacted
      c.heads = static_cast<double>(compacted.n_layers() - static_cast<int>(model.config.sliding_layers().size())) *
                compacted.n_kv_heads();
      c.seconds = secs;
      c.entries = static_cast<double>(compacted.total_entries());
      unit.cells.push_back(c);
    }
  }
  return unit;
}

CompactEvalResult aggregate_compact_eval(const CompactEvalOptions& options, const std::vector<CompactEvalUnit>& units) {
  if (units.empty()) throw Error("compact-eval: no evaluated documents to aggregate");
  const std::size_t n_rows = options.methods.size() * options.ratios.size();
  std::vector<Accumulator> acc(n_rows);
  CompactEvalResult result;
  double full_nll_sum = 0, context_sum = 0, continuation_sum = 0;
  for (const CompactEvalUnit& u : units) {
    if (u.cells.size() != n_rows)
      throw Error(fmt::format("compact-eval: document {} has {} results, the study has {} (methods x ratios)",
                              u.document + 1, u.cells.size(), n_rows));
    const int T = u.doc.context_tokens, N = static_cast<int>(u.doc.tokens.size());
    full_nll_sum += u.doc.full_nll;
    context_sum += T;
    continuation_sum += N - T;
    result.reference_seconds += u.doc.reference_seconds;
    for (std::size_t row = 0; row < n_rows; ++row) {
      const CompactEvalCell& c = u.cells[row];
      Accumulator& a = acc[row];
      a.delta.push_back(c.nll - u.doc.full_nll);
      a.nll += c.nll;
      a.bytes += c.bytes;
      a.full_bytes += c.full_bytes;
      a.heads = c.heads;
      a.seconds += c.seconds;
      a.entries += c.entries;
      a.secs.push_back(c.seconds);
    }
    result.per_document.push_back(u.doc);
  }

  const double D = static_cast<double>(units.size());
  result.documents = static_cast<int>(units.size());
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

CompactEvalResult run_compact_eval(const Model& model, const std::vector<std::string>& documents,
                                   const CompactEvalOptions& options) {
  if (documents.empty()) throw Error("compact-eval: no documents to evaluate");
  validate_compact_eval_options(model, options);
  const Transformer transformer(model.config, model.weights);
  const auto t_start = std::chrono::steady_clock::now();
  bool warned_seq_len = false;
  std::vector<CompactEvalUnit> units;
  for (std::size_t d = 0; d < documents.size(); ++d) {
    units.push_back(evaluate_compact_eval_document(model, transformer, documents[d], d, options, warned_seq_len));
    if (options.progress) {
      const CompactEvalDocument& doc = units.back().doc;
      log_line(fmt::format("compact-eval: document {}/{} ({} context + {} continuation tokens), {:.1f} s", d + 1,
                           documents.size(), doc.context_tokens, doc.tokens.size() - doc.context_tokens,
                           seconds_since(t_start)));
    }
  }
  return aggregate_compact_eval(options, units);
}

}  // namespace kvcompact
