// A compaction method as a plug-in: one interface that every method family implements in its own
// file under compaction/methods/, and the option schema that drives spec parsing, printing and
// `kvcompact methods` (method_spec.h). Adding a method = one new file plus one line in
// methods/registry.cpp; nothing else switches on the method.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "compaction/head_compaction.h"
#include "compaction/key_selection.h"

namespace kvcompact {

/// One key of a method's spec: `key=form`, and a help text that states the default.
struct MethodOption {
  std::string key;   ///< e.g. "window"
  std::string form;  ///< e.g. "W" or "attn|omp" (shown as key=form)
  std::string help;  ///< one or more lines, e.g. "observation window, W >= 1 (default 32)"
};

/// What the registry and the help know of a method family.
struct MethodInfo {
  std::string name;                  ///< spec family name, e.g. "snapkv"
  std::string summary;               ///< one or more lines: what it keeps, the paper / peer followed
  std::vector<MethodOption> options; ///< keys in canonical order (to_string prints them in this order)
};

/// A method's per-head work done once, then cut to any budget (Attention Matching's attention
/// pass and key ranking serve every budget of an influence sweep).
class PreparedHead {
 public:
  virtual ~PreparedHead() = default;
  /// The head compacted to `budget` entries (0 <= budget <= T). Throws as Method::compact.
  virtual CompactedHead compact(int budget) const = 0;
  /// A hint that compact() will next be called for several budgets <= max_budget (an influence
  /// sweep over one head's ratios): a method may keep work shared between them (AM: the beta fit's
  /// Gram matrix, AttentionMatcher::share_gram) until end_budget_sweep. Results are unchanged up
  /// to rounding. Default: nothing.
  virtual void begin_budget_sweep(int max_budget) { (void)max_budget; }
  /// Frees what begin_budget_sweep kept.
  virtual void end_budget_sweep() {}
};

/// A configured compaction method: a family with its parsed options. Immutable, shared by
/// MethodSpec copies.
class Method {
 public:
  explicit Method(const MethodInfo& info) : info_(&info) {}
  virtual ~Method() = default;
  Method(const Method&) = delete;
  Method& operator=(const Method&) = delete;

  const MethodInfo& info() const { return *info_; }
  const std::string& name() const { return info_->name; }

  /// The settings that differ from the defaults, as "key=value" items in the schema's order
  /// (method_spec.h's canonical form; parsing them back gives an equal method).
  virtual std::vector<std::string> settings() const = 0;

  /// Whether compact needs HeadCompactionInput::queries (reference queries: am, attn-nofit).
  virtual bool needs_reference_queries() const { return false; }
  /// Whether compact needs HeadCompactionInput::context_queries (the context prefill's queries).
  virtual bool needs_context_queries() const { return false; }

  /// Entries kept by a head of `layer` (of n_layers) when the uniform budget is t of T; t unless
  /// the method has its own per-layer policy (pyramidkv). Arguments are checked by the caller.
  virtual int budget(int t, int T, int layer, int n_layers) const {
    (void)T, (void)layer, (void)n_layers;
    return t;
  }

  /// Compacts one head to `budget` entries; `seed` is for randomised methods. Throws Error on bad
  /// input (missing queries, non-finite values, budget outside [0, T]).
  virtual CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const = 0;

  /// Per-head work for many budgets up to max_budget. The default re-runs compact each time; the
  /// input's pointers must outlive the result.
  virtual std::unique_ptr<PreparedHead> prepare(const HeadCompactionInput& in, int max_budget,
                                                std::uint64_t seed) const;

  /// Layer-scoped methods rank entries across the KV heads of a layer (tova, adakv): compact_cache
  /// scores every head with layer_head_scores, then selects per layer with layer_select, and
  /// compact() refuses them.
  virtual bool layer_scoped() const { return false; }
  /// One head's scores [T]. Throws Error for methods that are not layer-scoped.
  virtual std::vector<double> layer_head_scores(const HeadCompactionInput& in) const;
  /// Sorted selected indices per head of one layer from every head's scores [H][T_h] and budgets
  /// [H]. Throws Error for methods that are not layer-scoped, or on bad budgets.
  virtual std::vector<std::vector<int>> layer_select(const std::vector<std::vector<double>>& head_scores,
                                                     const std::vector<int>& budgets) const;

 private:
  const MethodInfo* info_;
};

/// The key=value settings of one spec, checked against the family's schema, with typed readers
/// that throw Error("method spec '<spec>': <key>: ...") on a bad value.
class MethodSettings {
 public:
  MethodSettings(std::string spec, const MethodInfo& info) : spec_(std::move(spec)), info_(&info) {}

  /// Adds `key` with its ':'-separated arguments; throws on unknown or repeated keys.
  void add(const std::string& key, std::vector<std::string> args);
  /// Appends one more ':' argument to `key` (added before).
  void append(const std::string& key, std::string arg);

  bool has(std::string_view key) const;
  /// All arguments of `key` (which must be present).
  const std::vector<std::string>& args(std::string_view key) const;
  /// The single argument of `key`; `form` is shown in the arity error.
  const std::string& one(std::string_view key, std::string_view form) const;
  /// An integer in [min, max].
  int integer(std::string_view key, std::string_view form, int min, int max) const;
  /// A finite number.
  double number(std::string_view key, std::string_view form) const;
  /// A finite number in [min, max].
  double number_in(std::string_view key, std::string_view form, double min, double max) const;
  /// One of `choices` by name.
  template <typename T>
  T choice(std::string_view key, std::string_view form, const std::vector<std::pair<const char*, T>>& choices) const {
    return pick(key, one(key, form), choices);
  }
  /// A name among `choices` (`what` names it in errors).
  template <typename T>
  T pick(std::string_view what, const std::string& v, const std::vector<std::pair<const char*, T>>& choices) const {
    std::string names;
    for (const auto& [name, val] : choices) {
      if (v == name) return val;
      names += names.empty() ? name : std::string(", ") + name;
    }
    fail(std::string(what) + ": unknown value '" + v + "' (valid: " + names + ")");
  }
  /// `pool=none|avg:K|max:K` (K odd >= 1).
  ScorePooling pool(std::string_view key) const;
  /// Checks that `key` has between lo and hi arguments.
  void arity(std::string_view key, std::size_t lo, std::size_t hi, std::string_view form) const;
  /// Parses an integer argument `v` of `what` in [min, max].
  int parse_int(std::string_view what, const std::string& v, int min, int max) const;
  /// Parses a finite number argument `v` of `what`.
  double parse_double(std::string_view what, const std::string& v) const;

  [[noreturn]] void fail(const std::string& what) const;
  const std::string& spec() const { return spec_; }
  const MethodInfo& info() const { return *info_; }

 private:
  std::string spec_;
  const MethodInfo* info_;
  std::vector<std::pair<std::string, std::vector<std::string>>> items_;
};

/// A registered family: its schema and the factory that builds a configured method from settings
/// (throwing Error via MethodSettings::fail on bad or conflicting values).
struct MethodEntry {
  const MethodInfo* info = nullptr;
  std::function<std::shared_ptr<const Method>(const MethodSettings& settings)> make;
};

/// Per-head compaction of a family without options: (input, budget, seed) -> compacted head.
using SimpleCompaction = CompactedHead (*)(const HeadCompactionInput& in, int budget, std::uint64_t seed);

/// The registry entry of a family without options (random, recent, knorm, observed, keydiff):
/// its method's settings() are empty and compact() calls `compact`. `info` must outlive the
/// registry (a function-local static).
MethodEntry simple_method(const MethodInfo& info, SimpleCompaction compact, bool needs_context_queries = false);

/// Every registered family in `kvcompact methods` order (methods/registry.cpp).
const std::vector<MethodEntry>& method_registry();

/// The registered family called `name`, or nullptr.
const MethodEntry* find_method(std::string_view name);

/// Canonical printing helper for settings(): formats a number as the parser reads it back.
std::string format_setting(std::string_view key, double value);

}  // namespace kvcompact
