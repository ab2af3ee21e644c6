#include "studies/influence.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "budgets/budget_solver.h"
#include "metrics/perplexity.h"
#include "compaction/attention_matching.h"
#include "compaction/compact_cache.h"
#include "compaction/head_compaction.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "core/error.h"
#include "core/log.h"
#include "io/json_number.h"
#include "core/model_fingerprint.h"
#include "ops/matmul.h"
#include "model/transformer.h"

namespace kvcompact {
namespace {

/// Hidden states entering every layer, captured from one forward.
struct LayerInputCapture : ForwardObserver {
  std::vector<std::vector<float>> x;  // [n_layers][n, dim]
  void on_layer_input(const LayerInputView& v) override {
    if (static_cast<int>(x.size()) <= v.layer) x.resize(v.layer + 1);
    x[v.layer].assign(v.x.all().begin(), v.x.all().end());
  }
};

/// Compacts one head at any budget: the method's per-head work (for Attention Matching the
/// attention pass and the key order) is prepared once and serves every budget.
class HeadCompactor {
 public:
  HeadCompactor(const MethodSpec& spec, const HeadCompactionInput& in, int layer, int n_layers,
                uint64_t seed, int max_t)
      : spec_(spec), T_(in.T), layer_(layer), n_layers_(n_layers),
        prepared_(spec.method->prepare(in, max_t, seed)) {}
  CompactedHead compact(int t) const {
    return prepared_->compact(method_budget(spec_, t, std::max(T_, 0), layer_, n_layers_));
  }
  /// Brackets one head's grid: compact(t) for t <= max_t shares work in between.
  void begin_sweep(int max_t) { prepared_->begin_budget_sweep(method_budget(spec_, max_t, std::max(T_, 0), layer_, n_layers_)); }
  void end_sweep() { prepared_->end_budget_sweep(); }

 private:
  const MethodSpec& spec_;
  int T_, layer_, n_layers_;
  std::unique_ptr<PreparedHead> prepared_;
};

}  // namespace

std::vector<HeadId> compactable_heads(const ModelConfig& c) {
  std::vector<HeadId> heads;
  for (const HeadId& h : parse_head_names("all", c.n_layers, c.n_kv_heads))
    if (!c.sliding(h.layer)) heads.push_back(h);
  if (heads.empty()) throw Error("influence: every layer of the model is a sliding-window layer (none is compacted)");
  return heads;
}

std::vector<HeadId> influence_heads(const std::string& spec, const ModelConfig& c) {
  if (spec == "all") return compactable_heads(c);
  std::vector<HeadId> heads = parse_head_names(spec, c.n_layers, c.n_kv_heads);
  check_compactable(c, heads);
  return heads;
}

void check_compactable(const ModelConfig& c, const std::vector<HeadId>& heads) {
  for (const HeadId& h : heads)
    if (h.layer >= 0 && h.layer < c.n_layers && c.sliding(h.layer))
      throw Error(fmt::format("--heads: head {} is in sliding-window layer {}, which is never compacted "
                              "(influence covers global layers only)", head_name(h.layer, h.kv_head), h.layer));
}

DocumentInfluence sweep_context(
    const Model& model, const std::vector<int>& ids, int document, const InfluenceOptions& options,
    const std::function<std::vector<EvalSpan>(const KVCache&, const std::vector<float>&)>& make_spans,
    const DocumentInfluence* done, const std::function<void(const DocumentInfluence&)>& on_head) {
  const auto t_start = std::chrono::steady_clock::now();
  const ModelConfig& c = model.config;
  const int L = c.n_layers, H = c.n_kv_heads, d = c.head_dim, V = c.vocab_size;
  const int T = static_cast<int>(ids.size());
  if (T < 2) throw Error(fmt::format("document {}: a context of {} tokens (need at least 2)", document + 1, T));
  baseline_index(options.baseline_ratio, options.grid);  // validates
  std::vector<HeadId> heads = options.heads;
  if (heads.empty()) heads = compactable_heads(c);
  check_compactable(c, heads);

  const Transformer tr(c, model.weights);
  std::span<const int> context(ids.data(), T);
  if (options.method.queries.on_policy)
    throw Error("influence: on-policy queries (queries=...+onpolicy) are not supported by the sweep; every head's "
                "compaction there reads the same off-policy queries");
  QueryPlan plan;
  plan.spec = options.method.queries;
  plan.seed = options.seed;
  const ContextPrefill pre = collect_reference_queries(tr, *model.tokenizer, context, plan);
  const std::vector<EvalSpan> spans = make_spans(pre.cache, pre.last_logits);
  if (spans.empty()) throw Error(fmt::format("document {}: nothing to evaluate", document + 1));
  int eval_tokens = 0;
  for (const auto& sp : spans) {
    if (sp.scored.empty()) throw Error(fmt::format("document {}: an evaluated span has no tokens", document + 1));
    eval_tokens += static_cast<int>(sp.scored.size());
  }

  // Baseline budgets: uniform kept_entries(baseline, T), or per head from the proportions.
  std::vector<int> t_base(static_cast<std::size_t>(L) * H, kept_entries(options.baseline_ratio, T));
  if (!options.budget_proportions.empty()) {
    if (static_cast<int>(options.budget_proportions.size()) != L * H)
      throw Error(fmt::format("budgets list {} heads, the model has {}", options.budget_proportions.size(), L * H));
    if (!(options.baseline_ratio > 0))
      throw Error("--budgets needs a baseline ratio above 0 (it is the total ratio of the budgets)");
    t_base = compacted_head_budgets(options.budget_proportions, std::vector<int>(t_base.size(), T), H,
                                    c.sliding_layers(), options.baseline_ratio);
  }
  int grid_max_t = 0;  // the largest budget of a head's grid
  for (double r : options.grid) grid_max_t = std::max(grid_max_t, kept_entries(r, T));
  const int max_t = std::max(*std::max_element(t_base.begin(), t_base.end()), grid_max_t);
  // One prepared compactor per head; the baseline cache.
  std::vector<std::unique_ptr<HeadCompactor>> compactor(static_cast<std::size_t>(L) * H);
  KVCache base(L, H, d);
  base.next_position = T;
  for (int l = 0; l < L; ++l) base.set_layer_window(l, c.layer(l).window);
  for (int l = 0; l < L; ++l)
    for (int h = 0; h < H; ++h) {
      const HeadCache& src = pre.cache.head(l, h);
      if (c.sliding(l)) {  // sliding-window layers are never compacted
        base.head(l, h) = src;
        continue;
      }
      HeadCompactionInput in;
      in.keys = src.keys.data();
      in.values = src.values.data();
      in.queries = pre.queries.at(l, h).data();
      in.n_queries = pre.queries.count(l, h);
      in.context_queries = pre.context_queries.at(l, h).data();
      in.group_size = c.group_size();
      in.T = T;
      in.head_dim = d;
      auto& hc = compactor[static_cast<std::size_t>(l) * H + h];
      hc = std::make_unique<HeadCompactor>(options.method, in, l, L, head_seed(options.seed, l, h, H), max_t);
      base.head(l, h) = to_head_cache(hc->compact(t_base[static_cast<std::size_t>(l) * H + h]), src);
    }

  // Per span: the tokens fed after the context (prompt, then the scored tokens but the last) and
  // the first logits row that predicts a scored token (-1: the first scored token is predicted by
  // the context's last logits, which compaction does not change).
  struct Fed {
    std::vector<int> tokens;
    int first_row = 0;
    double context_nll = 0;  // NLL of the first scored token when first_row < 0
  };
  std::vector<Fed> fed(spans.size());
  for (std::size_t s = 0; s < spans.size(); ++s) {
    const EvalSpan& sp = spans[s];
    fed[s].tokens = sp.prompt;
    fed[s].tokens.insert(fed[s].tokens.end(), sp.scored.begin(), sp.scored.end() - 1);
    fed[s].first_row = static_cast<int>(sp.prompt.size()) - 1;
    if (fed[s].first_row < 0) fed[s].context_nll = token_nll(pre.last_logits, sp.scored[0]);
  }
  // Per span: the rows of its fed tokens whose logits predict scored tokens (only those go through
  // the output layer: the prompt's rows but its last do not, a fifth to a third of a point's FLOPs
  // on a large vocabulary), and its mean NLL from those rows' logits.
  auto target_rows = [&](std::size_t s) {
    const int row0 = std::max(fed[s].first_row, 0);
    const std::size_t n = spans[s].scored.size() - (fed[s].first_row < 0 ? 1 : 0);
    std::vector<int> rows(n);
    for (std::size_t i = 0; i < n; ++i) rows[i] = row0 + static_cast<int>(i);
    return rows;
  };
  auto span_nll = [&](std::size_t s, std::span<const float> logits) {
    const EvalSpan& sp = spans[s];
    const Fed& f = fed[s];
    double total = 0;
    std::span<const int> targets(sp.scored);
    if (f.first_row < 0) {
      total += f.context_nll;
      targets = targets.subspan(1);
    }
    if (!f.tokens.empty()) total += sequence_nll(logits.subspan(0, targets.size() * V), V, targets);
    return total / static_cast<double>(sp.scored.size());
  };
  // The baseline: mean over spans of span_nll over the baseline cache, each span forwarded alone
  // with the inputs of every layer captured (the points resume from them). The spans' tokens are
  // fed onto the cache itself and rolled back afterwards (KVCache::mark).
  auto eval_baseline = [&](KVCache& cache, std::vector<LayerInputCapture>& capture_out) {
    double sum = 0;
    for (std::size_t s = 0; s < spans.size(); ++s) {
      std::vector<float> logits;
      if (!fed[s].tokens.empty()) {
        const CacheMark mark = cache.mark();
        ForwardOptions o;
        o.logits = LogitsMode::Rows;
        o.logit_rows = target_rows(s);
        o.observer = &capture_out[s];
        logits = tr.forward(fed[s].tokens, cache, o);
        cache.rollback(mark);
      }
      sum += span_nll(s, logits);
    }
    return sum / static_cast<double>(spans.size());
  };
  std::vector<LayerInputCapture> capture(spans.size());
  DocumentInfluence out;
  out.document = document;
  out.context_tokens = T;
  out.eval_tokens = eval_tokens;
  out.spans = static_cast<int>(spans.size());
  const auto t_forward = std::chrono::steady_clock::now();
  out.baseline_nll = eval_baseline(base, capture);
  const double forward_s = seconds_since(t_forward);  // a full forward of the evaluated tokens

  // The points of a head's grid are evaluated in batches (Transformer::forward_batch): every
  // (point, span) pair is one sequence on its own copy of the baseline cache, in which only the
  // swept head differs, so each projection runs once over all their rows instead of once per
  // span and point. Batch size: up to 2,048 fed rows, 256 MiB of logits and 1 GiB of cache copies.
  int fed_rows = 0, logit_rows = 0;
  for (std::size_t s = 0; s < spans.size(); ++s) {
    fed_rows += static_cast<int>(fed[s].tokens.size());
    logit_rows += static_cast<int>(spans[s].scored.size());
  }
  const long logit_cap = (256L << 20) / (4L * V);
  const long copy_cap = (1L << 30) / static_cast<long>(std::max<std::size_t>(1, base.bytes() * spans.size()));
  const int batch_points = static_cast<int>(std::clamp<long>(
      std::min({2048L / std::max(fed_rows, 1), logit_cap / std::max(logit_rows, 1), copy_cap}), 1L,
      std::max<long>(1, static_cast<long>(options.grid.size()))));
  std::vector<KVCache> pool(static_cast<std::size_t>(batch_points) * spans.size(), base);
  // Mean over spans of each span's mean NLL, for the first `points` entries of the pool (point p
  // owns pool[p * spans .. p * spans + spans - 1]), resuming at first_layer from the captured inputs.
  auto eval_points = [&](std::size_t points, int first_layer) {
    std::vector<BatchSequence> seqs;
    std::vector<std::size_t> owner;  // (point, span) index of each sequence
    std::vector<CacheMark> marks;
    for (std::size_t p = 0; p < points; ++p)
      for (std::size_t s = 0; s < spans.size(); ++s) {
        const Fed& f = fed[s];
        if (f.tokens.empty()) continue;
        KVCache& cache = pool[p * spans.size() + s];
        marks.push_back(cache.mark());
        BatchSequence b;
        b.tokens = f.tokens;
        b.cache = &cache;
        if (first_layer > 0) b.layer_input = capture[s].x[static_cast<std::size_t>(first_layer)].data();
        b.logit_rows = target_rows(s);
        seqs.push_back(std::move(b));
        owner.push_back(p * spans.size() + s);
      }
    std::vector<float> logits;
    if (!seqs.empty()) logits = tr.forward_batch(seqs, first_layer);
    for (std::size_t i = 0; i < seqs.size(); ++i) seqs[i].cache->rollback(marks[i]);
    std::vector<double> sum(points, 0.0);
    std::size_t offset = 0, next = 0;  // logits rows used so far, sequences read so far
    for (std::size_t p = 0; p < points; ++p)
      for (std::size_t s = 0; s < spans.size(); ++s) {
        std::span<const float> rows;
        if (next < owner.size() && owner[next] == p * spans.size() + s) {
          rows = std::span<const float>(logits).subspan(offset * V, seqs[next].logit_rows.size() * V);
          offset += seqs[next].logit_rows.size();
          ++next;
        }
        sum[p] += span_nll(s, rows);
      }
    for (double& v : sum) v /= static_cast<double>(spans.size());
    return sum;
  };

  for (std::size_t k = 0; k < heads.size(); ++k) {
    const HeadId& head = heads[k];
    if (done != nullptr) {
      bool finished = false;
      for (std::size_t j = 0; j < done->heads.size() && !finished; ++j)
        if (done->heads[j] == head) {
          out.heads.push_back(head);
          out.delta.push_back(done->delta[j]);
          finished = true;
        }
      if (finished) continue;
    }
    const auto t_head = std::chrono::steady_clock::now();
    HeadCompactor& hc = *compactor[static_cast<std::size_t>(head.layer) * H + head.kv_head];
    const HeadCache& src = pre.cache.head(head.layer, head.kv_head);
    std::vector<double> delta;
    double compact_s = 0;  // of the head's time: recompacting it at each ratio (the rest: forwards)
    const auto t_share = std::chrono::steady_clock::now();
    hc.begin_sweep(grid_max_t);
    compact_s += seconds_since(t_share);
    const int first_layer = options.reuse_prefix ? head.layer : 0;
    // A point whose compacted head is the baseline head itself (the baseline budget, or equal
    // arrays) has the baseline cache, so its delta is exactly 0 and it is not evaluated.
    const HeadCache& baseline_head = base.head(head.layer, head.kv_head);
    delta.assign(options.grid.size(), 0.0);
    std::vector<std::size_t> todo;  // grid indices of the points in the current batch
    auto flush = [&] {
      if (todo.empty()) return;
      const std::vector<double> nll = eval_points(todo.size(), first_layer);
      for (std::size_t i = 0; i < todo.size(); ++i) {
        if (!std::isfinite(nll[i]))
          throw Error(fmt::format("document {}: head {} at ratio {} gave a non-finite NLL", document + 1,
                                  head_name(head.layer, head.kv_head), options.grid[todo[i]]));
        delta[todo[i]] = nll[i] - out.baseline_nll;
      }
      todo.clear();
    };
    const int head_t_base = t_base[static_cast<std::size_t>(head.layer) * H + head.kv_head];
    for (std::size_t g = 0; g < options.grid.size(); ++g) {
      // The head's own baseline budget: the same method, budget and seed as the baseline head, so
      // the point is the baseline (the sweep's shared factorisation may round it differently).
      if (kept_entries(options.grid[g], T) == head_t_base) continue;
      const auto t_compact = std::chrono::steady_clock::now();
      HeadCache compacted = to_head_cache(hc.compact(kept_entries(options.grid[g], T)), src);
      compact_s += seconds_since(t_compact);
      if (compacted.keys == baseline_head.keys && compacted.values == baseline_head.values &&
          compacted.beta == baseline_head.beta && compacted.positions == baseline_head.positions)
        continue;
      for (std::size_t s = 0; s < spans.size(); ++s) pool[todo.size() * spans.size() + s].head(head.layer, head.kv_head) = compacted;
      todo.push_back(g);
      if (static_cast<int>(todo.size()) == batch_points) flush();
    }
    flush();
    for (KVCache& pc : pool) pc.head(head.layer, head.kv_head) = base.head(head.layer, head.kv_head);
    hc.end_sweep();
    out.heads.push_back(head);
    out.delta.push_back(std::move(delta));
    out.seconds = seconds_since(t_start);
    if (on_head) on_head(out);
    if (options.progress)
      log_line(fmt::format("influence: document {}, head {} ({}/{}), {:.2f} s ({:.2f} s compaction); a point costs "
                           "{:.2f} full forwards of the evaluated tokens ({:.3f} s)",
                           document + 1, head_name(head.layer, head.kv_head), k + 1, heads.size(), seconds_since(t_head),
                           compact_s, seconds_since(t_head) / static_cast<double>(options.grid.size()) / forward_s,
                           forward_s));
  }
  out.seconds = seconds_since(t_start);
  return out;
}

DocumentInfluence sweep_document(const Model& model, const std::vector<int>& ids, int document,
                                 const InfluenceOptions& options, const DocumentInfluence* done,
                                 const std::function<void(const DocumentInfluence&)>& on_head) {
  const int N = static_cast<int>(ids.size());
  const int T = static_cast<int>(std::floor(options.context_frac * N));
  if (T < 2 || N - T < 1)
    throw Error(fmt::format("document {} has {} tokens: context-frac {} leaves a context of {} and {} "
                            "evaluated tokens (need at least 2 and 1)",
                            document + 1, N, options.context_frac, T, N - T));
  const std::vector<int> context(ids.begin(), ids.begin() + T);
  EvalSpan span;
  span.scored.assign(ids.begin() + T, ids.end());
  return sweep_context(model, context, document, options,
                       [&](const KVCache&, const std::vector<float>&) { return std::vector<EvalSpan>{span}; },
                       done, on_head);
}

namespace {

/// Settings beyond the plain-text defaults that a result file records and resume compares.
struct SweepKind {
  std::string evaluated = "continuation";  ///< "continuation" or "qa-answers"
  nlohmann::json qa;                       ///< QA settings (null for plain text)
};

nlohmann::json budgets_json(const InfluenceOptions& o) {
  if (o.budget_proportions.empty()) return nullptr;
  return {{"source", o.budgets_source}, {"proportions", o.budget_proportions}};
}

/// FNV-1a 64 of an item's text, as 16 hex digits: ties a per-document file to its input.
std::string input_hash(const std::string& text) {
  return fmt::format("{:016x}", fnv1a64(text.data(), text.size()));
}

nlohmann::json document_json(const DocumentInfluence& r, const std::string& fingerprint,
                             const InfluenceOptions& o, const SweepKind& kind, const std::string& hash) {
  nlohmann::json heads = nlohmann::json::object();
  for (std::size_t k = 0; k < r.heads.size(); ++k)
    heads[head_name(r.heads[k].layer, r.heads[k].kv_head)] = r.delta[k];
  return {{"version", 1},
          {"model_fingerprint", fingerprint},
          {"method", to_string(o.method)},
          {"grid", o.grid},
          {"baseline_ratio", o.baseline_ratio},
          {"budgets", budgets_json(o)},
          {"context_frac", o.context_frac},
          {"seed", o.seed},
          {"evaluated", kind.evaluated},
          {"qa", kind.qa},
          {"document", r.document},
          {"input_hash", hash},
          {"context_tokens", r.context_tokens},
          {"eval_tokens", r.eval_tokens},
          {"spans", r.spans},
          {"baseline_nll", r.baseline_nll},
          {"seconds", r.seconds},
          {"units", "delta NLL, nats/token"},
          {"delta", heads}};
}

/// Reads a per-document file written by an earlier run; refuses one made with other settings.
DocumentInfluence read_document(const std::string& path, const std::string& fingerprint,
                                const InfluenceOptions& o, const SweepKind& kind, const std::string& hash,
                                int n_layers, int n_kv_heads) {
  const nlohmann::json j = read_json_file(path);
  auto mismatch = [&](const char* what) {
    return Error(fmt::format("{}: was made with a different {}; use another --out folder", path, what));
  };
  try {
    if (j.at("model_fingerprint").get<std::string>() != fingerprint) throw mismatch("model");
    if (j.value("input_hash", std::string()) != hash) throw mismatch("input text (document or article)");
    if (j.at("method").get<std::string>() != to_string(o.method)) throw mismatch("method");
    if (j.at("grid").get<std::vector<double>>() != o.grid) throw mismatch("ratio grid");
    if (j.at("baseline_ratio").get<double>() != o.baseline_ratio) throw mismatch("baseline ratio");
    if (j.at("context_frac").get<double>() != o.context_frac) throw mismatch("context fraction");
    if (json_uint64(j.at("seed"), path, "seed") != o.seed) throw mismatch("seed");
    // Files of earlier versions lack these keys: plain continuation, uniform baseline.
    const nlohmann::json budgets = j.contains("budgets") ? j["budgets"] : nlohmann::json(nullptr);
    const nlohmann::json want = budgets_json(o);
    if (budgets.is_null() != want.is_null() ||
        (!want.is_null() && budgets.at("proportions").get<std::vector<double>>() != o.budget_proportions))
      throw mismatch("--budgets (per-head baseline budgets)");
    if (j.value("evaluated", std::string("continuation")) != kind.evaluated)
      throw mismatch("evaluated text (plain continuation vs --qa answers)");
    if ((j.contains("qa") ? j["qa"] : nlohmann::json(nullptr)) != kind.qa)
      throw mismatch("QA setting (answer length, prompt template, context cap or --chat)");
    DocumentInfluence r;
    r.document = json_int(j.at("document"), path, "document");
    r.context_tokens = json_int(j.at("context_tokens"), path, "context_tokens");
    r.eval_tokens = json_int(j.at("eval_tokens"), path, "eval_tokens");
    r.spans = j.value("spans", 1);
    r.baseline_nll = j.at("baseline_nll").get<double>();
    r.seconds = j.value("seconds", 0.0);
    for (const auto& [name, values] : j.at("delta").items()) {
      r.heads.push_back(parse_head_names(name, n_layers, n_kv_heads).at(0));
      r.delta.push_back(values.get<std::vector<double>>());
      if (r.delta.back().size() != o.grid.size())
        throw Error(fmt::format("{}: head {} has {} values for a grid of {}", path, name,
                                r.delta.back().size(), o.grid.size()));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: malformed result file ({})", path, e.what()));
  }
}

/// One item of a sweep: sweeps it (resuming from `done`, saving through `on_head`).
using ItemSweep = std::function<DocumentInfluence(const InfluenceOptions& options, const DocumentInfluence* done,
                                                  const std::function<void(const DocumentInfluence&)>& on_head)>;

/// The study settings of a sweep (influence_shards.h).
InfluenceStudy study_of(std::size_t n_items, const std::function<std::string(std::size_t)>& item_text,
                        const InfluenceOptions& o, const SweepKind& kind, const std::string& fingerprint,
                        const ModelConfig& c) {
  std::vector<std::string> heads, hashes;
  for (const HeadId& h : o.heads) heads.push_back(head_name(h.layer, h.kv_head));
  for (std::size_t d = 0; d < n_items; ++d) hashes.push_back(input_hash(item_text(d)));
  nlohmann::json settings = {{"model_fingerprint", fingerprint},
                     {"method", to_string(o.method)},
                     {"grid", o.grid},
                     {"baseline_ratio", o.baseline_ratio},
                     {"budgets", budgets_json(o)},
                     {"context_frac", o.context_frac},
                     {"seed", o.seed},
                     {"evaluated", kind.evaluated},
                     {"qa", kind.qa},
                     {"heads", heads},
                     {"n_layers", c.n_layers},
                     {"n_kv_heads", c.n_kv_heads},
                     {"fast_quant", matmul_mode() == MatmulMode::FastQuant},
                     {"documents", n_items},
                     {"input_hashes", hashes}};
  // Only models with sliding-window layers carry the key, so other models' studies keep their settings.
  if (c.has_sliding_layers()) settings["sliding_layers"] = c.sliding_layers();
  return make_study(std::move(settings));
}

/// Shard o.shard of the units (run_unit_shard_groups): per document, the shard's heads not yet in
/// out_dir/units are swept together (one prefill and baseline per document), each head's unit
/// written when it finishes.
void run_shard(std::size_t n_items, const std::function<ItemSweep(std::size_t)>& item,
               const std::function<std::string(std::size_t)>& item_text, const InfluenceOptions& o,
               const SweepKind& kind, const std::string& fingerprint, const ModelConfig& c,
               const std::string& out_dir) {
  const InfluenceStudy study = study_of(n_items, item_text, o, kind, fingerprint, c);
  const int nh = static_cast<int>(o.heads.size());
  auto check = [&](const nlohmann::json& r, int unit, const std::string& path) {
    (void)parse_influence_unit(r, study, unit, path);
  };
  auto sweep = [&](const std::vector<int>& units, const UnitWriter& write) {
    const int d = units[0] / nh;
    InfluenceOptions od = o;
    od.heads.clear();
    for (int u : units) od.heads.push_back(o.heads[static_cast<std::size_t>(u % nh)]);
    double last_seconds = 0;
    auto save = [&](const DocumentInfluence& partial) {
      InfluenceUnit unit;
      unit.document = d;
      unit.head = partial.heads.back();
      unit.context_tokens = partial.context_tokens;
      unit.eval_tokens = partial.eval_tokens;
      unit.spans = partial.spans;
      unit.baseline_nll = partial.baseline_nll;
      unit.delta = partial.delta.back();
      unit.seconds = partial.seconds - last_seconds;
      last_seconds = partial.seconds;
      write(units[partial.heads.size() - 1], influence_unit_json(unit));
    };
    item(static_cast<std::size_t>(d))(od, nullptr, save);
  };
  const UnitShardRun run = run_unit_shard_groups(out_dir, study.unit, o.shard, [nh](int u) { return u / nh; }, sweep,
                                                 check, o.progress);
  if (o.progress)
    log_line(fmt::format("influence: shard {}/{}: units {}..{}: {} swept, {} already done", o.shard.index,
                         o.shard.count, run.begin, run.end, run.evaluated, run.skipped));
}

InfluenceCurves run_items(const Model& model, std::size_t n_items, const std::function<ItemSweep(std::size_t)>& item,
                          const std::function<std::string(std::size_t)>& item_text,
                          const InfluenceOptions& options, const SweepKind& kind, const std::string& out_dir) {
  if (n_items == 0) throw Error("influence: no documents");
  const ModelConfig& c = model.config;
  InfluenceOptions o = options;
  if (o.heads.empty()) o.heads = compactable_heads(c);
  check_compactable(c, o.heads);
  baseline_index(o.baseline_ratio, o.grid);
  const std::string fingerprint = fingerprint_hex(model_fingerprint(c, model.weights));
  namespace fs = std::filesystem;
  const fs::path doc_dir = fs::path(out_dir) / "docs";

  if (o.shard.active()) {
    run_shard(n_items, item, item_text, o, kind, fingerprint, c, out_dir);
    return {};
  }
  std::vector<DocumentInfluence> results;
  for (std::size_t d = 0; d < n_items; ++d) {
    const std::string path = (doc_dir / fmt::format("doc_{:05d}.json", d)).string();
    const std::string hash = input_hash(item_text(d));
    std::unique_ptr<DocumentInfluence> done;
    if (fs::exists(path))
      done = std::make_unique<DocumentInfluence>(
          read_document(path, fingerprint, o, kind, hash, c.n_layers, c.n_kv_heads));
    bool complete = done != nullptr;
    if (done)
      for (const HeadId& h : o.heads)
        if (std::find(done->heads.begin(), done->heads.end(), h) == done->heads.end()) complete = false;
    if (complete) {
      if (o.progress) log_line(fmt::format("influence: document {}/{} already done ({})", d + 1, n_items, path));
      results.push_back(*done);
      continue;
    }
    auto save = [&](const DocumentInfluence& partial) {
      write_file_atomic(path, document_json(partial, fingerprint, o, kind, hash).dump(1) + "\n");
    };
    results.push_back(item(d)(o, done.get(), save));
    save(results.back());
    if (o.progress)
      log_line(fmt::format("influence: document {}/{} done in {:.1f} s", d + 1, n_items, results.back().seconds));
  }

  InfluenceCurves curves;
  curves.model_fingerprint = fingerprint;
  curves.method = to_string(o.method);
  curves.baseline_ratio = o.baseline_ratio;
  curves.grid = o.grid;
  curves.n_layers = c.n_layers;
  curves.n_kv_heads = c.n_kv_heads;
  curves.sliding_layers = c.sliding_layers();
  curves.evaluated = kind.evaluated;
  curves.budget_proportions = o.budget_proportions;
  curves.budgets_source = o.budgets_source;
  for (const HeadId& h : o.heads) {
    std::vector<std::vector<double>> rows;
    for (const auto& r : results)
      for (std::size_t k = 0; k < r.heads.size(); ++k)
        if (r.heads[k] == h) rows.push_back(r.delta[k]);
    const CurveStats s = aggregate_documents(rows);
    HeadCurve hc;
    hc.layer = h.layer;
    hc.kv_head = h.kv_head;
    hc.ratios = o.grid;
    hc.mean = s.mean;
    hc.sem = s.sem;
    hc.std = s.std;
    hc.documents = s.documents;
    curves.heads.push_back(std::move(hc));
  }
  write_influence_curves_json((fs::path(out_dir) / "influence.json").string(), curves);
  write_influence_curves_csv((fs::path(out_dir) / "influence.csv").string(), curves);
  return curves;
}

}  // namespace

InfluenceCurves run_influence(const Model& model, const std::vector<std::string>& documents,
                              const InfluenceOptions& options, const std::string& out_dir) {
  if (documents.empty()) throw Error("influence: no documents");
  auto item = [&](std::size_t d) -> ItemSweep {
    return [&, d](const InfluenceOptions& o, const DocumentInfluence* done,
                  const std::function<void(const DocumentInfluence&)>& on_head) {
      const std::vector<int> ids = model.tokenizer->encode(documents[d], /*add_bos=*/true);
      return sweep_document(model, ids, static_cast<int>(d), o, done, on_head);
    };
  };
  return run_items(model, documents.size(), item, [&](std::size_t d) { return documents[d]; }, options,
                   SweepKind{}, out_dir);
}

InfluenceCurves run_influence_qa(const Model& model, const std::vector<QaArticle>& articles,
                                 const InfluenceOptions& options, const QaEvalOptions& qa,
                                 const std::string& out_dir) {
  if (articles.empty()) throw Error("influence: no articles");
  if (qa.max_answer_tokens < 1) throw Error(fmt::format("--max-answer-tokens {} must be >= 1", qa.max_answer_tokens));
  SweepKind kind;
  kind.evaluated = "qa-answers";
  kind.qa = {{"max_answer_tokens", qa.max_answer_tokens},
             {"prompt_template", qa.prompt_template},
             {"max_context_tokens", qa.max_context_tokens},
             {"chat", qa.chat != nullptr}};
  const Transformer tr(model.config, model.weights);
  QaAnswerStore store(qa.answers_cache_dir, model_fingerprint(model.config, model.weights), model.config.vocab_size);
  auto item = [&](std::size_t a) -> ItemSweep {
    return [&, a](const InfluenceOptions& o, const DocumentInfluence* done,
                  const std::function<void(const DocumentInfluence&)>& on_head) {
      const QaArticleTokens at = tokenize_qa_article(model, articles[a], qa);
      if (!at.note.empty() && options.progress) log_line(fmt::format("note: {}", at.note));
      auto spans = [&](const KVCache& full, const std::vector<float>& last_logits) {
        std::vector<EvalSpan> out;
        for (std::size_t q = 0; q < at.prompts.size(); ++q) {
          QaReferenceAnswer ref;
          if (const QaReferenceAnswer* hit = store.find(at.answer_keys[q])) {
            ref = *hit;
          } else {
            ref = make_reference_answer(tr, *model.tokenizer, full, last_logits, at.context.back(), at.prompts[q],
                                        qa.max_answer_tokens);
            store.put(at.answer_keys[q], ref);
          }
          out.push_back(EvalSpan{at.prompt_ids[q], ref.tokens});
        }
        store.save();
        return out;
      };
      return sweep_context(model, at.context, static_cast<int>(a), o, spans, done, on_head);
    };
  };
  return run_items(model, articles.size(), item, [&](std::size_t a) { return qa_article_to_jsonl(articles[a]); },
                   options, kind, out_dir);
}

}  // namespace kvcompact
