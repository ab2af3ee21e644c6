// Values of the Jinja interpreter (io/jinja.h) with the semantics of Python's objects as Python
// Jinja2 sees them: str()/repr() text, json.dumps, ==, <, truthiness, str methods' white space.
// Internal to src/io/jinja*.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvcompact::jinja {

/// A runtime failure inside the interpreter; the renderer adds "<name>: line N: ". `line` 0 means
/// "not yet known" (the innermost expression that knows its line fills it in).
struct Failure : std::runtime_error {
  explicit Failure(const std::string& what, int line_no = 0) : std::runtime_error(what), line(line_no) {}
  int line = 0;
};

/// Decimal digits as an integer; a value above `limit` (or beyond 64 bits) is a Failure naming
/// `what`, never std::out_of_range or a wrapped number.
inline long long parse_digits(const std::string& digits, const char* what, long long limit = LLONG_MAX) {
  long long v = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') throw Failure(std::string(what) + ": not a number");
    if (v > (limit - (c - '0')) / 10) throw Failure(std::string(what) + " too large");
    v = v * 10 + (c - '0');
  }
  return v;
}

struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;  ///< insertion order, as Python dicts

/// Positional and keyword arguments of a call.
struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  /// The keyword `name`, else positional `index`, else nullptr.
  const Value* get(const std::string& name, std::size_t index) const;
};

/// A callable value (macro, bound method, global function): Python's callables.
struct Callable {
  std::string name;
  std::function<Value(const CallArgs&)> fn;
};

/// One value: Python's None, bool, int, float, str, list/tuple, dict, jinja2's Undefined and
/// Namespace, and callables. Lists and dicts are shared (reference semantics, as in Python).
struct Value {
  enum Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable } kind = kUndefined;
  bool b = false;
  long long i = 0;
  double f = 0;
  std::string s;  ///< kString: UTF-8 text; kUndefined: the message accessing it raises
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;
  std::shared_ptr<const Callable> fn;
  bool is_tuple = false;      ///< kArray printed as (a, b)
  bool is_namespace = false;  ///< kObject made by namespace(): assignable with {% set ns.x %}

  static Value undefined(std::string message) { Value v; v.s = std::move(message); return v; }
  static Value none() { Value v; v.kind = kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = kBool; v.b = x; return v; }
  static Value integer(long long x) { Value v; v.kind = kInt; v.i = x; return v; }
  static Value real(double x) { Value v; v.kind = kFloat; v.f = x; return v; }
  static Value str(std::string x) { Value v; v.kind = kString; v.s = std::move(x); return v; }
  static Value array(Array a = {}) { Value v; v.kind = kArray; v.arr = std::make_shared<Array>(std::move(a)); return v; }
  static Value tuple(Array a) { Value v = array(std::move(a)); v.is_tuple = true; return v; }
  static Value object(Object o = {}) { Value v; v.kind = kObject; v.obj = std::make_shared<Object>(std::move(o)); return v; }
  static Value callable(std::string name, std::function<Value(const CallArgs&)> fn) {
    Value v; v.kind = kCallable; v.fn = std::make_shared<const Callable>(Callable{std::move(name), std::move(fn)}); return v;
  }

  bool defined() const { return kind != kUndefined; }
  /// int, float or bool (Python's numbers.Number).
  bool is_number() const { return kind == kInt || kind == kFloat || kind == kBool; }
  double num() const { return kind == kInt ? static_cast<double>(i) : kind == kBool ? (b ? 1.0 : 0.0) : f; }
  /// Dict entry, or nullptr (also for non-dicts).
  Value* find(const std::string& key) const;
  /// Python's bool().
  bool truthy() const;
};

/// Raises the UndefinedError of an undefined value (its message).
[[noreturn]] void fail_undefined(const Value& v);

/// Converts parsed JSON (null -> None, objects keep their key order, integers -> int).
Value from_json(const nlohmann::ordered_json& j);

/// Python's type description used in jinja2 messages: "dict object", "None", "str object", ...
std::string type_repr(const Value& v);
/// Python's type name: "dict", "NoneType", "str", "int", "Undefined", ...
std::string type_name(const Value& v);

/// Python float.__repr__ (shortest round-trip: 0.1, 1.0, 1e-05, 1e+16, inf, nan).
std::string float_repr(double x);
/// Python str(): what {{ v }} prints ("" for undefined, None, True, [1, 'a'], {'k': 'v'}).
std::string to_str(const Value& v);
/// Python repr() ('a' quoted and escaped the way Python does).
std::string to_repr(const Value& v);

/// json.dumps(v, ensure_ascii=False, indent, separators, sort_keys) as transformers' tojson
/// filter calls it. `indent`: none/undefined = one line, int = that many spaces, str = itself.
/// item_sep/key_sep default to ", "/": " without indent and ","/": " with it. Fails (TypeError)
/// for values JSON cannot hold (undefined, namespace, callables).
std::string dumps(const Value& v, const Value& indent, const std::string* item_sep, const std::string* key_sep,
                  bool sort_keys);

/// Python ==.
bool equal(const Value& a, const Value& b);
/// Python a < b (-1, 0, 1 as a three-way compare); fails with Python's TypeError message for
/// values Python cannot order.
int compare(const Value& a, const Value& b, const char* op);

/// Python str.isspace() for one code point.
bool is_py_space(std::uint32_t c);
/// Code points of a UTF-8 string, each as its UTF-8 bytes.
std::vector<std::string> chars_of(const std::string& s);
/// Python str.strip/lstrip/rstrip: `chars` nullptr = white space, else the code points in it.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);

}  // namespace kvcompact::jinja
