// The method plug-in interface's shared parts (see method.h): default per-head preparation,
// layer-scoped refusals, and the typed readers of a spec's settings.
#include "compaction/method.h"

#include <charconv>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kvcompact {
namespace {

/// The default preparation: nothing shared between budgets.
class RecompactEachBudget final : public PreparedHead {
 public:
  RecompactEachBudget(const Method& m, const HeadCompactionInput& in, std::uint64_t seed)
      : method_(m), in_(in), seed_(seed) {}
  CompactedHead compact(int budget) const override { return method_.compact(in_, budget, seed_); }

 private:
  const Method& method_;
  HeadCompactionInput in_;
  std::uint64_t seed_;
};

/// A family without options (simple_method).
class SimpleMethod final : public Method {
 public:
  SimpleMethod(const MethodInfo& info, SimpleCompaction compact, bool context)
      : Method(info), compact_(compact), context_(context) {}
  std::vector<std::string> settings() const override { return {}; }
  bool needs_context_queries() const override { return context_; }
  CompactedHead compact(const HeadCompactionInput& in, int budget, std::uint64_t seed) const override {
    return compact_(in, budget, seed);
  }

 private:
  SimpleCompaction compact_;
  bool context_;
};

std::string key_list(const MethodInfo& info) {
  std::vector<std::string> keys;
  for (const MethodOption& o : info.options) keys.push_back(o.key);
  return keys.empty() ? "none" : fmt::format("{}", fmt::join(keys, ", "));
}

}  // namespace

std::unique_ptr<PreparedHead> Method::prepare(const HeadCompactionInput& in, int max_budget,
                                              std::uint64_t seed) const {
  (void)max_budget;
  return std::make_unique<RecompactEachBudget>(*this, in, seed);
}

std::vector<double> Method::layer_head_scores(const HeadCompactionInput&) const {
  throw Error(fmt::format("{} is not a layer-scoped method", name()));
}

std::vector<std::vector<int>> Method::layer_select(const std::vector<std::vector<double>>&,
                                                   const std::vector<int>&) const {
  throw Error(fmt::format("{} is not a layer-scoped method", name()));
}

void MethodSettings::fail(const std::string& what) const {
  throw Error(fmt::format("method spec '{}': {}", spec_, what));
}

void MethodSettings::add(const std::string& key, std::vector<std::string> args) {
  bool known = false;
  for (const MethodOption& o : info_->options) known = known || o.key == key;
  if (!known) fail(fmt::format("unknown key '{}' for method {} (valid: {})", key, info_->name, key_list(*info_)));
  if (has(key)) fail(fmt::format("key '{}' is given twice", key));
  items_.emplace_back(key, std::move(args));
}

void MethodSettings::append(const std::string& key, std::string arg) {
  for (auto& [k, a] : items_)
    if (k == key) return a.push_back(std::move(arg));
  fail(fmt::format("'{}' is not a key=value setting (valid keys for {}: {})", arg, info_->name, key_list(*info_)));
}

bool MethodSettings::has(std::string_view key) const {
  for (const auto& [k, a] : items_)
    if (k == key) return true;
  return false;
}

const std::vector<std::string>& MethodSettings::args(std::string_view key) const {
  for (const auto& [k, a] : items_)
    if (k == key) return a;
  fail(fmt::format("key '{}' is missing", key));
}

void MethodSettings::arity(std::string_view key, std::size_t lo, std::size_t hi, std::string_view form) const {
  const std::vector<std::string>& a = args(key);
  if (a.size() < lo || a.size() > hi)
    fail(fmt::format("{}={} has the wrong number of ':' arguments (expected {}={})", key, fmt::join(a, ":"), key,
                     form));
}

const std::string& MethodSettings::one(std::string_view key, std::string_view form) const {
  arity(key, 1, 1, form);
  return args(key)[0];
}

int MethodSettings::parse_int(std::string_view what, const std::string& v, int min, int max) const {
  int x = 0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty())
    fail(fmt::format("{}: '{}' is not an integer", what, v));
  if (x < min || x > max) fail(fmt::format("{}: {} is outside [{}, {}]", what, x, min, max));
  return x;
}

double MethodSettings::parse_double(std::string_view what, const std::string& v) const {
  double x = 0.0;
  const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || v.empty() || !std::isfinite(x))
    fail(fmt::format("{}: '{}' is not a finite number", what, v));
  return x;
}

int MethodSettings::integer(std::string_view key, std::string_view form, int min, int max) const {
  return parse_int(key, one(key, form), min, max);
}

double MethodSettings::number(std::string_view key, std::string_view form) const {
  return parse_double(key, one(key, form));
}

double MethodSettings::number_in(std::string_view key, std::string_view form, double min, double max) const {
  const double x = number(key, form);
  if (x < min || x > max) fail(fmt::format("{}: {} is outside [{}, {}]", key, x, min, max));
  return x;
}

ScorePooling MethodSettings::pool(std::string_view key) const {
  arity(key, 1, 2, "none|avg:K|max:K");
  const std::vector<std::string>& a = args(key);
  const PoolKind kind =
      pick<PoolKind>(key, a[0], {{"none", PoolKind::None}, {"avg", PoolKind::Avg}, {"max", PoolKind::Max}});
  if (kind == PoolKind::None) {
    if (a.size() != 1) fail(fmt::format("{}=none takes no kernel size", key));
    return {};
  }
  if (a.size() != 2) fail(fmt::format("{}={} needs a kernel size (e.g. {}={}:5)", key, a[0], key, a[0]));
  const int k = parse_int(fmt::format("{} kernel", key), a[1], 1, 1000001);
  if (k % 2 == 0) fail(fmt::format("{} kernel {} must be odd", key, k));
  return {kind, k};
}

MethodEntry simple_method(const MethodInfo& info, SimpleCompaction compact, bool needs_context_queries) {
  return {&info, [&info, compact, needs_context_queries](const MethodSettings&) -> std::shared_ptr<const Method> {
            return std::make_shared<SimpleMethod>(info, compact, needs_context_queries);
          }};
}

const MethodEntry* find_method(std::string_view name) {
  for (const MethodEntry& e : method_registry())
    if (e.info->name == name) return &e;
  return nullptr;
}

std::string format_setting(std::string_view key, double value) { return fmt::format("{}={}", key, value); }

}  // namespace kvcompact
