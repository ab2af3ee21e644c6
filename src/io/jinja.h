// A small Jinja2 subset interpreter, enough for Hugging Face chat templates (Llama 3, Qwen3),
// with the semantics of the reference renderer @huggingface/jinja (lstrip_blocks, trim_blocks).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace kvcompact::jinja {

/// A parsed template. Supported: text, {{ expr }}, {% if/elif/else %}, {% for x[, y] in expr
/// [if cond] %}...{% else %}, {% set name = expr %}, {% set ns.attr = expr %}, {# comments #},
/// whitespace control ({%- -%} {{- -}}); expressions: literals (strings with escapes, integers,
/// floats, true/false/none), lists, dicts, attribute/index/slice access ([::-1]), calls, filters
/// (trim, length, count, tojson, default, first, last, join, upper, lower, string, int, list,
/// reverse, items, capitalize, title, replace, safe), tests (defined, undefined, none, string,
/// number, mapping, iterable, sequence, true, false, boolean, integer, float, odd, even, eq),
/// operators (+ - * / // % ~, comparisons, in, not in, and, or, not, a if c else b), string
/// methods (startswith, endswith, split, strip, lstrip, rstrip, upper, lower, replace, title),
/// dict methods (get, items, keys, values), namespace(), range(), raise_exception(), loop.index,
/// loop.index0, loop.first, loop.last, loop.length, loop.revindex, loop.revindex0.
/// As in the reference (and unlike Python Jinja), strip/lstrip/rstrip ignore a `chars` argument
/// and remove white space. Like the reference, the template's final newline is dropped, leading spaces/tabs before a
/// block tag on its line are removed (lstrip_blocks) and the newline after a block tag too
/// (trim_blocks).
class Template {
 public:
  /// Parses `source`; `name` prefixes error messages. Throws kvcompact::Error
  /// ("<name>: line N: <problem>") on a syntax error, an unsupported construct, a number literal
  /// beyond int64/double, or nesting deeper than 200 levels.
  Template(std::string_view source, std::string name);
  ~Template();
  Template(Template&&) noexcept;
  Template& operator=(Template&&) noexcept;

  /// Renders with the variables of a JSON object (null -> none; objects keep their key order).
  /// Throws kvcompact::Error ("<name>: line N: <problem>") on runtime errors (integer overflow
  /// included), unknown filters or functions, and raise_exception("msg") ("<name>: raise_exception:
  /// msg"); also when a render exceeds its limits: 2e6 evaluation steps (one per node, expression
  /// and loop iteration, plus one per 64 bytes of string / per item of list produced), 64 MiB of
  /// output or in one string, 10^6 items in one list or in range().
  std::string render(const nlohmann::ordered_json& context) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvcompact::jinja
