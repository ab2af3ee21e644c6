#include "analysis/compact_context.h"

#include <filesystem>

#include <fmt/format.h>

#include "compaction/on_policy.h"
#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "model/transformer.h"

namespace kvcompact {

ContextPrefill prefill_for_compaction(const Model& model, std::span<const int> ids, const CompactionOptions& co) {
  if (ids.size() < 2) throw Error(fmt::format("compact: the context has {} tokens (need at least 2)", ids.size()));
  if (model.config.max_seq_len > 0 && static_cast<long long>(ids.size()) > model.config.max_seq_len)
    log_line(fmt::format("kvcompact: warning: positions up to {} run past the model's max_seq_len {} (positions "
                         "beyond it were not trained)",
                         ids.size(), model.config.max_seq_len));
  const Transformer transformer(model.config, model.weights);
  QueryPlan plan;
  plan.spec = co.method.queries;
  plan.seed = co.seed;
  return collect_reference_queries(transformer, *model.tokenizer, ids, plan);
}

CompactedContext compact_context(const Model& model, std::span<const int> ids, const ContextPrefill& prefill,
                                 CompactionOptions co) {
  set_rope(co, model.config);
  CompactedContext out;
  KvcFile& f = out.file;
  f.model_fingerprint = model_fingerprint(model.config, model.weights);
  f.model_name = std::filesystem::path(model.path).filename().string();
  f.config = model.config;
  f.method = to_string(co.method);
  f.ratio = co.ratio;
  f.context_tokens.assign(ids.begin(), ids.end());
  f.last_logits = prefill.last_logits;
  const Transformer transformer(model.config, model.weights);
  f.cache = compact_prefill(transformer, prefill, co, co.seed);
  out.full_entries = prefill.cache.total_entries();
  out.full_bytes = prefill.cache.bytes();
  return out;
}

}  // namespace kvcompact
