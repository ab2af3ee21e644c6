// Method spec parsing, printing and the per-head dispatch (see method_spec.h): the grammar is
// here, every family's keys and values are its plug-in's (compaction/methods/).
#include "compaction/method_spec.h"

#include <algorithm>
#include <cstddef>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace kvcompact {
namespace {

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

const char* source_name(QuerySourceKind k) {
  switch (k) {
    case QuerySourceKind::Repeat: return "repeat";
    case QuerySourceKind::Context: return "context";
    case QuerySourceKind::SelfStudy: return "self-study";
    case QuerySourceKind::Random: return "random";
  }
  return "repeat";
}

QuerySpec parse_queries(const MethodSettings& c, const std::string& v) {
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
    if (parts[0] == "onpolicy") {
      if (parts.size() != 1 || q.on_policy) c.fail(fmt::format("queries: bad or repeated term '{}'", term));
      q.on_policy = true;
      continue;
    }
    if (parts[0] == "total") {
      if (parts.size() != 2 || total_seen) c.fail(fmt::format("queries: bad or repeated term '{}'", term));
      q.total_cap = c.parse_int("queries total", parts[1], 1, 1 << 30);
      total_seen = true;
      continue;
    }
    QuerySource s;
    s.kind = c.pick<QuerySourceKind>("queries source", parts[0], kinds);
    if (parts.size() == 2) s.cap = c.parse_int(fmt::format("queries {} cap", parts[0]), parts[1], 1, 1 << 30);
    for (const QuerySource& o : q.sources)
      if (o.kind == s.kind) c.fail(fmt::format("queries: source '{}' is given twice", parts[0]));
    q.sources.push_back(s);
  }
  if (q.sources.empty()) c.fail("queries: no source given (valid: repeat, context, self-study, random)");
  if (q.on_policy)
    for (const QuerySource& s : q.sources)
      if (s.kind != QuerySourceKind::Repeat && s.kind != QuerySourceKind::SelfStudy)
        c.fail(fmt::format("queries: onpolicy reruns token sequences, which the source '{}' has none of (use repeat "
                           "or self-study)", source_name(s.kind)));
  return q;
}

std::string queries_string(const QuerySpec& q) {
  std::vector<std::string> terms;
  for (const QuerySource& s : q.sources)
    terms.push_back(s.cap > 0 ? fmt::format("{}:{}", source_name(s.kind), s.cap) : source_name(s.kind));
  if (q.total_cap != QuerySpec{}.total_cap) terms.push_back(fmt::format("total:{}", q.total_cap));
  if (q.on_policy) terms.push_back("onpolicy");
  return fmt::format("{}", fmt::join(terms, "+"));
}


std::string family_list() { return join(method_family_names()); }

std::string option_key_list(const MethodInfo& info) {
  std::vector<std::string> keys;
  for (const MethodOption& o : info.options) keys.push_back(o.key);
  return keys.empty() ? "none" : join(keys);
}

bool has_queries_key(const MethodInfo& info) {
  for (const MethodOption& o : info.options)
    if (o.key == "queries") return true;
  return false;
}

}  // namespace

MethodSpec::MethodSpec() {
  // Built straight from the registry (parse_method_spec default-constructs a MethodSpec itself).
  static const std::shared_ptr<const Method> am = [] {
    const MethodEntry* e = find_method("am");
    return e->make(MethodSettings("am", *e->info));
  }();
  method = am;
}

bool MethodSpec::operator==(const MethodSpec& other) const { return to_string(*this) == to_string(other); }

void MethodSpec::throw_not_a(const std::string& name) {
  throw Error(fmt::format("method spec: {} is not the method family asked for", name));
}

std::vector<std::string> method_family_names() {
  std::vector<std::string> names;
  for (const MethodEntry& e : method_registry()) names.push_back(e.info->name);
  return names;
}

MethodSpec parse_method_spec(std::string_view text) {
  const std::string whole(text);
  if (text.empty()) throw Error(fmt::format("method spec '{}': empty method spec", whole));
  const std::size_t cut = text.find_first_of(":,");
  const std::string family(text.substr(0, cut));
  const MethodEntry* entry = find_method(family);
  if (entry == nullptr)
    throw Error(fmt::format("method spec '{}': unknown method family '{}' (valid: {})", whole, family, family_list()));
  MethodSettings settings(whole, *entry->info);

  // Collect key -> args (the schema check is MethodSettings::add's).
  if (cut != std::string_view::npos) {
    for (const std::string& item : split(text.substr(cut + 1), ',')) {
      if (item.empty()) settings.fail("empty setting (stray ',' or ':')");
      std::string current;
      const std::vector<std::string> tokens = split(item, ':');
      for (std::size_t ti = 0; ti < tokens.size(); ++ti) {
        const std::string& tok = tokens[ti];
        if (tok.empty()) settings.fail(fmt::format("empty token in '{}'", item));
        const std::size_t eq = tok.find('=');
        if (eq == std::string::npos) {
          if (current.empty())
            settings.fail(fmt::format("'{}' is not a key=value setting (valid keys for {}: {})", tok, family,
                                      option_key_list(*entry->info)));
          settings.append(current, tok);
          continue;
        }
        current = tok.substr(0, eq);
        std::string value = tok.substr(eq + 1);
        if (current == "queries") {  // the rest of the item is the queries value
          for (std::size_t r = ti + 1; r < tokens.size(); ++r) value += ":" + tokens[r];
          settings.add(current, {value});
          break;
        }
        if (value.empty()) {
          settings.add(current, {});  // unknown keys are reported before empty values
          settings.fail(fmt::format("key '{}' has an empty value", current));
        }
        settings.add(current, {value});
      }
    }
  }
  MethodSpec spec;
  spec.method = entry->make(settings);
  if (settings.has("queries")) spec.queries = parse_queries(settings, settings.args("queries")[0]);
  return spec;
}

std::string to_string(const MethodSpec& spec) {
  std::vector<std::string> items = spec.method->settings();
  if (has_queries_key(spec.method->info()) && !(spec.queries == QuerySpec{}))
    items.push_back("queries=" + queries_string(spec.queries));
  if (items.empty()) return spec.name();
  return fmt::format("{}:{}", spec.name(), fmt::join(items, ","));
}

std::string method_help() {
  std::string out =
      "Compaction methods: FAMILY[:KEY=VALUE[:ARG]...][,KEY=VALUE...]  (keys in any order, each once)\n\n";
  auto indent = [](const std::string& text, std::size_t col) {
    std::string r;
    for (const std::string& line : split(text, '\n')) {
      if (!r.empty()) {  // two appends: GCC 12's -Wrestrict misfires on "\n" + std::string&&
        r += '\n';
        r.append(col, ' ');
      }
      r += line;
    }
    return r;
  };
  for (const MethodEntry& e : method_registry()) {
    const MethodInfo& m = *e.info;
    out += fmt::format("{:<14}{}\n", m.name, indent(m.summary, 14));
    for (const MethodOption& o : m.options) {
      const std::string key = fmt::format("  {}={}", o.key, o.form);
      if (key.size() < 32) out += fmt::format("{:<32}{}\n", key, indent(o.help, 32));
      else out += fmt::format("{}\n{:<32}{}\n", key, "", indent(o.help, 32));
    }
  }
  return out;
}

bool uses_reference_queries(const MethodSpec& spec) { return spec.method->needs_reference_queries(); }

bool uses_context_queries(const MethodSpec& spec) { return spec.method->needs_context_queries(); }

bool is_layer_scoped(const MethodSpec& spec) { return spec.method->layer_scoped(); }

int method_budget(const MethodSpec& spec, int t, int T, int layer, int n_layers) {
  if (T < 0 || t < 0 || t > T) throw Error(fmt::format("{}: cannot keep {} of {} entries", spec.name(), t, T));
  if (n_layers < 1 || layer < 0 || layer >= n_layers)
    throw Error(fmt::format("{}: layer {} is outside [0, {})", spec.name(), layer, n_layers));
  return spec.method->budget(t, T, layer, n_layers);
}

CompactedHead compact_head(const MethodSpec& spec, const HeadCompactionInput& in, int t, int layer,
                           int n_layers, std::uint64_t seed) {
  const int b = method_budget(spec, t, std::max(in.T, 0), layer, n_layers);
  return spec.method->compact(in, b, seed);
}

std::vector<double> layer_scoped_head_scores(const MethodSpec& spec, const HeadCompactionInput& in) {
  return spec.method->layer_head_scores(in);
}

std::vector<std::vector<int>> layer_scoped_select(const MethodSpec& spec,
                                                  const std::vector<std::vector<double>>& head_scores,
                                                  const std::vector<int>& budgets) {
  return spec.method->layer_select(head_scores, budgets);
}

}  // namespace kvcompact
