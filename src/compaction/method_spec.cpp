// Method spec parsing, printing and the per-head dispatch (see method_spec.h).
#include "compaction/method_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstddef>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "compaction/baselines.h"
#include "compaction/expected_attention.h"
#include "compaction/knorm.h"
#include "compaction/observed_attention.h"
#include "io/error.h"

namespace kvcompact {
namespace {

struct FamilyInfo {
  MethodFamily family;
  const char* name;
  std::vector<std::string> keys;  // in canonical order
};

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> f = {
      {MethodFamily::Am, "am",
       {"select", "score", "pool", "beta", "iters", "lo", "hi", "c2", "recent", "queries"}},
      {MethodFamily::Random, "random", {}},
      {MethodFamily::Recent, "recent", {}},
      {MethodFamily::AttnNoFit, "attn-nofit", {"select", "score", "pool", "recent", "queries"}},
      {MethodFamily::SnapKv, "snapkv", {"window", "pool"}},
      {MethodFamily::Streaming, "streaming", {"sink"}},
      {MethodFamily::H2o, "h2o", {"recent"}},
      {MethodFamily::PyramidKv, "pyramidkv", {"beta", "window", "pool"}},
      {MethodFamily::Knorm, "knorm", {}},
      {MethodFamily::Tova, "tova", {}},
      {MethodFamily::Observed, "observed", {}},
      {MethodFamily::Expected, "expected", {"future", "sink", "cov", "vnorm", "eps"}},
      {MethodFamily::AdaKv, "adakv", {"alpha", "window", "pool"}},
  };
  return f;
}

const FamilyInfo& info(MethodFamily family) {
  for (const FamilyInfo& f : families())
    if (f.family == family) return f;
  throw Error("method spec: unknown family");
}

std::string join(const std::vector<std::string>& v) { return fmt::format("{}", fmt::join(v, ", ")); }

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t p = s.find(sep, start);
    out.emplace_back(s.substr(start, p == std::string_view::npos ? std::string_view::npos : p - start));
    if (p == std::string_view::npos) return out;
    start = p + 1;
  }
}

struct Ctx {
  std::string spec;   // the whole spec, for messages
  std::string family;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("method spec '{}': {}", spec, what));
  }
};

int parse_int(const Ctx& c, const std::string& key, const std::string& v, int min, int max) {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    c.fail(fmt::format("{}: '{}' is not an integer", key, v));
  if (x < min || x > max) c.fail(fmt::format("{}: {} is outside [{}, {}]", key, x, min, max));
  return x;
}

double parse_double(const Ctx& c, const std::string& key, const std::string& v) {
  double x = 0.0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(x))
    c.fail(fmt::format("{}: '{}' is not a finite number", key, v));
  return x;
}

void arity(const Ctx& c, const std::string& key, const std::vector<std::string>& args, std::size_t lo,
           std::size_t hi, const char* form) {
  if (args.size() < lo || args.size() > hi)
    c.fail(fmt::format("{}={} has the wrong number of ':' arguments (expected {}={})", key,
                       fmt::join(args, ":"), key, form));
}

template <typename T>
T pick(const Ctx& c, const std::string& key, const std::string& v,
       const std::vector<std::pair<const char*, T>>& choices) {
  std::vector<std::string> names;
  for (const auto& [name, val] : choices) {
    if (v == name) return val;
    names.emplace_back(name);
  }
  c.fail(fmt::format("{}: unknown value '{}' (valid: {})", key, v, join(names)));
}

ScorePooling parse_pool(const Ctx& c, const std::vector<std::string>& a) {
  arity(c, "pool", a, 1, 2, "none|avg:K|max:K");
  const PoolKind kind =
      pick<PoolKind>(c, "pool", a[0], {{"none", PoolKind::None}, {"avg", PoolKind::Avg}, {"max", PoolKind::Max}});
  if (kind == PoolKind::None) {
    if (a.size() != 1) c.fail("pool=none takes no kernel size");
    return {};
  }
  if (a.size() != 2) c.fail(fmt::format("pool={} needs a kernel size (e.g. pool={}:5)", a[0], a[0]));
  const int k = parse_int(c, "pool kernel", a[1], 1, 1000001);
  if (k % 2 == 0) c.fail(fmt::format("pool kernel {} must be odd", k));
  return {kind, k};
}

QuerySpec parse_queries(const Ctx& c, const std::string& v) {
  QuerySpec q;
  q.sources.clear();
  bool total_seen = false;
  const std::vector<std::pair<const char*, QuerySourceKind>> kinds = {
      {"repeat", QuerySourceKind::Repeat},
      {"context", QuerySourceKind::Context},
      {"self-study", QuerySourceKind::SelfStudy},
      {"random", QuerySourceKind::Random}};
  for (const std::string& term : split(v, '+')) {
    const std::vector<std::string> parts = split(term, ':');
    if (parts.size() > 2 || parts[0].empty())
      c.fail(fmt::format("queries: bad term '{}' (expected source[:cap] or total:N)", term));
    if (parts[0] == "total") {
      if (parts.size() != 2 || total_seen) c.fail(fmt::format("queries: bad or repeated term '{}'", term));
      q.total_cap = parse_int(c, "queries total", parts[1], 1, 1 << 30);
      total_seen = true;
      continue;
    }
    QuerySource s;
    s.kind = pick<QuerySourceKind>(c, "queries source", parts[0], kinds);
    if (parts.size() == 2) s.cap = parse_int(c, fmt::format("queries {} cap", parts[0]), parts[1], 1, 1 << 30);
    for (const QuerySource& o : q.sources)
      if (o.kind == s.kind) c.fail(fmt::format("queries: source '{}' is given twice", parts[0]));
    q.sources.push_back(s);
  }
  if (q.sources.empty()) c.fail("queries: no source given (valid: repeat, context, self-study, random)");
  return q;
}

const char* source_name(QuerySourceKind k) {
  switch (k) {
    case QuerySourceKind::Repeat: return "repeat";
    case QuerySourceKind::Context: return "context";
    case QuerySourceKind::SelfStudy: return "self-study";
    case QuerySourceKind::Random: return "random";
  }
  return "repeat";
}

std::string queries_string(const QuerySpec& q) {
  std::vector<std::string> terms;
  for (const QuerySource& s : q.sources)
    terms.push_back(s.cap > 0 ? fmt::format("{}:{}", source_name(s.kind), s.cap) : source_name(s.kind));
  if (q.total_cap != QuerySpec{}.total_cap) terms.push_back(fmt::format("total:{}", q.total_cap));
  return fmt::format("{}", fmt::join(terms, "+"));
}

}  // namespace

std::string method_family_name(MethodFamily family) { return info(family).name; }

MethodSpec parse_method_spec(std::string_view text) {
  Ctx c{std::string(text), {}};
  if (text.empty()) c.fail("empty method spec");
  const std::size_t cut = text.find_first_of(":,");
  c.family = std::string(text.substr(0, cut));
  const FamilyInfo* fam = nullptr;
  std::vector<std::string> names;
  for (const FamilyInfo& f : families()) {
    names.emplace_back(f.name);
    if (c.family == f.name) fam = &f;
  }
  if (!fam) c.fail(fmt::format("unknown method family '{}' (valid: {})", c.family, join(names)));
  MethodSpec spec;
  spec.family = fam->family;

  // Collect key -> args.
  std::map<std::string, std::vector<std::string>> kv;
  std::vector<std::string> seen_order;
  if (cut != std::string_view::npos) {
    const std::string_view rest = text.substr(cut + 1);
    for (const std::string& item : split(rest, ',')) {
      if (item.empty()) c.fail("empty setting (stray ',' or ':')");
      std::string current;
      const std::vector<std::string> tokens = split(item, ':');
      for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
        const std::string& tok = tokens[ti];
        if (tok.empty()) c.fail(fmt::format("empty token in '{}'", item));
        const std::size_t eq = tok.find('=');
        if (eq == std::string::npos) {
          if (current.empty())
            c.fail(fmt::format("'{}' is not a key=value setting (valid keys for {}: {})", tok,
                               fam->name, fam->keys.empty() ? "none" : join(fam->keys)));
          kv[current].push_back(tok);
          continue;
        }
        current = tok.substr(0, eq);
        if (std::find(fam->keys.begin(), fam->keys.end(), current) == fam->keys.end())
          c.fail(fmt::format("unknown key '{}' for method {} (valid: {})", current, fam->name,
                             fam->keys.empty() ? "none" : join(fam->keys)));
        if (kv.count(current)) c.fail(fmt::format("key '{}' is given twice", current));
        std::string value = tok.substr(eq + 1);
        if (current == "queries") {  // the rest of the item is the queries value
          for (std::size_t r = ti + 1; r < tokens.size(); ++r) value += ":" + tokens[r];
          kv[current] = {value};
          seen_order.push_back(current);
          break;
        }
        if (value.empty()) c.fail(fmt::format("key '{}' has an empty value", current));
        kv[current] = {value};
        seen_order.push_back(current);
      }
    }
  }
  auto has = [&](const char* k) { return kv.count(k) > 0; };
  auto one = [&](const char* k, const char* form) -> const std::string& {
    arity(c, k, kv.at(k), 1, 1, form);
    return kv.at(k)[0];
  };

  switch (spec.family) {
    case MethodFamily::Am:
    case MethodFamily::AttnNoFit: {
      AttentionMatchingOptions& o = spec.am;
      if (has("select"))
        o.selector = pick<KeySelector>(c, "select", one("select", "attn|omp"),
                                       {{"attn", KeySelector::Attention}, {"omp", KeySelector::Omp}});
      if (o.selector == KeySelector::Omp && (has("score") || has("pool")))
        c.fail(fmt::format("key '{}' applies only to select=attn", has("score") ? "score" : "pool"));
      if (has("score"))
        o.score = pick<SelectionScore>(c, "score", one("score", "rms|mean|max"),
                                       {{"rms", SelectionScore::Rms},
                                        {"mean", SelectionScore::Mean},
                                        {"max", SelectionScore::Max}});
      if (has("pool")) o.pool = parse_pool(c, kv.at("pool"));
      if (has("beta"))
        o.beta = pick<BetaFit>(c, "beta", one("beta", "nnls-pg|nnls-exact|zero"),
                               {{"nnls-pg", BetaFit::NnlsPg},
                                {"nnls-exact", BetaFit::NnlsExact},
                                {"zero", BetaFit::Zero}});
      if (has("iters") && o.beta != BetaFit::NnlsPg) c.fail("key 'iters' applies only to beta=nnls-pg");
      if ((has("lo") || has("hi")) && o.beta == BetaFit::Zero)
        c.fail(fmt::format("key '{}' does not apply to beta=zero", has("lo") ? "lo" : "hi"));
      if (has("iters")) o.nnls.iters = parse_int(c, "iters", one("iters", "N"), 0, 1000000);
      if (has("lo")) o.nnls.lo = parse_double(c, "lo", one("lo", "X"));
      if (has("hi")) o.nnls.hi = parse_double(c, "hi", one("hi", "X"));
      if (o.nnls.lo > o.nnls.hi) c.fail(fmt::format("lo = {} is above hi = {}", o.nnls.lo, o.nnls.hi));
      if (has("c2")) {
        const std::vector<std::string>& a = kv.at("c2");
        arity(c, "c2", a, 1, 3, "lsq|direct|ridge[:LAMBDA[:sigma|fro|fixed]]");
        o.c2.kind = pick<ValueFit>(c, "c2", a[0],
                                   {{"lsq", ValueFit::Lsq}, {"ridge", ValueFit::Ridge}, {"direct", ValueFit::Direct}});
        if (o.c2.kind != ValueFit::Ridge && a.size() > 1)
          c.fail(fmt::format("c2={} takes no arguments", a[0]));
        if (a.size() > 1) {
          o.c2.lambda = parse_double(c, "c2 ridge lambda", a[1]);
          if (o.c2.lambda < 0.0) c.fail(fmt::format("c2 ridge lambda {} is negative", o.c2.lambda));
        }
        if (a.size() > 2)
          o.c2.scale = pick<RidgeScale>(c, "c2 ridge scale", a[2],
                                        {{"sigma", RidgeScale::Sigma}, {"fro", RidgeScale::Fro}, {"fixed", RidgeScale::Fixed}});
      }
      if (has("recent")) o.recent = parse_int(c, "recent", one("recent", "N"), 0, 1 << 30);
      if (has("queries")) spec.queries = parse_queries(c, kv.at("queries")[0]);
      break;
    }
    case MethodFamily::Random:
    case MethodFamily::Recent: break;
    case MethodFamily::PyramidKv:
      if (has("beta")) spec.pyramid_beta = parse_double(c, "beta", one("beta", "X"));
      if (spec.pyramid_beta < 1.0) c.fail(fmt::format("beta {} must be >= 1", spec.pyramid_beta));
      [[fallthrough]];
    case MethodFamily::SnapKv:
      if (has("window")) spec.snapkv.window = parse_int(c, "window", one("window", "N"), 1, 1 << 30);
      if (has("pool")) spec.snapkv.pool = parse_pool(c, kv.at("pool"));
      break;
    case MethodFamily::Streaming:
      if (has("sink")) spec.sink = parse_int(c, "sink", one("sink", "N"), 0, 1 << 30);
      break;
    case MethodFamily::Knorm:
    case MethodFamily::Tova:
    case MethodFamily::Observed: break;
    case MethodFamily::Expected: {
      ExpectedAttentionOptions& e = spec.expected;
      if (has("future")) e.n_future = parse_int(c, "future", one("future", "N"), 1, 1 << 24);
      if (has("sink")) e.n_sink = parse_int(c, "sink", one("sink", "N"), 0, 1 << 30);
      if (has("cov")) e.use_covariance = parse_int(c, "cov", one("cov", "0|1"), 0, 1) == 1;
      if (has("vnorm")) e.use_vnorm = parse_int(c, "vnorm", one("vnorm", "0|1"), 0, 1) == 1;
      if (has("eps")) {
        e.epsilon = parse_double(c, "eps", one("eps", "X"));
        if (e.epsilon < 0.0) c.fail(fmt::format("eps {} is negative", e.epsilon));
      }
      break;
    }
    case MethodFamily::AdaKv:
      if (has("alpha")) {
        spec.adakv.alpha = parse_double(c, "alpha", one("alpha", "X"));
        if (spec.adakv.alpha < 0.0 || spec.adakv.alpha > 1.0)
          c.fail(fmt::format("alpha: {} is outside [0, 1]", spec.adakv.alpha));
      }
      if (has("window")) spec.adakv.snapkv.window = parse_int(c, "window", one("window", "N"), 1, 1 << 30);
      if (has("pool")) spec.adakv.snapkv.pool = parse_pool(c, kv.at("pool"));
      break;
    case MethodFamily::H2o:
      if (has("recent")) {
        spec.h2o_recent = parse_double(c, "recent", one("recent", "X"));
        if (spec.h2o_recent < 0.0 || spec.h2o_recent > 1.0)
          c.fail(fmt::format("recent: {} is outside [0, 1] (a fraction of the budget)", spec.h2o_recent));
      }
      break;
  }
  return spec;
}

std::string to_string(const MethodSpec& spec) {
  const MethodSpec d;
  std::vector<std::string> items;
  switch (spec.family) {
    case MethodFamily::Am:
    case MethodFamily::AttnNoFit: {
      const AttentionMatchingOptions& o = spec.am;
      const bool am = spec.family == MethodFamily::Am;
      if (o.selector != d.am.selector) items.push_back("select=" + key_selector_name(o.selector));
      if (o.selector == KeySelector::Attention) {
        if (o.score != d.am.score) items.push_back("score=" + selection_score_name(o.score));
        if (!(o.pool == d.am.pool)) items.push_back("pool=" + pooling_name(o.pool));
      }
      if (am) {
        if (o.beta != d.am.beta) items.push_back("beta=" + beta_fit_name(o.beta));
        if (o.beta == BetaFit::NnlsPg && o.nnls.iters != d.am.nnls.iters)
          items.push_back(fmt::format("iters={}", o.nnls.iters));
        if (o.beta != BetaFit::Zero) {
          if (o.nnls.lo != d.am.nnls.lo) items.push_back(fmt::format("lo={}", o.nnls.lo));
          if (o.nnls.hi != d.am.nnls.hi) items.push_back(fmt::format("hi={}", o.nnls.hi));
        }
        if (o.c2.kind != d.am.c2.kind) items.push_back("c2=" + value_fit_name(o.c2));
      }
      if (o.recent != d.am.recent) items.push_back(fmt::format("recent={}", o.recent));
      if (!(spec.queries == d.queries)) items.push_back("queries=" + queries_string(spec.queries));
      break;
    }
    case MethodFamily::Random:
    case MethodFamily::Recent: break;
    case MethodFamily::PyramidKv:
      if (spec.pyramid_beta != d.pyramid_beta) items.push_back(fmt::format("beta={}", spec.pyramid_beta));
      [[fallthrough]];
    case MethodFamily::SnapKv:
      if (spec.snapkv.window != d.snapkv.window) items.push_back(fmt::format("window={}", spec.snapkv.window));
      if (!(spec.snapkv.pool == d.snapkv.pool)) items.push_back("pool=" + pooling_name(spec.snapkv.pool));
      break;
    case MethodFamily::Streaming:
      if (spec.sink != d.sink) items.push_back(fmt::format("sink={}", spec.sink));
      break;
    case MethodFamily::H2o:
      if (spec.h2o_recent != d.h2o_recent) items.push_back(fmt::format("recent={}", spec.h2o_recent));
      break;
    case MethodFamily::Knorm:
    case MethodFamily::Tova:
    case MethodFamily::Observed: break;
    case MethodFamily::Expected: {
      const ExpectedAttentionOptions& e = spec.expected;
      if (e.n_future != d.expected.n_future) items.push_back(fmt::format("future={}", e.n_future));
      if (e.n_sink != d.expected.n_sink) items.push_back(fmt::format("sink={}", e.n_sink));
      if (e.use_covariance != d.expected.use_covariance) items.push_back(fmt::format("cov={}", e.use_covariance ? 1 : 0));
      if (e.use_vnorm != d.expected.use_vnorm) items.push_back(fmt::format("vnorm={}", e.use_vnorm ? 1 : 0));
      if (e.epsilon != d.expected.epsilon) items.push_back(fmt::format("eps={}", e.epsilon));
      break;
    }
    case MethodFamily::AdaKv:
      if (spec.adakv.alpha != d.adakv.alpha) items.push_back(fmt::format("alpha={}", spec.adakv.alpha));
      if (spec.adakv.snapkv.window != d.adakv.snapkv.window)
        items.push_back(fmt::format("window={}", spec.adakv.snapkv.window));
      if (!(spec.adakv.snapkv.pool == d.adakv.snapkv.pool)) items.push_back("pool=" + pooling_name(spec.adakv.snapkv.pool));
      break;
  }
  const std::string name = method_family_name(spec.family);
  if (items.empty()) return name;
  return fmt::format("{}:{}", name, fmt::join(items, ","));
}

std::string method_help() {
  return R"(Compaction methods: FAMILY[:KEY=VALUE[:ARG]...][,KEY=VALUE...]  (keys in any order, each once)

am            Attention Matching (arXiv 2602.16284): keep t keys, fit beta (mass) and C2 (output)
  select=attn|omp               key selection: highest attention, or orthogonal matching pursuit on
                                the attention mass with NNLS refits (default attn)
  score=rms|mean|max            attn: per-key score over the reference queries (default rms)
  pool=none|avg:K|max:K         attn: 1-D pooling of the scores, K odd (default none)
  beta=nnls-pg|nnls-exact|zero  mass fit: bounded NNLS by projected gradient, exact Lawson-Hanson
                                NNLS clipped to [e^lo, e^hi], or beta = 0 (default nnls-pg)
  iters=N                       nnls-pg: projected-gradient steps, N >= 0 (default 2)
  lo=X, hi=X                    nnls-pg / nnls-exact: bounds on beta in nats (default -3, 3)
  c2=lsq|direct|ridge[:L[:S]]   value fit: least squares (dgelsd), original values, or ridge with
                                lambda L (default 1e-4) scaled by S = sigma (sigma_max(P)^2,
                                default), fro (||P||_F^2) or fixed (default lsq)
  recent=N                      keep the last N context entries verbatim, compact the rest (default 0)
  queries=SRC[:CAP]+...[+total:N]  reference-query sources: repeat, context, self-study, random,
                                each with an optional cap; total cap N (default repeat, total 50000)
random        t random keys (seeded), beta 0, original values; no keys
recent        the last t keys; no keys
attn-nofit    AM's key selection with beta 0 and the original values
  select, score, pool, recent, queries   as for am
snapkv        SnapKV (arXiv 2404.14469): votes of the last W context queries on the earlier keys
  window=W                      observation window, W >= 1 (default 32)
  pool=none|avg:K|max:K         pooling of the votes (default avg:5)
streaming     StreamingLLM (arXiv 2309.17453): first S sink keys + the most recent keys
  sink=S                        S >= 0 (default 4)
h2o           H2O (arXiv 2306.14048): heavy hitters by accumulated causal attention + recent keys
  recent=F                      fraction of the budget kept as recent keys, in [0, 1] (default 0.5)
pyramidkv     PyramidKV (arXiv 2406.02069): per-layer budgets decreasing linearly bottom to top
              (same total), SnapKV selection in each head
  beta=B                        top layer keeps t/B, bottom 2t - t/B; B >= 1 (default 20)
  window=W, pool=...            as for snapkv
knorm         Knorm (arXiv 2406.11430, kvpress KnormPress): the keys of smallest L2 norm; no keys
tova          TOVA (arXiv 2401.06104, kvpress TOVAPress): the last context query's attention,
              averaged over the layer's query heads (one ranking per layer); last key kept; no keys
observed      ObservedAttention (kvpress): causal attention received, divided by the number of
              queries that see the key, group mean; no keys
expected      ExpectedAttention (kvpress): attention expected from future queries (Gaussian of the
              context's pre-RoPE queries, mean RoPE rotation of the next positions) times ||v||
  future=N                      future positions averaged over, N >= 1 (default 512)
  sink=S                        first keys always kept, S >= 0 (default 4)
  cov=0|1, vnorm=0|1            use the query covariance / the value norm (default 1, 1)
  eps=X                         added to the expected attention before the value norm (default 0)
adakv         AdaKV (arXiv 2407.11550, kvpress AdaKVPress) over kvpress's SnapKV scores: each head
              keeps its floor(alpha*t) best entries, the layer's rest goes to its best scores overall
  alpha=X                       safeguard fraction in [0, 1] (default 0.2)
  window=W, pool=...            SnapKV scorer (default 64, avg:5)
)";
}

bool uses_reference_queries(const MethodSpec& spec) {
  return spec.family == MethodFamily::Am || spec.family == MethodFamily::AttnNoFit;
}

bool uses_context_queries(const MethodSpec& spec) {
  switch (spec.family) {
    case MethodFamily::SnapKv:
    case MethodFamily::H2o:
    case MethodFamily::PyramidKv:
    case MethodFamily::Tova:
    case MethodFamily::Observed:
    case MethodFamily::Expected:
    case MethodFamily::AdaKv: return true;
    default: return false;
  }
}

bool is_layer_scoped(const MethodSpec& spec) {
  return spec.family == MethodFamily::Tova || spec.family == MethodFamily::AdaKv;
}

int method_budget(const MethodSpec& spec, int t, int T, int layer, int n_layers) {
  if (T < 0 || t < 0 || t > T) throw Error(fmt::format("{}: cannot keep {} of {} entries",
                                                       method_family_name(spec.family), t, T));
  if (n_layers < 1 || layer < 0 || layer >= n_layers)
    throw Error(fmt::format("{}: layer {} is outside [0, {})", method_family_name(spec.family), layer,
                            n_layers));
  if (spec.family != MethodFamily::PyramidKv) return t;
  return pyramid_budgets_for(n_layers, T, t, spec.pyramid_beta)[static_cast<std::size_t>(layer)];
}

CompactedHead compact_head(const MethodSpec& spec, const HeadCompactionInput& in, int t, int layer,
                           int n_layers, std::uint64_t seed) {
  const int b = method_budget(spec, t, std::max(in.T, 0), layer, n_layers);
  switch (spec.family) {
    case MethodFamily::Am: return compact_attention_matching(in, b, spec.am);
    case MethodFamily::AttnNoFit: {
      AttentionMatchingOptions o = spec.am;
      o.beta = BetaFit::Zero;
      o.c2.kind = ValueFit::Direct;
      return compact_attention_matching(in, b, o);
    }
    case MethodFamily::Random: return compact_random(in, b, seed);
    case MethodFamily::Recent: return compact_recent(in, b);
    case MethodFamily::SnapKv:
    case MethodFamily::PyramidKv: return compact_snapkv(in, b, spec.snapkv);
    case MethodFamily::Streaming: return compact_streaming(in, b, spec.sink);
    case MethodFamily::H2o: return compact_h2o(in, b, spec.h2o_recent);
    case MethodFamily::Knorm: return compact_knorm(in, b);
    case MethodFamily::Observed: return compact_observed_attention(in, b);
    case MethodFamily::Expected: return compact_expected_attention(in, b, spec.expected);
    case MethodFamily::Tova:
    case MethodFamily::AdaKv:
      throw Error(fmt::format("{} ranks entries across a layer's KV heads; compact the whole cache",
                              method_family_name(spec.family)));
  }
  throw Error("compact_head: unknown method family");
}

}  // namespace kvcompact
