// The am and attn-nofit plug-ins (see am.h): schema, option parsing and printing, dispatch to
// AttentionMatcher.
#include "compaction/methods/am.h"

#include <fmt/format.h>

#include "compaction/value_fit.h"

namespace kvcompact {
namespace {

const std::vector<MethodOption>& selection_options() {
  static const std::vector<MethodOption> o = {
      {"select", "attn|omp",
       "key selection: highest attention, or orthogonal matching pursuit on\nthe attention mass with NNLS refits (default attn)"},
      {"score", "rms|mean|max", "attn: per-key score over the reference queries (default rms)"},
      {"pool", "none|avg:K|max:K", "attn: 1-D pooling of the scores, K odd (default none)"},
  };
  return o;
}

/// The am-only OMP keys: they refit weights that attn-nofit never fits.
const std::vector<MethodOption>& omp_fit_options() {
  static const std::vector<MethodOption> o = {
      {"refit", "exact|bounded",
       "omp: weights refit after each pick by exact NNLS, or by the beta fit's\nbounded NNLS (lo, hi, iters) as "
       "the paper's OMPCompaction (default exact)"},
      {"schedule", "single|progressive",
       "omp: one key per step, or the paper's progressive schedule (1 key/step\nbelow 300 keys, 2 below 1500, "
       "then 4; refits every 2nd step above 300)\n(default single)"},
      {"drop", "X",
       "omp: once t keys are picked, drop those whose refit log-weight (beta)\nis below X nats, exclude them and pick "
       "replacements, <= 3 rounds\n(the paper uses -7; X < hi with refit=bounded; when the keys run\nout the latest "
       "unselected ones fill the budget; default off)"},
  };
  return o;
}

const MethodOption& recent_schema() {
  static const MethodOption value{"recent", "N", "keep the last N context entries verbatim, compact the rest (default 0)"};
  return value;
}
const MethodOption& queries_schema() {
  static const MethodOption value{"queries", "SRC[:CAP]+...[+total:N]",
                            "reference-query sources: repeat, context, self-study, random,\neach with an optional "
                            "cap; total cap N (default repeat, total 50000)"};
  return value;
}

const MethodInfo& am_info() {
  static const MethodInfo info = [] {
    MethodInfo i{"am", "Attention Matching (arXiv 2602.16284): keep t keys, fit beta (mass) and C2 (output)", {}};
    i.options = selection_options();
    for (const MethodOption& m : omp_fit_options()) i.options.push_back(m);
    i.options.push_back({"beta", "nnls-pg|nnls-exact|zero",
                         "mass fit: bounded NNLS by projected gradient, exact Lawson-Hanson\nNNLS clipped to [e^lo, "
                         "e^hi], or beta = 0 (default nnls-pg)"});
    i.options.push_back({"iters", "N", "nnls-pg: projected-gradient steps, N >= 0 (default 2)"});
    i.options.push_back({"lo", "X", "nnls-pg / nnls-exact: lower bound on beta in nats (default -3)"});
    i.options.push_back({"hi", "X", "nnls-pg / nnls-exact: upper bound on beta in nats (default 3)"});
    i.options.push_back({"c2", "lsq|direct|ridge[:L[:S]]",
                         "value fit: least squares (dgelsd), original values, or ridge with\nlambda L (default "
                         "1e-4) scaled by S = sigma (sigma_max(P)^2,\ndefault), fro (||P||_F^2) or fixed (default lsq)"});
    i.options.push_back(recent_schema());
    i.options.push_back(queries_schema());
    return i;
  }();
  return info;
}

const MethodInfo& attn_nofit_info() {
  static const MethodInfo info = [] {
    MethodInfo i{"attn-nofit", "AM's key selection with beta 0 and the original values", selection_options()};
    i.options.push_back(recent_schema());
    i.options.push_back(queries_schema());
    return i;
  }();
  return info;
}

/// Parses the keys both families share (select, score, pool, recent) into o.
void parse_selection(const MethodSettings& s, AttentionMatchingOptions& o) {
  if (s.has("select"))
    o.selector = s.choice<KeySelector>("select", "attn|omp", {{"attn", KeySelector::Attention}, {"omp", KeySelector::Omp}});
  if (o.selector == KeySelector::Omp && (s.has("score") || s.has("pool")))
    s.fail(fmt::format("key '{}' applies only to select=attn", s.has("score") ? "score" : "pool"));
  if (s.has("score"))
    o.score = s.choice<SelectionScore>("score", "rms|mean|max",
                                       {{"rms", SelectionScore::Rms}, {"mean", SelectionScore::Mean}, {"max", SelectionScore::Max}});
  if (s.has("pool")) o.pool = s.pool("pool");
  if (s.has("recent")) o.recent = s.integer("recent", "N", 0, 1 << 30);
}

/// The am-only OMP keys (refit, schedule, drop); needs o.nnls parsed first (drop < hi).
void parse_omp_fit(const MethodSettings& s, AttentionMatchingOptions& o) {
  for (const char* key : {"refit", "schedule", "drop"})
    if (s.has(key) && o.selector != KeySelector::Omp) s.fail(fmt::format("key '{}' applies only to select=omp", key));
  if (s.has("refit"))
    o.omp_refit = s.choice<OmpRefit>("refit", "exact|bounded", {{"exact", OmpRefit::Exact}, {"bounded", OmpRefit::Bounded}});
  if (s.has("schedule"))
    o.omp_progressive = s.choice<bool>("schedule", "single|progressive", {{"single", false}, {"progressive", true}});
  if (s.has("drop")) {
    o.omp_drop = s.number("drop", "X");
    if (o.omp_refit == OmpRefit::Bounded && *o.omp_drop >= o.nnls.hi)
      s.fail(fmt::format("drop = {} is not below hi = {}: every refit weight would be dropped", *o.omp_drop, o.nnls.hi));
  }
}

std::shared_ptr<const Method> make_am(const MethodSettings& s) {
  AttentionMatchingOptions o;
  parse_selection(s, o);
  if (s.has("beta"))
    o.beta = s.choice<BetaFit>("beta", "nnls-pg|nnls-exact|zero",
                               {{"nnls-pg", BetaFit::NnlsPg}, {"nnls-exact", BetaFit::NnlsExact}, {"zero", BetaFit::Zero}});
  if (s.has("iters") && o.beta != BetaFit::NnlsPg) s.fail("key 'iters' applies only to beta=nnls-pg");
  if ((s.has("lo") || s.has("hi")) && o.beta == BetaFit::Zero)
    s.fail(fmt::format("key '{}' does not apply to beta=zero", s.has("lo") ? "lo" : "hi"));
  if (s.has("iters")) o.nnls.iters = s.integer("iters", "N", 0, 1000000);
  if (s.has("lo")) o.nnls.lo = s.number("lo", "X");
  if (s.has("hi")) o.nnls.hi = s.number("hi", "X");
  if (o.nnls.lo > o.nnls.hi) s.fail(fmt::format("lo = {} is above hi = {}", o.nnls.lo, o.nnls.hi));
  parse_omp_fit(s, o);
  if (s.has("c2")) {
    const std::vector<std::string>& a = s.args("c2");
    s.arity("c2", 1, 3, "lsq|direct|ridge[:LAMBDA[:sigma|fro|fixed]]");
    o.c2.kind = s.pick<ValueFit>("c2", a[0], {{"lsq", ValueFit::Lsq}, {"ridge", ValueFit::Ridge}, {"direct", ValueFit::Direct}});
    if (o.c2.kind != ValueFit::Ridge && a.size() > 1) s.fail(fmt::format("c2={} takes no arguments", a[0]));
    if (a.size() > 1) {
      o.c2.lambda = s.parse_double("c2 ridge lambda", a[1]);
      if (o.c2.lambda < 0.0) s.fail(fmt::format("c2 ridge lambda {} is negative", o.c2.lambda));
    }
    if (a.size() > 2)
      o.c2.scale = s.pick<RidgeScale>("c2 ridge scale", a[2],
                                      {{"sigma", RidgeScale::Sigma}, {"fro", RidgeScale::Fro}, {"fixed", RidgeScale::Fixed}});
  }
  return std::make_shared<AmMethod>(am_info(), o, true);
}

std::shared_ptr<const Method> make_attn_nofit(const MethodSettings& s) {
  AttentionMatchingOptions o;
  parse_selection(s, o);
  return std::make_shared<AmMethod>(attn_nofit_info(), o, false);
}

class PreparedMatcher final : public PreparedHead {
 public:
  PreparedMatcher(const HeadCompactionInput& in, const AttentionMatchingOptions& o, int max_budget)
      : matcher_(in, o, max_budget) {}
  CompactedHead compact(int budget) const override { return matcher_.compact(budget); }
  void begin_budget_sweep(int max_budget) override { matcher_.share_gram(max_budget); }
  void end_budget_sweep() override { matcher_.drop_shared_gram(); }

 private:
  AttentionMatcher matcher_;
};

}  // namespace

AmMethod::AmMethod(const MethodInfo& info, const AttentionMatchingOptions& options, bool fit)
    : Method(info), options_(options), fit_(fit) {}

AttentionMatchingOptions AmMethod::effective_options() const {
  if (fit_) return options_;
  AttentionMatchingOptions o = options_;  // as compact_attn_nofit
  o.beta = BetaFit::Zero;
  o.c2.kind = ValueFit::Direct;
  return o;
}

std::vector<std::string> AmMethod::settings() const {
  const AttentionMatchingOptions& o = options_;
  const AttentionMatchingOptions d;
  std::vector<std::string> items;
  if (o.selector != d.selector) items.push_back("select=" + key_selector_name(o.selector));
  if (o.selector == KeySelector::Attention) {
    if (o.score != d.score) items.push_back("score=" + selection_score_name(o.score));
    if (!(o.pool == d.pool)) items.push_back("pool=" + pooling_name(o.pool));
  } else {
    if (o.omp_refit != d.omp_refit) items.push_back("refit=bounded");
    if (o.omp_progressive) items.push_back("schedule=progressive");
    if (o.omp_drop) items.push_back(format_setting("drop", *o.omp_drop));
  }
  if (fit_) {
    if (o.beta != d.beta) items.push_back("beta=" + beta_fit_name(o.beta));
    if (o.beta == BetaFit::NnlsPg && o.nnls.iters != d.nnls.iters) items.push_back(fmt::format("iters={}", o.nnls.iters));
    if (o.beta != BetaFit::Zero) {
      if (o.nnls.lo != d.nnls.lo) items.push_back(format_setting("lo", o.nnls.lo));
      if (o.nnls.hi != d.nnls.hi) items.push_back(format_setting("hi", o.nnls.hi));
    }
    if (o.c2.kind != d.c2.kind) items.push_back("c2=" + value_fit_name(o.c2));
  }
  if (o.recent != d.recent) items.push_back(fmt::format("recent={}", o.recent));
  return items;
}

CompactedHead AmMethod::compact(const HeadCompactionInput& in, int budget, std::uint64_t) const {
  return fit_ ? compact_attention_matching(in, budget, options_) : compact_attn_nofit(in, budget, options_);
}

std::unique_ptr<PreparedHead> AmMethod::prepare(const HeadCompactionInput& in, int max_budget, std::uint64_t) const {
  return std::make_unique<PreparedMatcher>(in, effective_options(), max_budget);
}

MethodEntry am_method() { return {&am_info(), &make_am}; }
MethodEntry attn_nofit_method() { return {&attn_nofit_info(), &make_attn_nofit}; }

}  // namespace kvcompact
