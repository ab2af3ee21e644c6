// Python Jinja2 filters, tests and methods; see jinja_builtins.h.
#include "io/jinja_builtins.h"

#include <fmt/format.h>

#include <algorithm>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cwctype>
#include <locale.h>

#include "core/utf8.h"

namespace kvcompact::jinja {
namespace {

// Simple (one-to-one) Unicode case mapping of glibc's C.UTF-8 locale; ASCII if it is missing.
// Python's full mappings (German sharp s -> "SS", ...) are not applied.
locale_t utf8_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}
std::uint32_t cp_upper(std::uint32_t c) {
  if (c < 0x80 || !utf8_locale()) return c < 0x80 ? static_cast<std::uint32_t>(std::toupper(static_cast<int>(c))) : c;
  return static_cast<std::uint32_t>(towupper_l(static_cast<wint_t>(c), utf8_locale()));
}
std::uint32_t cp_lower(std::uint32_t c) {
  if (c < 0x80 || !utf8_locale()) return c < 0x80 ? static_cast<std::uint32_t>(std::tolower(static_cast<int>(c))) : c;
  return static_cast<std::uint32_t>(towlower_l(static_cast<wint_t>(c), utf8_locale()));
}
bool cp_cased(std::uint32_t c) { return cp_upper(c) != c || cp_lower(c) != c; }
bool cp_is_upper(std::uint32_t c) { return cp_cased(c) && cp_upper(c) == c; }
bool cp_is_lower(std::uint32_t c) { return cp_cased(c) && cp_lower(c) == c; }
bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

// Applies f(code point, index among the string's code points, previous code point or 0).
template <class F>
std::string map_cps(const std::string& s, F f) {
  std::string r;
  std::uint32_t prev = 0;
  std::size_t k = 0;
  for (std::size_t i = 0; i < s.size(); ++k) {
    const std::size_t b = i;
    const std::uint32_t c = utf8::next(s, i);
    if (c == 0xFFFFFFFFu) r.append(s, b, i - b);  // invalid byte: kept
    else utf8::append(r, f(c, k, prev));
    prev = c;
  }
  return r;
}
std::string upper(const std::string& s) { return map_cps(s, [](std::uint32_t c, std::size_t, std::uint32_t) { return cp_upper(c); }); }
std::string lower(const std::string& s) { return map_cps(s, [](std::uint32_t c, std::size_t, std::uint32_t) { return cp_lower(c); }); }

std::string py_title(const std::string& s) {  // str.title(): upper after an uncased character
  bool prev_cased = false;
  return map_cps(s, [&](std::uint32_t c, std::size_t, std::uint32_t) {
    const bool cased = cp_cased(c);
    const std::uint32_t r = cased ? (prev_cased ? cp_lower(c) : cp_upper(c)) : c;
    prev_cased = cased;
    return r;
  });
}

std::string py_capitalize(const std::string& s) {
  return map_cps(s, [](std::uint32_t c, std::size_t k, std::uint32_t) { return k == 0 ? cp_upper(c) : cp_lower(c); });
}

Value arg_or(const CallArgs& a, const std::string& name, std::size_t index, const Value& dflt) {
  const Value* v = a.get(name, index);
  return v ? *v : dflt;
}

const std::string& need_str(const Value& v, const char* what) {
  if (v.kind != Value::kString) {
    if (v.kind == Value::kUndefined) fail_undefined(v);
    throw Failure(fmt::format("{} needs a string, not '{}'", what, type_name(v)));
  }
  return v.s;
}

long long need_int(const Value& v, const char* what) {
  if (v.kind == Value::kInt) return v.i;
  if (v.kind == Value::kBool) return v.b;
  if (v.kind == Value::kUndefined) fail_undefined(v);
  throw Failure(fmt::format("{}: '{}' object cannot be interpreted as an integer", what, type_name(v)));
}

std::size_t n_chars(const std::string& s) {
  std::size_t n = 0;
  for (std::size_t i = 0; i < s.size();) { utf8::next(s, i); ++n; }
  return n;
}

// Code point index of byte offset `b` in s.
long long cp_index(const std::string& s, std::size_t b) { return static_cast<long long>(n_chars(s.substr(0, b))); }

bool is_line_break(std::uint32_t c) {
  return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
         c == 0x2028 || c == 0x2029;
}

std::vector<std::string> splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t b = i;
    const std::uint32_t c = utf8::next(s, i);
    if (!is_line_break(c)) continue;
    std::size_t e = i;
    if (c == '\r' && i < s.size() && s[i] == '\n') e = ++i;
    out.push_back(s.substr(start, (keepends ? e : b) - start));
    start = i;
  }
  if (start < s.size()) out.push_back(s.substr(start));
  return out;
}

// str.split / str.rsplit with Python's rules (sep none = runs of white space).
Array py_split(const std::string& s, const Value& sepv, long long maxsplit, bool from_right) {
  Array r;
  if (sepv.kind == Value::kNone || sepv.kind == Value::kUndefined) {
    std::vector<std::pair<std::size_t, std::size_t>> words;  // byte ranges
    std::vector<std::pair<std::size_t, std::uint32_t>> cps;
    for (std::size_t i = 0; i < s.size();) { const std::size_t b = i; cps.emplace_back(b, utf8::next(s, i)); }
    auto at = [&](std::size_t k) { return k < cps.size() ? cps[k].first : s.size(); };
    if (!from_right) {
      std::size_t k = 0;
      long long splits = 0;
      while (true) {
        while (k < cps.size() && is_py_space(cps[k].second)) ++k;
        if (k >= cps.size()) break;
        if (maxsplit >= 0 && splits == maxsplit) { r.push_back(Value::str(s.substr(at(k)))); break; }
        const std::size_t b = k;
        while (k < cps.size() && !is_py_space(cps[k].second)) ++k;
        r.push_back(Value::str(s.substr(at(b), at(k) - at(b))));
        ++splits;
      }
    } else {
      long long k = static_cast<long long>(cps.size()) - 1;
      long long splits = 0;
      Array rev;
      while (true) {
        while (k >= 0 && is_py_space(cps[static_cast<std::size_t>(k)].second)) --k;
        if (k < 0) break;
        if (maxsplit >= 0 && splits == maxsplit) { rev.push_back(Value::str(s.substr(0, at(static_cast<std::size_t>(k) + 1)))); break; }
        const long long e = k;
        while (k >= 0 && !is_py_space(cps[static_cast<std::size_t>(k)].second)) --k;
        const std::size_t b = at(static_cast<std::size_t>(k + 1)), en = at(static_cast<std::size_t>(e) + 1);
        rev.push_back(Value::str(s.substr(b, en - b)));
        ++splits;
      }
      r.assign(rev.rbegin(), rev.rend());
    }
    return r;
  }
  const std::string& sep = need_str(sepv, "split()");
  if (sep.empty()) throw Failure("empty separator");
  if (!from_right) {
    std::size_t pos = 0;
    long long splits = 0;
    for (std::size_t f; (maxsplit < 0 || splits < maxsplit) && (f = s.find(sep, pos)) != std::string::npos; ++splits) {
      r.push_back(Value::str(s.substr(pos, f - pos)));
      pos = f + sep.size();
    }
    r.push_back(Value::str(s.substr(pos)));
    return r;
  }
  std::vector<std::string> rev;
  std::size_t end = s.size();
  long long splits = 0;
  while (maxsplit < 0 || splits < maxsplit) {
    if (end < sep.size()) break;
    const std::size_t f = s.rfind(sep, end - sep.size());
    if (f == std::string::npos) break;
    rev.push_back(s.substr(f + sep.size(), end - f - sep.size()));
    end = f;
    ++splits;
  }
  rev.push_back(s.substr(0, end));
  for (auto it = rev.rbegin(); it != rev.rend(); ++it) r.push_back(Value::str(*it));
  return r;
}

std::string py_replace(const std::string& s, const std::string& from, const std::string& to, long long count) {
  std::string r;
  long long n = 0;
  if (from.empty()) {
    const auto cs = chars_of(s);
    for (std::size_t k = 0; k <= cs.size(); ++k) {
      if (count < 0 || n < count) { r += to; ++n; }
      if (k < cs.size()) r += cs[k];
    }
    return r;
  }
  std::size_t pos = 0;
  for (std::size_t f; (count < 0 || n < count) && (f = s.find(from, pos)) != std::string::npos; ++n) {
    r.append(s, pos, f - pos);
    r += to;
    pos = f + from.size();
  }
  r.append(s, pos);
  return r;
}

long long py_count(const std::string& s, const std::string& sub) {
  if (sub.empty()) return static_cast<long long>(n_chars(s)) + 1;
  long long n = 0;
  for (std::size_t pos = 0, f; (f = s.find(sub, pos)) != std::string::npos; pos = f + sub.size()) ++n;
  return n;
}

bool affix_match(const std::string& s, const Value& affix, bool start) {
  auto one = [&](const std::string& o) {
    return s.size() >= o.size() && (start ? s.compare(0, o.size(), o) == 0 : s.compare(s.size() - o.size(), o.size(), o) == 0);
  };
  if (affix.kind == Value::kString) return one(affix.s);
  if (affix.kind == Value::kArray && affix.is_tuple) {
    for (const Value& x : *affix.arr) if (one(need_str(x, start ? "startswith()" : "endswith()"))) return true;
    return false;
  }
  throw Failure(fmt::format("{} first arg must be str or a tuple of str, not {}", start ? "startswith" : "endswith",
                            type_name(affix)));
}

std::string pad(const std::string& s, long long width, const std::string& fill, int align) {  // -1 left, 0 center, 1 right
  const long long n = static_cast<long long>(n_chars(s));
  if (width <= n) return s;
  const long long total = width - n;
  long long left = align < 0 ? 0 : align > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (long long k = 0; k < left; ++k) out += fill;
  out += s;
  for (long long k = 0; k < total - left; ++k) out += fill;
  return out;
}

// str.format with fields {} {0} {name} (no format specs or conversions).
std::string py_format(const std::string& f, const CallArgs& a) {
  std::string out;
  std::size_t auto_idx = 0;
  for (std::size_t i = 0; i < f.size(); ++i) {
    const char c = f[i];
    if (c == '{' && i + 1 < f.size() && f[i + 1] == '{') { out += '{'; ++i; continue; }
    if (c == '}' && i + 1 < f.size() && f[i + 1] == '}') { out += '}'; ++i; continue; }
    if (c == '}') throw Failure("Single '}' encountered in format string");
    if (c != '{') { out += c; continue; }
    const std::size_t e = f.find('}', i);
    if (e == std::string::npos) throw Failure("Single '{' encountered in format string");
    const std::string field = f.substr(i + 1, e - i - 1);
    if (field.find_first_of(":!.[") != std::string::npos) throw Failure("str.format: format specs are not supported");
    const Value* v = nullptr;
    if (field.empty()) v = auto_idx < a.pos.size() ? &a.pos[auto_idx++] : nullptr;
    else if (std::all_of(field.begin(), field.end(), ::isdigit)) { const auto k = static_cast<std::size_t>(parse_digits(field, "str.format field")); v = k < a.pos.size() ? &a.pos[k] : nullptr; }
    else for (const auto& [k, x] : a.kw) if (k == field) v = &x;
    if (!v) throw Failure(fmt::format("str.format: no argument for field '{{{}}}'", field));
    out += to_str(*v);
    i = e;
  }
  return out;
}

Value str_method(const Value& self, const std::string& m, const CallArgs& a) {
  const std::string& s = self.s;
  const Value none = Value::none();
  auto opt_str = [&](const std::string& name, std::size_t idx) -> const std::string* {
    const Value* v = a.get(name, idx);
    if (!v || v->kind == Value::kNone) return nullptr;
    return &need_str(*v, (m + "()").c_str());
  };
  auto req_str = [&](std::size_t idx) -> const std::string& {
    if (idx >= a.pos.size()) throw Failure(fmt::format("{}() takes at least {} argument", m, idx + 1));
    return need_str(a.pos[idx], (m + "()").c_str());
  };
  if (m == "strip" || m == "lstrip" || m == "rstrip")
    return Value::str(py_strip(s, opt_str("chars", 0), m != "rstrip", m != "lstrip"));
  if (m == "split" || m == "rsplit") {
    const Value& sep = arg_or(a, "sep", 0, none);
    const long long maxsplit = need_int(arg_or(a, "maxsplit", 1, Value::integer(-1)), "split()");
    return Value::array(py_split(s, sep, maxsplit, m == "rsplit"));
  }
  if (m == "splitlines") {
    Array r;
    for (auto& l : splitlines(s, arg_or(a, "keepends", 0, Value::boolean(false)).truthy())) r.push_back(Value::str(l));
    return Value::array(r);
  }
  if (m == "replace") {
    const long long count = need_int(arg_or(a, "count", 2, Value::integer(-1)), "replace()");
    return Value::str(py_replace(s, req_str(0), req_str(1), count));
  }
  if (m == "startswith" || m == "endswith") {
    if (a.pos.empty()) throw Failure(m + "() takes at least 1 argument (0 given)");
    return Value::boolean(affix_match(s, a.pos[0], m == "startswith"));
  }
  if (m == "upper") return Value::str(upper(s));
  if (m == "lower" || m == "casefold") return Value::str(lower(s));
  if (m == "title") return Value::str(py_title(s));
  if (m == "capitalize") return Value::str(py_capitalize(s));
  if (m == "swapcase")
    return Value::str(map_cps(s, [](std::uint32_t c, std::size_t, std::uint32_t) { return cp_is_upper(c) ? cp_lower(c) : cp_upper(c); }));
  if (m == "find" || m == "rfind" || m == "index" || m == "rindex") {
    const std::string& sub = req_str(0);
    const std::size_t f = (m == "find" || m == "index") ? s.find(sub) : s.rfind(sub);
    if (f == std::string::npos) {
      if (m == "index" || m == "rindex") throw Failure("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(cp_index(s, f));
  }
  if (m == "count") return Value::integer(py_count(s, req_str(0)));
  if (m == "join") {
    if (a.pos.empty()) throw Failure("join() takes exactly one argument");
    std::string r;
    bool first = true;
    for (const Value& x : iterate(a.pos[0])) {
      if (x.kind != Value::kString) throw Failure(fmt::format("sequence item: expected str instance, {} found", type_name(x)));
      r += (first ? "" : s) + x.s;
      first = false;
    }
    return Value::str(r);
  }
  if (m == "isdigit" || m == "isdecimal" || m == "isnumeric" || m == "isalpha" || m == "isalnum" || m == "isspace" ||
      m == "isupper" || m == "islower") {
    if (s.empty()) return Value::boolean(false);
    if (m == "isspace") {
      for (std::size_t i = 0; i < s.size();) if (!is_py_space(utf8::next(s, i))) return Value::boolean(false);
      return Value::boolean(true);
    }
    if (m == "isupper" || m == "islower") {
      bool cased = false;
      for (std::size_t i = 0; i < s.size();) {
        const std::uint32_t c = utf8::next(s, i);
        if (!cp_cased(c)) continue;
        cased = true;
        if (m == "isupper" ? cp_is_lower(c) : cp_is_upper(c)) return Value::boolean(false);
      }
      return Value::boolean(cased);
    }
    for (char c : s) {
      const bool d = std::isdigit(static_cast<unsigned char>(c)) != 0, al = is_alpha(c);
      const bool ok = (m == "isalpha") ? al : (m == "isalnum") ? (al || d) : d;
      if (!ok) return Value::boolean(false);
    }
    return Value::boolean(true);
  }
  if (m == "zfill") {
    const long long w = need_int(arg_or(a, "width", 0, Value::integer(0)), "zfill()");
    const long long n = static_cast<long long>(n_chars(s));
    if (w <= n) return self;
    const std::size_t sign = !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0;
    return Value::str(s.substr(0, sign) + std::string(static_cast<std::size_t>(w - n), '0') + s.substr(sign));
  }
  if (m == "center" || m == "ljust" || m == "rjust") {
    const long long w = need_int(arg_or(a, "width", 0, Value::integer(0)), (m + "()").c_str());
    const std::string* fill = opt_str("fillchar", 1);
    return Value::str(pad(s, w, fill ? *fill : " ", m == "ljust" ? -1 : m == "rjust" ? 1 : 0));
  }
  if (m == "removeprefix") { const std::string& p = req_str(0); return Value::str(s.starts_with(p) ? s.substr(p.size()) : s); }
  if (m == "removesuffix") { const std::string& p = req_str(0); return Value::str(!p.empty() && s.ends_with(p) ? s.substr(0, s.size() - p.size()) : s); }
  if (m == "partition" || m == "rpartition") {
    const std::string& sep = req_str(0);
    if (sep.empty()) throw Failure("empty separator");
    const std::size_t f = m == "partition" ? s.find(sep) : s.rfind(sep);
    if (f == std::string::npos)
      return m == "partition" ? Value::tuple({self, Value::str(""), Value::str("")}) : Value::tuple({Value::str(""), Value::str(""), self});
    return Value::tuple({Value::str(s.substr(0, f)), Value::str(sep), Value::str(s.substr(f + sep.size()))});
  }
  if (m == "format") return Value::str(py_format(s, a));
  throw Failure(fmt::format("'str object' has no attribute '{}'", m));
}

const std::vector<std::string>& str_methods() {
  static const std::vector<std::string> v{
      "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "replace", "startswith", "endswith", "upper",
      "lower", "casefold", "title", "capitalize", "swapcase", "find", "rfind", "index", "rindex", "count", "join",
      "isdigit", "isdecimal", "isnumeric", "isalpha", "isalnum", "isspace", "isupper", "islower", "zfill", "center",
      "ljust", "rjust", "removeprefix", "removesuffix", "partition", "rpartition", "format"};
  return v;
}

bool contains(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Value dict_method(const Value& self, const std::string& m, const CallArgs& a) {
  if (m == "get") {
    if (a.pos.empty()) throw Failure("get expected at least 1 argument, got 0");
    if (a.pos[0].kind == Value::kString)
      if (Value* x = self.find(a.pos[0].s)) return *x;
    return a.pos.size() > 1 ? a.pos[1] : Value::none();
  }
  if (m == "items" || m == "keys" || m == "values") {
    Array r;
    for (auto& [k, x] : *self.obj) {
      if (m == "items") r.push_back(Value::tuple({Value::str(k), x}));
      else r.push_back(m == "keys" ? Value::str(k) : x);
    }
    return Value::array(r);
  }
  if (m == "copy") { Value c = Value::object(*self.obj); return c; }
  throw Failure(fmt::format("'dict object' has no attribute '{}'", m));
}

Value list_method(const Value& self, const std::string& m, const CallArgs& a) {
  if (m == "index" || m == "count") {
    if (a.pos.empty()) throw Failure(m + "() takes at least 1 argument");
    long long n = 0;
    for (std::size_t k = 0; k < self.arr->size(); ++k) {
      if (!equal((*self.arr)[k], a.pos[0])) continue;
      if (m == "index") return Value::integer(static_cast<long long>(k));
      ++n;
    }
    if (m == "index") throw Failure(fmt::format("{} is not in list", to_repr(a.pos[0])));
    return Value::integer(n);
  }
  if (m == "copy") return Value::array(*self.arr);
  throw Failure(fmt::format("'list object' has no attribute '{}'", m));
}

Value bound(const Value& self, const std::string& m, Value (*impl)(const Value&, const std::string&, const CallArgs&)) {
  return Value::callable(m, [self, m, impl](const CallArgs& a) { return impl(self, m, a); });
}

// Dotted attribute path of map/selectattr/sort (attribute="a.b.0").
Value attr_path(const Value& v, const std::string& path) {
  Value cur = v;
  std::size_t pos = 0;
  while (true) {
    const std::size_t dot = path.find('.', pos);
    const std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    if (!part.empty() && std::all_of(part.begin(), part.end(), ::isdigit)) cur = get_item(cur, Value::integer(parse_digits(part, "attribute index")));
    else cur = get_item(cur, Value::str(part));
    if (dot == std::string::npos) return cur;
    pos = dot + 1;
  }
}

// Sort/compare key: case_sensitive=false lowers strings.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.kind == Value::kString) return Value::str(lower(v.s));
  return v;
}

std::string html_escape(const std::string& s) {
  std::string r;
  for (char c : s) {
    switch (c) {
      case '&': r += "&amp;"; break;
      case '<': r += "&lt;"; break;
      case '>': r += "&gt;"; break;
      case '"': r += "&#34;"; break;
      case '\'': r += "&#39;"; break;
      default: r += c;
    }
  }
  return r;
}

CallArgs shift(const CallArgs& a, std::size_t n) {
  CallArgs r;
  r.pos.assign(a.pos.begin() + static_cast<long>(std::min(n, a.pos.size())), a.pos.end());
  r.kw = a.kw;
  return r;
}

std::string ascii_json(const std::string& j) {  // json.dumps(ensure_ascii=True) from the UTF-8 output
  std::string r;
  for (std::size_t i = 0; i < j.size();) {
    const std::uint32_t c = utf8::next(j, i);
    if (c < 0x80) { r += static_cast<char>(c); continue; }
    if (c < 0x10000) { r += fmt::format("\\u{:04x}", c); continue; }
    const std::uint32_t v = c - 0x10000;
    r += fmt::format("\\u{:04x}\\u{:04x}", 0xD800 + (v >> 10), 0xDC00 + (v & 0x3FF));
  }
  return r;
}

double to_float(const Value& v, bool& ok) {
  ok = true;
  if (v.is_number()) return v.num();
  if (v.kind == Value::kString) {
    const std::string t = py_strip(v.s, nullptr, true, true);
    char* end = nullptr;
    const double d = std::strtod(t.c_str(), &end);
    if (!t.empty() && end == t.c_str() + t.size()) return d;
  }
  if (v.kind == Value::kUndefined) fail_undefined(v);
  ok = false;
  return 0;
}

}  // namespace

bool known_filter(const std::string& name) {
  static const std::vector<std::string> names{
      "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "first",
      "float", "forceescape", "format", "indent", "int", "items", "join", "last", "length", "list", "lower", "map",
      "max", "min", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "sort",
      "string", "sum", "title", "tojson", "trim", "unique", "upper", "wordcount"};
  return contains(names, name);
}

bool known_test(const std::string& name) {
  static const std::vector<std::string> names{
      "defined", "undefined", "none", "boolean", "true", "false", "integer", "float", "number", "string", "mapping",
      "iterable", "sequence", "callable", "escaped", "odd", "even", "divisibleby", "lower", "upper", "eq", "equalto",
      "==", "ne", "!=", "lt", "lessthan", "<", "le", "<=", "gt", "greaterthan", ">", "ge", ">=", "sameas", "in",
      "filter", "test"};
  return contains(names, name);
}

Array iterate(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: return {};
    case Value::kArray: return *v.arr;
    case Value::kString: { Array r; for (auto& c : chars_of(v.s)) r.push_back(Value::str(c)); return r; }
    case Value::kObject: {
      if (v.is_namespace) break;
      Array r;
      for (auto& kv : *v.obj) r.push_back(Value::str(kv.first));
      return r;
    }
    default: break;
  }
  throw Failure(fmt::format("'{}' object is not iterable", type_name(v)));
}

Value get_attr(const Value& base, const std::string& name) {
  switch (base.kind) {
    case Value::kUndefined: fail_undefined(base);
    case Value::kString:
      if (contains(str_methods(), name)) return bound(base, name, str_method);
      break;
    case Value::kObject:
      if (base.is_namespace) {
        if (Value* v = base.find(name)) return *v;
        break;
      }
      if (name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy") return bound(base, name, dict_method);
      if (name == "pop" || name == "popitem" || name == "setdefault" || name == "update" || name == "clear")
        return Value::undefined(fmt::format("access to attribute '{}' of 'dict' object is unsafe.", name));
      if (Value* v = base.find(name)) return *v;
      break;
    case Value::kArray:
      if (name == "index" || name == "count" || (name == "copy" && !base.is_tuple)) return bound(base, name, list_method);
      if (!base.is_tuple && (name == "append" || name == "extend" || name == "insert" || name == "pop" || name == "remove" ||
                             name == "reverse" || name == "sort" || name == "clear"))
        return Value::undefined(fmt::format("access to attribute '{}' of 'list' object is unsafe.", name));
      break;
    default: break;
  }
  return Value::undefined(fmt::format("'{}' has no attribute '{}'", type_repr(base), name));
}

Value get_item(const Value& base, const Value& key) {
  if (base.kind == Value::kUndefined) fail_undefined(base);
  if (key.kind == Value::kUndefined) fail_undefined(key);
  if (base.kind == Value::kObject && !base.is_namespace && key.kind == Value::kString)
    if (Value* v = base.find(key.s)) return *v;
  if ((key.kind == Value::kInt || key.kind == Value::kBool) && (base.kind == Value::kArray || base.kind == Value::kString)) {
    const long long idx = key.kind == Value::kInt ? key.i : key.b;
    if (base.kind == Value::kArray) {
      const long long n = static_cast<long long>(base.arr->size()), k = idx < 0 ? idx + n : idx;
      if (k >= 0 && k < n) return (*base.arr)[static_cast<std::size_t>(k)];
    } else {
      const auto cs = chars_of(base.s);
      const long long n = static_cast<long long>(cs.size()), k = idx < 0 ? idx + n : idx;
      if (k >= 0 && k < n) return Value::str(cs[static_cast<std::size_t>(k)]);
    }
  }
  if (key.kind == Value::kString) return get_attr(base, key.s);
  return Value::undefined(fmt::format("{} has no element {}", type_repr(base), to_repr(key)));
}

std::string percent_format(const std::string& f, const Value& args) {
  std::vector<Value> items;
  if (args.kind == Value::kArray && args.is_tuple) items = *args.arr;
  else items.push_back(args);
  const bool mapping = args.kind == Value::kObject && !args.is_namespace;
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < f.size(); ++i) {
    if (f[i] != '%') { out += f[i]; continue; }
    if (++i >= f.size()) throw Failure("incomplete format");
    if (f[i] == '%') { out += '%'; continue; }
    const Value* v = nullptr;
    if (f[i] == '(') {
      const std::size_t e = f.find(')', i);
      if (e == std::string::npos) throw Failure("incomplete format key");
      if (!mapping) throw Failure("format requires a mapping");
      v = args.find(f.substr(i + 1, e - i - 1));
      if (!v) throw Failure(fmt::format("KeyError: '{}'", f.substr(i + 1, e - i - 1)));
      i = e + 1;
    }
    std::string flags;
    while (i < f.size() && std::string("-+ #0").find(f[i]) != std::string::npos) flags += f[i++];
    std::string width, prec;
    while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) width += f[i++];
    bool has_prec = false;
    if (i < f.size() && f[i] == '.') { has_prec = true; ++i; while (i < f.size() && std::isdigit(static_cast<unsigned char>(f[i]))) prec += f[i++]; }
    if (i >= f.size()) throw Failure("incomplete format");
    const char conv = f[i];
    if (!v) {
      if (next >= items.size()) throw Failure("not enough arguments for format string");
      v = &items[next++];
    }
    std::string body;
    const int p = has_prec ? static_cast<int>(parse_digits(prec, "format precision", 1 << 20)) : -1;
    switch (conv) {
      case 's': body = to_str(*v); if (p >= 0) { auto cs = chars_of(body); body.clear(); for (int k = 0; k < p && k < static_cast<int>(cs.size()); ++k) body += cs[static_cast<std::size_t>(k)]; } break;
      case 'r': case 'a': body = to_repr(*v); break;
      case 'd': case 'i': case 'u': {
        bool ok;
        const double d = v->kind == Value::kInt ? 0 : to_float(*v, ok);
        if (v->kind == Value::kString) throw Failure(fmt::format("%{} format: a real number is required, not str", conv));
        const long long n = v->kind == Value::kInt ? v->i : static_cast<long long>(std::trunc(d));
        body = std::to_string(n < 0 ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n));
        if (p > static_cast<int>(body.size())) body = std::string(static_cast<std::size_t>(p) - body.size(), '0') + body;
        body = (n < 0 ? "-" : flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "") + body;
        break;
      }
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G': {
        if (!v->is_number()) throw Failure(fmt::format("must be real number, not {}", type_name(*v)));
        const std::string spec = std::string("{:") + (flags.find('+') != std::string::npos ? "+" : flags.find(' ') != std::string::npos ? " " : "") +
                                 (flags.find('#') != std::string::npos ? "#" : "") + "." + std::to_string(p < 0 ? 6 : p) + conv + "}";
        body = fmt::format(fmt::runtime(spec), v->num());
        break;
      }
      case 'x': case 'X': case 'o': {
        if (v->kind != Value::kInt && v->kind != Value::kBool) throw Failure(fmt::format("%{} format: an integer is required, not {}", conv, type_name(*v)));
        const long long n = v->kind == Value::kInt ? v->i : v->b;
        body = fmt::format(fmt::runtime(std::string("{:") + (flags.find('#') != std::string::npos ? "#" : "") + conv + "}"),
                           n < 0 ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n));
        if (n < 0) body = "-" + body;
        break;
      }
      case 'c': body = v->kind == Value::kInt ? utf8::encode(static_cast<std::uint32_t>(v->i)) : to_str(*v); break;
      default: throw Failure(fmt::format("unsupported format character '{}'", conv));
    }
    const long long w = parse_digits(width, "format width", 1 << 20);
    if (static_cast<long long>(n_chars(body)) < w) {
      const std::size_t fill = static_cast<std::size_t>(w) - n_chars(body);
      if (flags.find('-') != std::string::npos) body += std::string(fill, ' ');
      else if (flags.find('0') != std::string::npos && conv != 's' && conv != 'r') {
        const std::size_t sign = !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' ') ? 1 : 0;
        body.insert(sign, std::string(fill, '0'));
      } else body = std::string(fill, ' ') + body;
    }
    out += body;
  }
  if (!mapping && next < items.size()) throw Failure("not all arguments converted during string formatting");
  return out;
}

bool apply_test(const std::string& t, const Value& v, const CallArgs& a) {
  auto arg = [&](std::size_t k) -> const Value& {
    if (k >= a.pos.size()) throw Failure(fmt::format("test '{}' needs an argument", t));
    return a.pos[k];
  };
  if (t == "defined") return v.defined();
  if (t == "undefined") return !v.defined();
  if (t == "none") return v.kind == Value::kNone;
  if (t == "boolean") return v.kind == Value::kBool;
  if (t == "true") return v.kind == Value::kBool && v.b;
  if (t == "false") return v.kind == Value::kBool && !v.b;
  if (t == "integer") return v.kind == Value::kInt;
  if (t == "float") return v.kind == Value::kFloat;
  if (t == "number") return v.is_number();
  if (t == "string") return v.kind == Value::kString;
  if (t == "mapping") return v.kind == Value::kObject && !v.is_namespace;
  if (t == "iterable") return v.kind == Value::kUndefined || v.kind == Value::kArray || v.kind == Value::kString || (v.kind == Value::kObject && !v.is_namespace);
  if (t == "sequence") return v.kind == Value::kUndefined || v.kind == Value::kArray || v.kind == Value::kString || (v.kind == Value::kObject && !v.is_namespace);
  if (t == "callable") return v.kind == Value::kCallable;
  if (t == "escaped") return false;
  if (t == "odd" || t == "even") {
    const long long n = need_int(v, ("test " + t).c_str());
    const long long r = ((n % 2) + 2) % 2;
    return (r == 1) == (t == "odd");
  }
  if (t == "divisibleby") {
    const long long n = need_int(v, "divisibleby"), d = need_int(arg(0), "divisibleby");
    if (d == 0) throw Failure("integer division or modulo by zero");
    return n % d == 0;
  }
  if (t == "lower" || t == "upper") return str_method(Value::str(to_str(v)), t == "lower" ? "islower" : "isupper", {}).b;
  if (t == "eq" || t == "equalto" || t == "==") return equal(v, arg(0));
  if (t == "ne" || t == "!=") return !equal(v, arg(0));
  if (t == "lt" || t == "lessthan" || t == "<") return compare(v, arg(0), "<") < 0;
  if (t == "le" || t == "<=") return compare(v, arg(0), "<=") <= 0;
  if (t == "gt" || t == "greaterthan" || t == ">") return compare(v, arg(0), ">") > 0;
  if (t == "ge" || t == ">=") return compare(v, arg(0), ">=") >= 0;
  if (t == "sameas") {
    const Value& o = arg(0);
    if (v.kind != o.kind) return false;
    switch (v.kind) {
      case Value::kNone: case Value::kUndefined: return true;
      case Value::kBool: return v.b == o.b;
      case Value::kInt: return v.i == o.i && v.i >= -5 && v.i <= 256;  // CPython's small-int cache
      case Value::kArray: return v.arr == o.arr;
      case Value::kObject: return v.obj == o.obj;
      case Value::kCallable: return v.fn == o.fn;
      default: return false;
    }
  }
  if (t == "in") {
    const Value& c = arg(0);
    if (c.kind == Value::kString) return v.kind == Value::kString && c.s.find(v.s) != std::string::npos;
    for (const Value& x : iterate(c)) if (equal(v, x)) return true;
    return false;
  }
  if (t == "filter" || t == "test") return v.kind == Value::kString;
  throw Failure(fmt::format("No test named '{}'.", t));
}

Value apply_filter(const std::string& f, const Value& v, const CallArgs& a) {
  const Value none = Value::none();
  auto soft = [&] { return to_str(v); };
  if (f == "safe") return v;
  if (f == "string") return Value::str(soft());
  if (f == "tojson") {
    const Value& ensure_ascii = arg_or(a, "ensure_ascii", 0, Value::boolean(false));
    const Value& indent = arg_or(a, "indent", 1, none);
    const Value& seps = arg_or(a, "separators", 2, none);
    const bool sort_keys = arg_or(a, "sort_keys", 3, Value::boolean(false)).truthy();
    std::string item_sep, key_sep;
    bool custom = false;
    if (seps.kind == Value::kArray && seps.arr->size() == 2) {
      item_sep = need_str((*seps.arr)[0], "tojson separators");
      key_sep = need_str((*seps.arr)[1], "tojson separators");
      custom = true;
    } else if (seps.kind != Value::kNone) {
      throw Failure("tojson: separators must be an (item_separator, key_separator) pair");
    }
    std::string out = dumps(v, indent, custom ? &item_sep : nullptr, custom ? &key_sep : nullptr, sort_keys);
    return Value::str(ensure_ascii.truthy() ? ascii_json(out) : out);
  }
  if (f == "trim") {
    const Value* c = a.get("chars", 0);
    const std::string* chars = c && c->kind != Value::kNone ? &need_str(*c, "trim") : nullptr;
    return Value::str(py_strip(soft(), chars, true, true));
  }
  if (f == "upper") return Value::str(upper(soft()));
  if (f == "lower") return Value::str(lower(soft()));
  if (f == "capitalize") return Value::str(py_capitalize(soft()));
  if (f == "title") {  // jinja2 do_title: words split at runs of - white space ( { [ <
    bool at_start = true;
    return Value::str(map_cps(soft(), [&](std::uint32_t c, std::size_t, std::uint32_t) {
      const bool sep = is_py_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
      const std::uint32_t r = sep ? c : at_start ? cp_upper(c) : cp_lower(c);
      at_start = sep;
      return r;
    }));
  }
  if (f == "replace") {
    if (a.pos.size() < 2) throw Failure("replace filter needs old and new strings");
    const Value& cnt = arg_or(a, "count", 2, none);
    return Value::str(py_replace(soft(), to_str(a.pos[0]), to_str(a.pos[1]), cnt.kind == Value::kNone ? -1 : need_int(cnt, "replace")));
  }
  if (f == "length" || f == "count") {
    switch (v.kind) {
      case Value::kUndefined: return Value::integer(0);
      case Value::kString: return Value::integer(static_cast<long long>(n_chars(v.s)));
      case Value::kArray: return Value::integer(static_cast<long long>(v.arr->size()));
      case Value::kObject: if (!v.is_namespace) return Value::integer(static_cast<long long>(v.obj->size())); break;
      default: break;
    }
    throw Failure(fmt::format("object of type '{}' has no len()", type_name(v)));
  }
  if (f == "default" || f == "d") {
    const Value dflt = Value::str("");
    const Value& d = arg_or(a, "default_value", 0, dflt);
    const bool boolean = arg_or(a, "boolean", 1, Value::boolean(false)).truthy();
    return (boolean ? !v.truthy() : !v.defined()) ? d : v;
  }
  if (f == "first" || f == "last") {
    Array items = iterate(v);
    if (items.empty()) return Value::undefined(fmt::format("No {} item, sequence was empty.", f));
    return f == "first" ? items.front() : items.back();
  }
  if (f == "join") {
    const Value sep_d = Value::str("");
    const std::string sep = to_str(arg_or(a, "d", 0, sep_d));
    const Value* attr = a.get("attribute", 1);
    std::string s;
    bool first = true;
    for (const Value& x : iterate(v)) {
      s += (first ? "" : sep) + to_str(attr && attr->kind != Value::kNone ? attr_path(x, to_str(*attr)) : x);
      first = false;
    }
    return Value::str(s);
  }
  if (f == "list") return Value::array(iterate(v));
  if (f == "reverse") {
    if (v.kind == Value::kString) { auto c = chars_of(v.s); std::string s; for (auto it = c.rbegin(); it != c.rend(); ++it) s += *it; return Value::str(s); }
    Array items = iterate(v);
    return Value::array(Array(items.rbegin(), items.rend()));
  }
  if (f == "items") {
    if (v.kind == Value::kUndefined) return Value::array();
    if (v.kind != Value::kObject || v.is_namespace) throw Failure(fmt::format("Can only get item pairs from a mapping, not {}", type_name(v)));
    return dict_method(v, "items", {});
  }
  if (f == "int") {
    const Value& d = arg_or(a, "default", 0, Value::integer(0));
    const long long base = need_int(arg_or(a, "base", 1, Value::integer(10)), "int");
    if (v.kind == Value::kInt) return v;
    if (v.kind == Value::kBool) return Value::integer(v.b);
    if (v.kind == Value::kFloat) return std::isfinite(v.f) ? Value::integer(static_cast<long long>(v.f)) : d;
    if (v.kind == Value::kString) {
      const std::string t = py_strip(v.s, nullptr, true, true);
      char* end = nullptr;
      const long long n = std::strtoll(t.c_str(), &end, static_cast<int>(base));
      if (!t.empty() && end == t.c_str() + t.size()) return Value::integer(n);
      bool ok;
      const double x = to_float(v, ok);
      return ok && std::isfinite(x) ? Value::integer(static_cast<long long>(x)) : d;
    }
    if (v.kind == Value::kUndefined) fail_undefined(v);
    return d;
  }
  if (f == "float") {
    bool ok;
    const double x = to_float(v, ok);
    return ok ? Value::real(x) : arg_or(a, "default", 0, Value::real(0.0));
  }
  if (f == "abs") {
    if (v.kind == Value::kInt) return Value::integer(v.i < 0 ? -v.i : v.i);
    if (v.kind == Value::kBool) return Value::integer(v.b);
    if (v.kind == Value::kFloat) return Value::real(std::fabs(v.f));
    if (v.kind == Value::kUndefined) fail_undefined(v);
    throw Failure(fmt::format("bad operand type for abs(): '{}'", type_name(v)));
  }
  if (f == "round") {
    const long long prec = need_int(arg_or(a, "precision", 0, Value::integer(0)), "round");
    const std::string method = to_str(arg_or(a, "method", 1, Value::str("common")));
    if (!v.is_number()) { if (v.kind == Value::kUndefined) fail_undefined(v); throw Failure("round needs a number"); }
    if (method == "common") {
      if (v.kind != Value::kFloat) return Value::integer(v.kind == Value::kInt ? v.i : v.b);
      return Value::real(std::stod(fmt::format("{:.{}f}", v.f, std::max(0LL, prec))));
    }
    const double scale = std::pow(10.0, static_cast<double>(prec));
    if (method == "floor") return Value::real(std::floor(v.num() * scale) / scale);
    if (method == "ceil") return Value::real(std::ceil(v.num() * scale) / scale);
    throw Failure("method must be common, ceil or floor");
  }
  if (f == "sum") {
    const Value* attr = a.get("attribute", 0);
    Value acc = arg_or(a, "start", 1, Value::integer(0));
    for (const Value& x0 : iterate(v)) {
      const Value x = attr && attr->kind != Value::kNone ? attr_path(x0, to_str(*attr)) : x0;
      if (!acc.is_number() || !x.is_number()) throw Failure(fmt::format("unsupported operand type(s) for +: '{}' and '{}'", type_name(acc), type_name(x)));
      acc = acc.kind != Value::kFloat && x.kind != Value::kFloat ? Value::integer(static_cast<long long>(acc.num()) + static_cast<long long>(x.num()))
                                                                 : Value::real(acc.num() + x.num());
    }
    return acc;
  }
  if (f == "min" || f == "max" || f == "sort" || f == "unique") {
    const bool is_sort = f == "sort";
    const bool reverse = is_sort && arg_or(a, "reverse", 0, Value::boolean(false)).truthy();
    const bool cs = arg_or(a, "case_sensitive", is_sort ? 1 : 0, Value::boolean(false)).truthy();
    const Value* attr = a.get("attribute", is_sort ? 2 : 1);
    Array items = iterate(v);
    auto key = [&](const Value& x) { return sort_key(attr && attr->kind != Value::kNone ? attr_path(x, to_str(*attr)) : x, cs); };
    if (f == "unique") {
      Array out, seen;
      for (const Value& x : items) {
        const Value k = key(x);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equal(s, k); })) { seen.push_back(k); out.push_back(x); }
      }
      return Value::array(out);
    }
    if (is_sort) {
      std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
        return reverse ? compare(key(y), key(x), "<") < 0 : compare(key(x), key(y), "<") < 0;
      });
      return Value::array(items);
    }
    if (items.empty()) return Value::undefined(fmt::format("No aggregated item, sequence was empty."));
    std::size_t best = 0;
    for (std::size_t k = 1; k < items.size(); ++k) {
      const int c = compare(key(items[k]), key(items[best]), "<");
      if (f == "min" ? c < 0 : c > 0) best = k;
    }
    return items[best];
  }
  if (f == "dictsort") {
    if (v.kind != Value::kObject || v.is_namespace) throw Failure("dictsort needs a dict");
    const bool cs = arg_or(a, "case_sensitive", 0, Value::boolean(false)).truthy();
    const std::string by = to_str(arg_or(a, "by", 1, Value::str("key")));
    const bool reverse = arg_or(a, "reverse", 2, Value::boolean(false)).truthy();
    Array items = *dict_method(v, "items", {}).arr;
    const std::size_t pos = by == "value" ? 1 : 0;
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      const int c = compare(sort_key((*x.arr)[pos], cs), sort_key((*y.arr)[pos], cs), "<");
      return reverse ? c > 0 : c < 0;
    });
    return Value::array(items);
  }
  if (f == "map") {
    Array out;
    const Value* attr = nullptr;
    for (const auto& [k, x] : a.kw) if (k == "attribute") attr = &x;
    if (attr) {
      const Value* dflt = nullptr;
      for (const auto& [k, x] : a.kw) if (k == "default") dflt = &x;
      for (const Value& x : iterate(v)) {
        Value r = attr_path(x, to_str(*attr));
        out.push_back(!r.defined() && dflt ? *dflt : r);
      }
      return Value::array(out);
    }
    if (a.pos.empty()) throw Failure("map requires a filter argument");
    const std::string name = need_str(a.pos[0], "map");
    const CallArgs rest = shift(a, 1);
    for (const Value& x : iterate(v)) out.push_back(apply_filter(name, x, rest));
    return Value::array(out);
  }
  if (f == "select" || f == "reject" || f == "selectattr" || f == "rejectattr") {
    const bool by_attr = f == "selectattr" || f == "rejectattr";
    const bool keep_if = f == "select" || f == "selectattr";
    std::string attr;
    std::size_t at = 0;
    if (by_attr) {
      if (a.pos.empty()) throw Failure(f + " needs an attribute name");
      attr = need_str(a.pos[0], f.c_str());
      at = 1;
    }
    const bool has_test = a.pos.size() > at;
    const std::string test = has_test ? need_str(a.pos[at], f.c_str()) : "";
    const CallArgs rest = shift(a, at + 1);
    Array out;
    for (const Value& x : iterate(v)) {
      const Value item = by_attr ? attr_path(x, attr) : x;
      const bool ok = has_test ? apply_test(test, item, rest) : item.truthy();
      if (ok == keep_if) out.push_back(x);
    }
    return Value::array(out);
  }
  if (f == "batch") {
    const long long n = need_int(arg_or(a, "linecount", 0, Value::integer(1)), "batch");
    if (n <= 0) throw Failure("batch: linecount must be positive");
    const Value* fill = a.get("fill_with", 1);
    Array out, cur;
    for (const Value& x : iterate(v)) {
      cur.push_back(x);
      if (static_cast<long long>(cur.size()) == n) { out.push_back(Value::array(cur)); cur.clear(); }
    }
    if (!cur.empty()) {
      if (fill && fill->kind != Value::kNone) while (static_cast<long long>(cur.size()) < n) cur.push_back(*fill);
      out.push_back(Value::array(cur));
    }
    return Value::array(out);
  }
  if (f == "indent") {
    const Value& w = arg_or(a, "width", 0, Value::integer(4));
    const std::string ind = w.kind == Value::kString ? w.s : std::string(static_cast<std::size_t>(std::max(0LL, need_int(w, "indent"))), ' ');
    const bool first = arg_or(a, "first", 1, Value::boolean(false)).truthy();
    const bool blank = arg_or(a, "blank", 2, Value::boolean(false)).truthy();
    const std::vector<std::string> lines = splitlines(soft() + "\n", false);
    std::string rv;
    if (blank) {
      for (std::size_t k = 0; k < lines.size(); ++k) rv += (k ? "\n" + ind : "") + lines[k];
    } else {
      rv = lines.empty() ? "" : lines[0];
      for (std::size_t k = 1; k < lines.size(); ++k) rv += "\n" + (lines[k].empty() ? "" : ind + lines[k]);
    }
    return Value::str(first ? ind + rv : rv);
  }
  if (f == "center") return Value::str(pad(soft(), need_int(arg_or(a, "width", 0, Value::integer(80)), "center"), " ", 0));
  if (f == "wordcount") {
    long long n = 0;
    bool in_word = false;
    for (char c : soft()) {
      const bool w = std::isalnum(static_cast<unsigned char>(c)) || c == '_' || (static_cast<unsigned char>(c) >= 0x80);
      if (w && !in_word) ++n;
      in_word = w;
    }
    return Value::integer(n);
  }
  if (f == "format") {
    if (!a.kw.empty()) {
      Object o(a.kw.begin(), a.kw.end());
      return Value::str(percent_format(soft(), Value::object(o)));
    }
    return Value::str(percent_format(soft(), Value::tuple(a.pos)));
  }
  if (f == "e" || f == "escape" || f == "forceescape") return Value::str(html_escape(soft()));
  if (f == "attr") {
    if (a.pos.empty()) throw Failure("attr needs a name");
    const std::string name = to_str(a.pos[0]);
    // jinja2's do_attr: Python getattr only, never the dict item.
    if (v.kind == Value::kObject && !v.is_namespace && v.find(name) && !(name == "get" || name == "items" || name == "keys" || name == "values" || name == "copy"))
      return Value::undefined(fmt::format("'{}' has no attribute '{}'", type_repr(v), name));
    return get_attr(v, name);
  }
  throw Failure(fmt::format("No filter named '{}'.", f));
}

}  // namespace kvcompact::jinja
