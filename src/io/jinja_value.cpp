// Python semantics of Jinja values; see jinja_value.h.
#include "io/jinja_value.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/utf8.h"

namespace kvcompact::jinja {

const Value* CallArgs::get(const std::string& name, std::size_t index) const {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return index < pos.size() ? &pos[index] : nullptr;
}

Value* Value::find(const std::string& key) const {
  if (kind != kObject) return nullptr;
  for (auto& [k, v] : *obj)
    if (k == key) return &v;
  return nullptr;
}

bool Value::truthy() const {
  switch (kind) {
    case kUndefined: case kNone: return false;
    case kBool: return b;
    case kInt: return i != 0;
    case kFloat: return f != 0;
    case kString: return !s.empty();
    case kArray: return !arr->empty();
    case kObject: return is_namespace || !obj->empty();
    case kCallable: return true;
  }
  return false;
}

void fail_undefined(const Value& v) { throw Failure(v.s.empty() ? "value is undefined" : v.s); }

Value from_json(const nlohmann::ordered_json& j) {
  using T = nlohmann::ordered_json::value_t;
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::boolean(j.get<bool>());
    case T::number_integer: return Value::integer(j.get<long long>());
    case T::number_unsigned: {
      const auto u = j.get<unsigned long long>();
      if (u > static_cast<unsigned long long>(std::numeric_limits<long long>::max()))
        throw Failure(fmt::format("integer {} does not fit in 64 bits", u));
      return Value::integer(static_cast<long long>(u));
    }
    case T::number_float: return Value::real(j.get<double>());
    case T::string: return Value::str(j.get<std::string>());
    case T::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case T::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace_back(it.key(), from_json(it.value()));
      return Value::object(std::move(o));
    }
    default: throw Failure("unsupported JSON value (binary)");
  }
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: return "Undefined";
    case Value::kNone: return "NoneType";
    case Value::kBool: return "bool";
    case Value::kInt: return "int";
    case Value::kFloat: return "float";
    case Value::kString: return "str";
    case Value::kArray: return v.is_tuple ? "tuple" : "list";
    case Value::kObject: return v.is_namespace ? "Namespace" : "dict";
    case Value::kCallable: return "function";
  }
  return "object";
}

std::string type_repr(const Value& v) {
  if (v.kind == Value::kNone) return "None";
  if (v.kind == Value::kObject && v.is_namespace) return "jinja2.utils.Namespace object";
  return type_name(v) + " object";
}

std::string float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  if (x == 0) return std::signbit(x) ? "-0.0" : "0.0";
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // [-]d[.ddd]e(+|-)XX, shortest round trip
  const bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const std::size_t epos = sci.find('e');
  const int exp = std::atoi(sci.c_str() + epos + 1);
  std::string digits;
  for (std::size_t k = 0; k < epos; ++k)
    if (sci[k] != '.') digits += sci[k];
  // Python repr: fixed notation for 1e-4 <= |x| < 1e16, else d[.ddd]e(+|-)XX.
  std::string out = neg ? "-" : "";
  if (exp >= -4 && exp < 16) {
    const std::size_t point = static_cast<std::size_t>(std::max(exp + 1, 0));
    if (exp < 0) {
      out.append("0.").append(static_cast<std::size_t>(-exp - 1), '0').append(digits);
    } else if (digits.size() <= point) {
      out.append(digits).append(point - digits.size(), '0').append(".0");
    } else {
      out.append(digits, 0, point).append(1, '.').append(digits, point, std::string::npos);
    }
  } else {
    out.append(digits, 0, 1);
    if (digits.size() > 1) out.append(1, '.').append(digits, 1, std::string::npos);
    out.append(fmt::format("e{}{:02d}", exp < 0 ? '-' : '+', std::abs(exp)));
  }
  return out;
}

namespace {

std::string str_repr(const std::string& s) {
  const bool has_single = s.find('\'') != std::string::npos, has_double = s.find('"') != std::string::npos;
  const char q = has_single && !has_double ? '"' : '\'';
  std::string out(1, q);
  for (unsigned char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == static_cast<unsigned char>(q)) { out += '\\'; out += q; }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + q;
}

void json_string(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
}

struct Dumper {
  std::string indent;  // per level
  bool use_indent = false;
  std::string item_sep, key_sep;
  bool sort_keys = false;

  void run(std::string& out, const Value& v, int level) const {
    switch (v.kind) {
      case Value::kNone: out += "null"; return;
      case Value::kBool: out += v.b ? "true" : "false"; return;
      case Value::kInt: out += std::to_string(v.i); return;
      case Value::kFloat:
        if (std::isnan(v.f)) out += "NaN";
        else if (std::isinf(v.f)) out += v.f < 0 ? "-Infinity" : "Infinity";
        else out += float_repr(v.f);
        return;
      case Value::kString: json_string(out, v.s); return;
      case Value::kArray: {
        if (v.arr->empty()) { out += "[]"; return; }
        out += '[';
        for (std::size_t k = 0; k < v.arr->size(); ++k) {
          out += k ? item_sep : "";
          newline(out, level + 1);
          run(out, (*v.arr)[k], level + 1);
        }
        newline(out, level);
        out += ']';
        return;
      }
      case Value::kObject: {
        if (v.is_namespace) break;
        if (v.obj->empty()) { out += "{}"; return; }
        std::vector<const std::pair<std::string, Value>*> items;
        for (const auto& kv : *v.obj) items.push_back(&kv);
        if (sort_keys) std::stable_sort(items.begin(), items.end(), [](auto* a, auto* b) { return a->first < b->first; });
        out += '{';
        for (std::size_t k = 0; k < items.size(); ++k) {
          out += k ? item_sep : "";
          newline(out, level + 1);
          json_string(out, items[k]->first);
          out += key_sep;
          run(out, items[k]->second, level + 1);
        }
        newline(out, level);
        out += '}';
        return;
      }
      default: break;
    }
    throw Failure(fmt::format("Object of type {} is not JSON serializable", type_name(v)));
  }
  void newline(std::string& out, int level) const {
    if (!use_indent) return;
    out += '\n';
    for (int k = 0; k < level; ++k) out += indent;
  }
};

}  // namespace

std::string to_repr(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: return "Undefined";
    case Value::kString: return str_repr(v.s);
    case Value::kArray: {
      std::string out = v.is_tuple ? "(" : "[";
      for (std::size_t k = 0; k < v.arr->size(); ++k) out += (k ? ", " : "") + to_repr((*v.arr)[k]);
      if (v.is_tuple && v.arr->size() == 1) out += ",";
      return out + (v.is_tuple ? ")" : "]");
    }
    case Value::kObject: {
      std::string out = v.is_namespace ? "<Namespace {" : "{";
      for (std::size_t k = 0; k < v.obj->size(); ++k)
        out += (k ? ", " : "") + str_repr((*v.obj)[k].first) + ": " + to_repr((*v.obj)[k].second);
      return out + (v.is_namespace ? "}>" : "}");
    }
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: return "";
    case Value::kNone: return "None";
    case Value::kBool: return v.b ? "True" : "False";
    case Value::kInt: return std::to_string(v.i);
    case Value::kFloat: return float_repr(v.f);
    case Value::kString: return v.s;
    case Value::kCallable: return "<function " + v.fn->name + ">";
    default: return to_repr(v);
  }
}

std::string dumps(const Value& v, const Value& indent, const std::string* item_sep, const std::string* key_sep,
                  bool sort_keys) {
  Dumper d;
  d.sort_keys = sort_keys;
  if (indent.kind == Value::kInt) {
    d.use_indent = true;
    d.indent = std::string(static_cast<std::size_t>(std::max(0LL, indent.i)), ' ');
  } else if (indent.kind == Value::kString) {
    d.use_indent = true;
    d.indent = indent.s;
  } else if (indent.kind != Value::kNone && indent.kind != Value::kUndefined) {
    throw Failure("tojson: indent must be an integer or a string");
  }
  d.item_sep = item_sep ? *item_sep : (d.use_indent ? "," : ", ");
  d.key_sep = key_sep ? *key_sep : ": ";
  std::string out;
  d.run(out, v, 0);
  return out;
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::kInt && b.kind == Value::kInt) return a.i == b.i;
    return a.num() == b.num();
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::kUndefined: case Value::kNone: return true;
    case Value::kString: return a.s == b.s;
    case Value::kArray:
      if (a.is_tuple != b.is_tuple || a.arr->size() != b.arr->size()) return false;
      for (std::size_t k = 0; k < a.arr->size(); ++k)
        if (!equal((*a.arr)[k], (*b.arr)[k])) return false;
      return true;
    case Value::kObject:
      if (a.is_namespace || b.is_namespace) return a.obj == b.obj;
      if (a.obj->size() != b.obj->size()) return false;
      for (const auto& [k, v] : *a.obj) {
        const Value* o = b.find(k);
        if (!o || !equal(v, *o)) return false;
      }
      return true;
    case Value::kCallable: return a.fn == b.fn;
    default: return false;
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  if (a.kind == Value::kUndefined) fail_undefined(a);
  if (b.kind == Value::kUndefined) fail_undefined(b);
  if (a.is_number() && b.is_number()) {
    if (a.kind == Value::kInt && b.kind == Value::kInt) return a.i < b.i ? -1 : a.i > b.i;
    return a.num() < b.num() ? -1 : a.num() > b.num();
  }
  if (a.kind == Value::kString && b.kind == Value::kString) {
    const int c = a.s.compare(b.s);  // UTF-8 byte order = code point order
    return c < 0 ? -1 : c > 0;
  }
  if (a.kind == Value::kArray && b.kind == Value::kArray && a.is_tuple == b.is_tuple) {
    for (std::size_t k = 0; k < a.arr->size() && k < b.arr->size(); ++k) {
      if (!equal((*a.arr)[k], (*b.arr)[k])) return compare((*a.arr)[k], (*b.arr)[k], op);
    }
    return a.arr->size() < b.arr->size() ? -1 : a.arr->size() > b.arr->size();
  }
  throw Failure(fmt::format("'{}' not supported between instances of '{}' and '{}'", op, type_name(a), type_name(b)));
}

bool is_py_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    utf8::next(s, i);
    out.push_back(s.substr(b, i - b));
  }
  return out;
}

std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right) {
  std::vector<std::uint32_t> set;
  if (chars)
    for (std::size_t i = 0; i < chars->size();) set.push_back(utf8::next(*chars, i));
  auto in_set = [&](std::uint32_t c) { return chars ? std::find(set.begin(), set.end(), c) != set.end() : is_py_space(c); };
  std::vector<std::pair<std::size_t, std::uint32_t>> cps;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    cps.emplace_back(b, utf8::next(s, i));
  }
  std::size_t lo = 0, hi = cps.size();
  if (left)
    while (lo < hi && in_set(cps[lo].second)) ++lo;
  if (right)
    while (hi > lo && in_set(cps[hi - 1].second)) --hi;
  const std::size_t b = lo < cps.size() ? cps[lo].first : s.size();
  const std::size_t e = hi < cps.size() ? cps[hi].first : s.size();
  return s.substr(b, e - b);
}

}  // namespace kvcompact::jinja
