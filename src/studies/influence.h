// Head influence sweeps (issue #4, the central figure of arXiv 2602.16284): for one KV head at a
// time, move its keep ratio over a grid while every other head stays at a baseline ratio, and
// record the change in mean log-perplexity (NLL, nats/token) of the evaluated tokens.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "budgets/influence_curves.h"
#include "studies/influence_shards.h"
#include "studies/qa_eval.h"
#include "compaction/method_spec.h"
#include "compaction/reference_queries.h"
#include "model/model.h"

namespace kvcompact {

/// Options of a sweep.
struct InfluenceOptions {
  std::vector<double> grid;       ///< swept ratios, strictly increasing in [0, 1]
  double baseline_ratio = 0.05;   ///< every other head's ratio; must be on the grid
  std::vector<HeadId> heads;      ///< heads to sweep (empty = all, layer-major)
  MethodSpec method;              ///< compaction method (default: am)
  double context_frac = 0.6;      ///< T = floor(context_frac * N)
  uint64_t seed = 0;              ///< reference-query subsampling, self-study, `random` method
  bool reuse_prefix = true;       ///< fast sweep: reuse hidden states of layers below the head
  bool progress = true;           ///< progress lines on stderr
  /// Non-uniform baseline (--budgets): per-head proportions [n_layers * n_kv_heads], layer-major,
  /// summing to 1 (budget_solver.h). Every head not being swept then keeps
  /// per_head_budgets(p, T, baseline_ratio)[h] keys instead of kept_entries(baseline_ratio, T), so
  /// delta(baseline_ratio) is 0 only for heads whose budget equals that uniform count. Empty =
  /// uniform baseline.
  std::vector<double> budget_proportions;
  std::string budgets_source;     ///< file the proportions came from (recorded in the outputs)
  /// Run only shard I/N of the units (documents x heads, document-major; influence_shards.h):
  /// unit files in out_dir/units, no aggregate (kvcompact merge builds it). Inactive = one process.
  ShardSpec shard;
};

/// A span scored after the context: `prompt` is fed (not scored), then `scored` is
/// teacher-forced; the span's NLL is the mean over its scored tokens (>= 1).
struct EvalSpan {
  std::vector<int> prompt;
  std::vector<int> scored;
};

/// One document's sweep: delta[head][grid point] in nats/token.
struct DocumentInfluence {
  int document = 0;                 ///< 0-based index in the data file
  int context_tokens = 0;           ///< T
  int eval_tokens = 0;              ///< evaluated tokens (continuation, or all reference-answer tokens)
  int spans = 1;                    ///< evaluated spans (1 for plain text; questions for QA)
  double baseline_nll = 0;          ///< mean NLL with every head at the baseline ratio
  std::vector<HeadId> heads;        ///< swept heads, in order
  std::vector<std::vector<double>> delta;  ///< [heads][grid]
  double seconds = 0;               ///< wall time of this document's sweep
};

/// The heads influence sweeps by default: every KV head of every global layer. Sliding-window
/// layers (Gemma 3's local layers) are never compacted, so influence curves and budgets cover
/// global layers only. Throws Error when every layer is a sliding-window layer.
std::vector<HeadId> compactable_heads(const ModelConfig& config);

/// The heads an influence sweep covers from a --heads spec: "all" = compactable_heads (the global
/// layers' heads), else the listed KV heads (parse_head_names). Throws Error for a bad list or a
/// listed head in a sliding-window layer.
std::vector<HeadId> influence_heads(const std::string& spec, const ModelConfig& config);
/// Throws Error("--heads: head ... is in sliding-window layer ...") for a head of a sliding layer.
void check_compactable(const ModelConfig& config, const std::vector<HeadId>& heads);

/// Sweeps one document given as token ids (BOS included): context = the first
/// T = floor(context_frac * N) tokens, evaluated tokens = the rest (scored as in compact-eval:
/// the first from the context's last logits, the rest teacher-forced over the cache).
/// The baseline cache has every global-layer head compacted at the baseline ratio (sliding
/// layers keep all entries); for head (l, h) and ratio r
/// only that head is recompacted (its selection order computed once for all r) and
/// delta(r) = NLL(r) - NLL(baseline). With reuse_prefix the evaluated tokens' hidden states
/// entering layer l are taken from the baseline pass (layers below l see the same cache), so only
/// layers l..L-1 are recomputed. `done` holds heads finished earlier (resume): they are skipped;
/// `on_head` is called after each head (to save progress). Throws Error when T < 2 or N - T < 1.
DocumentInfluence sweep_document(const Model& model, const std::vector<int>& ids, int document,
                                 const InfluenceOptions& options, const DocumentInfluence* done = nullptr,
                                 const std::function<void(const DocumentInfluence&)>& on_head = {});

/// The general sweep: `context` (ids, BOS included when the model uses one) is prefilled once
/// (repeat-prefill, reference queries); `make_spans` receives the full context cache and the
/// logits after its last token and returns the evaluated spans (at least one). The NLL of a cache
/// is the mean over spans of each span's mean NLL (sweep_document: one span, the continuation).
/// Prefix reuse, resume and `on_head` as in sweep_document. Throws Error when the context has
/// fewer than 2 tokens, a span scores no token, or an NLL is not finite.
DocumentInfluence sweep_context(
    const Model& model, const std::vector<int>& context, int document, const InfluenceOptions& options,
    const std::function<std::vector<EvalSpan>(const KVCache& full_cache, const std::vector<float>& last_logits)>&
        make_spans,
    const DocumentInfluence* done = nullptr, const std::function<void(const DocumentInfluence&)>& on_head = {});

/// Runs the sweep over documents with per-document result files in `out_dir`/docs (written
/// atomically after each head; a rerun skips finished documents and heads, and refuses files from
/// a different model, method, grid or baseline), then writes the aggregate
/// `out_dir`/influence.json and influence.csv (mean, SEM, std across documents per head and ratio).
/// Returns the aggregate. With options.shard active: runs only that shard's units (skipping units
/// already in out_dir/units, refusing a folder of another study), writes no aggregate and returns
/// curves without heads.
InfluenceCurves run_influence(const Model& model, const std::vector<std::string>& documents,
                              const InfluenceOptions& options, const std::string& out_dir);

/// The sweep on the QA format (`influence --qa`): per article, context = the article as qa-eval
/// builds it (tokenize_qa_article: BOS, truncation, chat), evaluated spans = per question the
/// prompt (fed) and the reference answer (scored), the uncompacted model's greedy answer as
/// qa-eval makes it (the same answers cache, qa.answers_cache_dir). An article's NLL is the mean
/// over its questions of the mean answer NLL (qa-eval's answer_nll). Per-article files, resume and
/// aggregate as run_influence; the files also record "evaluated": "qa-answers" with the answer
/// length cap, prompt template and chat flag, and resume refuses files made with other values.
InfluenceCurves run_influence_qa(const Model& model, const std::vector<QaArticle>& articles,
                                 const InfluenceOptions& options, const QaEvalOptions& qa,
                                 const std::string& out_dir);

}  // namespace kvcompact
