#include "compaction/compact_context.h"

#include <exception>
#include <filesystem>

#include <fmt/format.h>

#include "compaction/on_policy.h"
#include "compaction/head_diagnostics.h"
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
  f.cache = compact_prefill(transformer, *model.tokenizer, prefill, co);
  out.full_entries = prefill.cache.total_entries();
  out.full_bytes = prefill.cache.bytes();
  return out;
}

namespace {

nlohmann::json diagnostics_json(const HeadDiagnostics& d) {
  return {{"n_queries", d.n_queries},     {"rel_l2_mean", d.rel_l2_mean},     {"rel_l2_max", d.rel_l2_max},
          {"cosine_mean", d.cosine_mean}, {"cosine_min", d.cosine_min},       {"mass_err_mean", d.mass_err_mean},
          {"mass_err_max", d.mass_err_max}};
}

}  // namespace

nlohmann::json compaction_diagnostics(const ContextPrefill& prefill, const KVCache& compacted) {
  const KVCache& full = prefill.cache;
  const int L = full.n_layers(), H = full.n_kv_heads(), d = full.head_dim();
  if (compacted.n_layers() != L || compacted.n_kv_heads() != H || compacted.head_dim() != d)
    throw Error(fmt::format("diagnostics: the compacted cache is {}x{}x{}, the full one {}x{}x{}", compacted.n_layers(),
                            compacted.n_kv_heads(), compacted.head_dim(), L, H, d));
  std::vector<int> heads;  // global layers only: sliding layers are never compacted
  for (int l = 0; l < L; ++l)
    if (!full.sliding(l))
      for (int h = 0; h < H; ++h) heads.push_back(l * H + h);
  std::vector<HeadDiagnostics> fit(heads.size()), held(heads.size());
  std::exception_ptr failure;
#pragma omp parallel for schedule(dynamic, 1)
  for (std::size_t i = 0; i < heads.size(); ++i) {
    try {
      const int l = heads[i] / H, h = heads[i] % H;
      const HeadCache& src = full.head(l, h);
      HeadCompactionInput in;
      in.keys = src.keys.data();
      in.values = src.values.data();
      in.T = static_cast<int>(src.length());
      in.head_dim = d;
      in.queries = prefill.queries.at(l, h).data();
      in.n_queries = prefill.queries.count(l, h);
      fit[i] = diagnose_head(in, compacted.head(l, h));
      in.queries = prefill.context_queries.at(l, h).data();
      in.n_queries = prefill.context_queries.count(l, h);
      held[i] = diagnose_head(in, compacted.head(l, h));
    } catch (...) {
#pragma omp critical(kvc_diagnostics_failure)
      if (!failure) failure = std::current_exception();
    }
  }
  if (failure) std::rethrow_exception(failure);
  nlohmann::json rows = nlohmann::json::array();
  HeadDiagnostics mean_fit, mean_held;
  auto add = [](HeadDiagnostics& a, const HeadDiagnostics& b, double w) {
    a.n_queries += b.n_queries;
    a.rel_l2_mean += w * b.rel_l2_mean, a.rel_l2_max += w * b.rel_l2_max;
    a.cosine_mean += w * b.cosine_mean, a.cosine_min += w * b.cosine_min;
    a.mass_err_mean += w * b.mass_err_mean, a.mass_err_max += w * b.mass_err_max;
  };
  const double w = heads.empty() ? 0.0 : 1.0 / static_cast<double>(heads.size());
  for (std::size_t i = 0; i < heads.size(); ++i) {
    const int l = heads[i] / H, h = heads[i] % H;
    rows.push_back({{"name", fmt::format("L{}H{}", l, h)},
                    {"layer", l},
                    {"kv_head", h},
                    {"T", full.head(l, h).length()},
                    {"t", compacted.head(l, h).length()},
                    {"fit", diagnostics_json(fit[i])},
                    {"heldout", diagnostics_json(held[i])}});
    add(mean_fit, fit[i], w);
    add(mean_held, held[i], w);
  }
  if (!heads.empty()) {  // n_queries of the means: per head, not summed
    mean_fit.n_queries /= static_cast<int>(heads.size());
    mean_held.n_queries /= static_cast<int>(heads.size());
  }
  return {{"heads", rows}, {"mean", {{"fit", diagnostics_json(mean_fit)}, {"heldout", diagnostics_json(mean_held)}}}};
}

}  // namespace kvcompact
