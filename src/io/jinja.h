// A Jinja2 interpreter for Hugging Face chat templates, with the semantics of Python Jinja2 as
// transformers sets it up for apply_chat_template (chat_template_utils._compile_jinja_template):
// ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), the loopcontrols and
// AssistantTracker ({% generation %}) extensions, transformers' tojson filter and the
// raise_exception / strftime_now globals.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvcompact::jinja {

/// Options of one rendering.
struct RenderOptions {
  /// Clock of strftime_now(format) (local time, as Python's datetime.now()); the system clock
  /// when empty. Tests inject a fixed time.
  std::function<std::chrono::system_clock::time_point()> now;
};

/// A parsed template.
///
/// Statements: if/elif/else, for (tuple targets, `if` filter, else, loop.index/index0/revindex/
/// revindex0/first/last/length/depth/previtem/nextitem/cycle()/changed()), break/continue, set (names,
/// tuples, ns.attr, {% set x %}...{% endset %}), macro (defaults, varargs, kwargs, caller),
/// call blocks, filter blocks, with, generation, raw, comments, whitespace control (- and +).
/// Expressions: literals, lists, tuples, dicts, attribute/item/slice access, calls with keyword
/// arguments, filters, tests, + - * / // % ** ~, chained comparisons, in / not in, and/or/not,
/// `a if c else b`, Python's % formatting. Filters: abs attr batch capitalize center count d
/// default dictsort e escape first float format indent int items join last length list lower
/// map max min reject rejectattr replace reverse round safe select selectattr sort string sum
/// title tojson(ensure_ascii, indent, separators, sort_keys) trim unique upper wordcount. Tests:
/// jinja2's (defined, none, string, mapping, iterable, sequence, number, integer, ...). Python
/// methods of str (strip(chars), split, replace, startswith, format, ...), dict (get, items,
/// keys, values) and list (index, count). Globals: range, dict, namespace, cycler, joiner,
/// raise_exception, strftime_now. Values print as Python's str() (None, True, ['a', 1]).
/// Undefined names and attributes behave as jinja2's default Undefined: they print empty, are
/// false and iterate as empty, and any further access (attribute, item, call, arithmetic)
/// throws. Case mapping is Unicode's simple one-to-one mapping (Python's special cases such as
/// German sharp s -> "SS" are not applied). Printed range objects, dict views and macros show as
/// a list, a list and "<function name>" (Python: range(0, 3), dict_items([...]), <Macro 'f'>).
/// Not supported (a syntax error says so): recursive loops, include/import/extends/block.
class Template {
 public:
  /// Parses `source`; `name` prefixes error messages. Throws kvcompact::Error
  /// ("<name>: line N: <problem>") on a syntax error or an unsupported construct.
  Template(std::string_view source, std::string name);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  /// Renders with the variables of a JSON object (null -> None, objects keep their key order).
  /// Throws kvcompact::Error ("<name>: line N: <problem>", the problem worded as jinja2's
  /// exception, e.g. "'dict object' has no attribute 'x'" for an attribute of an undefined
  /// value) where jinja2 raises, and "<name>: raise_exception: msg" for raise_exception("msg").
  std::string render(const nlohmann::ordered_json& context, const RenderOptions& options = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvcompact::jinja
