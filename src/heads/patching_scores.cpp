#include "heads/patching_scores.h"

#include <fmt/format.h>

#include <span>

#include "metrics/perplexity.h"
#include "core/error.h"
#include "core/model_fingerprint.h"
#include "model/transformer.h"

namespace kvcompact {

namespace {

/// Total NLL (nats) of `targets` [m] from logits rows [m, vocab], one per target.
double total_nll(const std::vector<float>& logits, std::span<const int> targets) {
  const int vocab = static_cast<int>(logits.size() / targets.size());
  return sequence_nll(logits, vocab, targets);
}

}  // namespace

PatchingProbeResult patching_probe(const Model& model, const PatchingProbe& probe, const PatchingOptions& options) {
  const ModelConfig& c = model.config;
  if (options.ablation == Ablation::Mean)
    throw Error("head-scores --method patching: the mean ablation is not supported (use zero, uniform or scale[:F])");
  const int n = static_cast<int>(probe.ids.size()), k = probe.prompt_tokens;
  PatchingProbeResult r;
  r.masked_nll.assign(static_cast<std::size_t>(c.n_layers) * c.n_heads, 0.0);
  if (k < 1 || k >= n) return r;
  if (n - 1 > c.max_seq_len)
    throw Error(fmt::format("head-scores --method patching: an item of {} tokens is past the model's max_seq_len {}",
                            n, c.max_seq_len));
  r.answer_tokens = n - k;
  const HeadInterventionOptions iv_options{options.scale, MaskPositions::All};
  HeadIntervention check(c, {}, options.ablation, nullptr, nullptr, iv_options);  // validates the scale
  Transformer tr(c, model.weights);
  const std::span<const int> ids(probe.ids);
  const std::span<const int> targets = ids.subspan(k);
  ForwardOptions o;
  o.logits = LogitsMode::All;
  if (options.positions == MaskPositions::Last) {
    // The prompt but its last token, once, unmasked; then per head ids[k-1 .. n-2] over it.
    KVCache cache = tr.make_cache();
    if (k > 1) {
      ForwardOptions prefix;
      prefix.logits = LogitsMode::None;
      tr.forward(ids.first(k - 1), cache, prefix);
    }
    const CacheMark mark = cache.mark();
    const std::span<const int> fed = ids.subspan(k - 1, n - k);
    r.base_nll = total_nll(tr.forward(fed, cache, o), targets);
    cache.rollback(mark);
    for (int l = 0; l < c.n_layers; ++l)
      for (int h = 0; h < c.n_heads; ++h) {
        HeadIntervention iv(c, {{l, h}}, options.ablation, nullptr, nullptr, iv_options);
        o.observer = &iv;
        r.masked_nll[static_cast<std::size_t>(l) * c.n_heads + h] =
            total_nll(tr.forward(fed, cache, o), targets);
        cache.rollback(mark);
      }
    return r;
  }
  // Every row: a fresh forward of ids[0 .. n-2] per head; the answer's rows are k-1 .. n-2.
  ForwardOptions rows = o;
  rows.logits = LogitsMode::Rows;
  for (int i = k - 1; i < n - 1; ++i) rows.logit_rows.push_back(i);
  auto run = [&](ForwardObserver* observer) {
    KVCache cache = tr.make_cache();
    rows.observer = observer;
    return total_nll(tr.forward(ids.first(n - 1), cache, rows), targets);
  };
  r.base_nll = run(nullptr);
  for (int l = 0; l < c.n_layers; ++l)
    for (int h = 0; h < c.n_heads; ++h) {
      HeadIntervention iv(c, {{l, h}}, options.ablation, nullptr, nullptr, iv_options);
      r.masked_nll[static_cast<std::size_t>(l) * c.n_heads + h] = run(&iv);
    }
  return r;
}

HeadScores patching_scores(const Model& model, const std::vector<PatchingProbe>& probes,
                           const PatchingOptions& options, const std::function<void(int, int)>& progress) {
  const ModelConfig& c = model.config;
  std::vector<double> sum(static_cast<std::size_t>(c.n_layers) * c.n_heads, 0.0);
  int scored = 0;
  for (std::size_t i = 0; i < probes.size(); ++i) {
    const PatchingProbeResult r = patching_probe(model, probes[i], options);
    if (r.answer_tokens > 0) {
      ++scored;
      for (std::size_t h = 0; h < sum.size(); ++h) sum[h] += r.masked_nll[h] - r.base_nll;
    }
    if (progress) progress(static_cast<int>(i + 1), static_cast<int>(probes.size()));
  }
  if (scored == 0) throw Error("head-scores --method patching: no item has both a prompt and an answer token");
  for (double& x : sum) x /= scored;
  const std::string how = options.ablation == Ablation::Scale
                              ? fmt::format("scaled by {}", options.scale)
                              : fmt::format("{} ablation", to_string(options.ablation));
  return make_head_scores(
      c, fingerprint_hex(model_fingerprint(c, model.weights)), "patching",
      fmt::format("highest first: mean drop (nats per item) of the gold answer's teacher-forced log-probability when "
                  "the head alone is masked ({}, {} positions)",
                  how, options.positions == MaskPositions::Last ? "answer" : "all"),
      scored, sum, true);
}

}  // namespace kvcompact
