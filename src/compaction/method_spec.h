// Compaction method specs: one string names a method family and its options (Attention Matching,
// arXiv 2602.16284, and the baselines it is compared with), parsed and validated into MethodSpec;
// compact_head applies a spec to one KV head.
//
// Grammar (no spaces):
//   spec    := family [ (':' | ',') setting { (':' | ',') setting } ]
//   setting := key '=' value { ':' arg }        -- a bare token (no '=') is one more argument of
//                                                  the key before it, e.g. pool=max:5, c2=ridge:1e-4
//   queries := 'queries=' term { '+' term }     -- runs to the next ',' or the end
//   term    := source [ ':' cap ] | 'total:' N  -- source in repeat, context, self-study, random
// Keys may come in any order, each at most once; keys that do not apply to the chosen variant
// (e.g. score with select=omp, iters with beta=nnls-exact) are errors. Examples:
//   am                                             (defaults: attn/rms keys, nnls-pg beta, lsq C2)
//   am:select=omp,beta=nnls-pg:iters=2:lo=-3:hi=3,c2=ridge:1e-4,recent=8
//   am:select=attn:score=rms:pool=max:5            random   recent   attn-nofit:score=max
//   snapkv:window=8:pool=max:5   streaming:sink=4   h2o:recent=0.5   pyramidkv:beta=20
//   am,queries=repeat+context:4096+self-study+random+total:20000
// to_string gives the canonical form: the family, then only the settings that differ from the
// defaults, each as its own ','-separated item in the fixed key order of method_help(); it parses
// back to an equal spec, and equal specs print identically.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/method.h"

namespace kvcompact {

/// Sources of reference queries (implemented by the whole-cache compaction, not here).
enum class QuerySourceKind { Repeat, Context, SelfStudy, Random };

/// One reference-query source with an optional cap on its number of queries (0 = no cap).
struct QuerySource {
  QuerySourceKind kind = QuerySourceKind::Repeat;
  int cap = 0;
  bool operator==(const QuerySource&) const = default;
};

/// The `queries=` field: sources in the order given, and a cap on their total per KV head; the
/// term `onpolicy` (e.g. queries=repeat+onpolicy) asks for on-policy queries
/// (compaction/on_policy.h: layer l's queries recomputed with layers < l already compacted;
/// repeat and self-study sources only).
struct QuerySpec {
  std::vector<QuerySource> sources{QuerySource{}};  ///< default: repeat, uncapped
  int total_cap = 50000;                            ///< >= 1
  bool on_policy = false;
  bool operator==(const QuerySpec&) const = default;
};

/// A parsed method: the configured plug-in (method.h; one per family under compaction/methods/)
/// and, for the families with a `queries` key (am, attn-nofit), where the reference queries come
/// from. Default: am with its defaults. Copies share the immutable method.
struct MethodSpec {
  MethodSpec();
  std::shared_ptr<const Method> method;  ///< never null
  QuerySpec queries;                     ///< am and attn-nofit: where the reference queries come from

  /// The family name, e.g. "am".
  const std::string& name() const { return method->name(); }
  /// The method as its plug-in class (e.g. as<AmMethod>() for its options). Throws Error when the
  /// spec is another family.
  template <typename T>
  const T& as() const {
    const T* p = dynamic_cast<const T*>(method.get());
    if (p == nullptr) throw_not_a(name());
    return *p;
  }
  /// Equal when the canonical strings (to_string) are equal.
  bool operator==(const MethodSpec& other) const;

 private:
  [[noreturn]] static void throw_not_a(const std::string& name);
};

/// Parses and validates a spec (grammar above). Throws Error naming the bad token and listing the
/// valid families / keys / values.
MethodSpec parse_method_spec(std::string_view text);

/// Canonical string of a spec (see above).
std::string to_string(const MethodSpec& spec);

/// The registered family names in `kvcompact methods` order ("am", "random", "recent",
/// "attn-nofit", "snapkv", ...; methods/registry.cpp).
std::vector<std::string> method_family_names();

/// Multi-line help: every family with its keys, defaults and valid values (`kvcompact methods`),
/// generated from the registered schemas.
std::string method_help();

/// Whether the method needs reference queries (HeadCompactionInput::queries): am, attn-nofit.
bool uses_reference_queries(const MethodSpec& spec);
/// Whether the method needs the context queries (HeadCompactionInput::context_queries): snapkv,
/// h2o, pyramidkv, tova, observed, expected, adakv (streaming, random, recent, knorm need neither).
bool uses_context_queries(const MethodSpec& spec);

/// Entries the method keeps for a head of layer `layer` (0-based, of n_layers) when the uniform
/// budget is t of T: t, except pyramidkv, which keeps pyramid_budgets_for(n_layers, T, t, beta)[layer]
/// (the same total over the layers). Throws Error unless 0 <= t <= T and 0 <= layer < n_layers.
int method_budget(const MethodSpec& spec, int t, int T, int layer, int n_layers);

/// Whether the method ranks entries across the KV heads of a layer (tova: one layer ranking;
/// adakv: one layer budget), so compact_cache runs it layer by layer (layer_scoped_head_scores,
/// layer_scoped_select) and compact_head refuses it.
bool is_layer_scoped(const MethodSpec& spec);

/// One head's scores [T] for a layer-scoped method (Method::layer_head_scores). Throws Error for
/// other methods or on bad input.
std::vector<double> layer_scoped_head_scores(const MethodSpec& spec, const HeadCompactionInput& in);

/// The selected indices of each KV head of one layer (sorted) from every head's scores [H][T_h]
/// and budgets [H] (Method::layer_select). Throws Error for other methods or bad budgets.
std::vector<std::vector<int>> layer_scoped_select(const MethodSpec& spec,
                                                  const std::vector<std::vector<double>>& head_scores,
                                                  const std::vector<int>& budgets);

/// The one per-head dispatch: compacts a head with the spec's method to method_budget(spec, t, T,
/// layer, n_layers) entries. t is the uniform budget (kept_entries(ratio, T)); `seed` is used as
/// given by `random` (mix layer and head into it). Throws Error on bad input (see each method),
/// e.g. missing reference / context queries, and for layer-scoped methods (is_layer_scoped).
CompactedHead compact_head(const MethodSpec& spec, const HeadCompactionInput& in, int t, int layer,
                           int n_layers, std::uint64_t seed);

}  // namespace kvcompact
