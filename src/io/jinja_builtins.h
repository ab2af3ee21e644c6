// Python Jinja2's built-in filters, tests, attribute/item lookup and the str/dict/list methods
// that the ImmutableSandboxedEnvironment of transformers allows. Internal to src/io/jinja*.cpp.
#pragma once

#include <string>

#include "io/jinja_value.h"

namespace kvcompact::jinja {

/// `{{ v | name(args) }}`. Throws Failure (Python's exception message) for bad arguments or
/// types, and "No filter named 'x'." for an unknown one.
Value apply_filter(const std::string& name, const Value& v, const CallArgs& args);

/// Whether a filter / test of that name exists (jinja2 refuses unknown ones when compiling).
bool known_filter(const std::string& name);
bool known_test(const std::string& name);

/// `v is name(args)`. Throws Failure "No test named 'x'." for an unknown one.
bool apply_test(const std::string& name, const Value& v, const CallArgs& args);

/// `base.name` (jinja2 Environment.getattr: Python attribute first - bound methods of str,
/// dict, list - then the item). An absent one gives an undefined value with jinja2's message;
/// an undefined base throws its UndefinedError.
Value get_attr(const Value& base, const std::string& name);

/// `base[key]` (jinja2 Environment.getitem: the item first, then the attribute; negative list
/// indices count from the end). Absent -> undefined with jinja2's message.
Value get_item(const Value& base, const Value& key);

/// Python's `fmt % args` (printf-style: %s %r %d %i %f %e %g %x %o %c %%, flags, width,
/// precision, %(name)s with a dict).
std::string percent_format(const std::string& fmt, const Value& args);

/// Items of an iterable as Python's iter() gives them: list/tuple items, str code points, dict
/// keys, nothing for undefined. Throws Failure "'int' object is not iterable" otherwise.
Array iterate(const Value& v);

}  // namespace kvcompact::jinja
