// Jinja subset interpreter; see jinja.h.
#include "io/jinja.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cctype>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <stdexcept>
#include <variant>
#include <vector>

#include "io/error.h"
#include "io/utf8.h"

namespace kvcompact::jinja {
namespace {

// Limits that keep a hostile or broken template from exhausting the stack, memory or time (chat
// templates stay far below them): nesting depth of expressions and blocks (parse and eval), the
// work of one render (1 per node and expression evaluated, plus 1 per 64 bytes of each string
// and 1 per item of each list/dict produced), its output size, the size of one value and the
// length of range().
constexpr int kMaxDepth = 200;
constexpr long long kMaxWork = 2'000'000;
constexpr std::size_t kMaxOutputBytes = std::size_t{64} << 20;
constexpr long long kMaxRange = 1'000'000;
// Largest string and largest list/dict one expression may produce.
constexpr std::size_t kMaxStringBytes = kMaxOutputBytes;
constexpr std::size_t kMaxItems = 1'000'000;

using ojson = nlohmann::ordered_json;

// ------------------------------------------------------------------------------------------ values
struct Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

struct Value {
  enum Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject } kind = kUndefined;
  bool b = false;
  long long i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;
  bool is_namespace = false;

  static Value none() { Value v; v.kind = kNone; return v; }
  static Value boolean(bool x) { Value v; v.kind = kBool; v.b = x; return v; }
  static Value integer(long long x) { Value v; v.kind = kInt; v.i = x; return v; }
  static Value real(double x) { Value v; v.kind = kFloat; v.f = x; return v; }
  static Value str(std::string x) { Value v; v.kind = kString; v.s = std::move(x); return v; }
  static Value array(Array a = {}) { Value v; v.kind = kArray; v.arr = std::make_shared<Array>(std::move(a)); return v; }
  static Value object(Object o = {}) { Value v; v.kind = kObject; v.obj = std::make_shared<Object>(std::move(o)); return v; }

  bool is_number() const { return kind == kInt || kind == kFloat; }
  double num() const { return kind == kInt ? static_cast<double>(i) : f; }
  Value* find(const std::string& key) const {
    if (kind != kObject) return nullptr;
    for (auto& [k, v] : *obj) if (k == key) return &v;
    return nullptr;
  }
  bool truthy() const {
    switch (kind) {
      case kUndefined: case kNone: return false;
      case kBool: return b;
      case kInt: return i != 0;
      case kFloat: return f != 0;
      case kString: return !s.empty();
      case kArray: return !arr->empty();
      case kObject: return !obj->empty() || is_namespace;
    }
    return false;
  }
};

Value from_json(const ojson& j) {
  switch (j.type()) {
    case ojson::value_t::null: return Value::none();
    case ojson::value_t::boolean: return Value::boolean(j.get<bool>());
    case ojson::value_t::number_integer: case ojson::value_t::number_unsigned: return Value::integer(j.get<long long>());
    case ojson::value_t::number_float: return Value::real(j.get<double>());
    case ojson::value_t::string: return Value::str(j.get<std::string>());
    case ojson::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return Value::array(std::move(a));
    }
    case ojson::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.emplace_back(it.key(), from_json(it.value()));
      return Value::object(std::move(o));
    }
    default: return Value();
  }
}

std::string float_str(double x) {
  if (std::isfinite(x) && x == std::floor(x) && std::fabs(x) < 1e16) return fmt::format("{:.1f}", x);
  return fmt::format("{}", x);
}

/// JSON text of a string; invalid UTF-8 becomes U+FFFD (as when the reference, JavaScript, decodes
/// the bytes) instead of nlohmann's type_error.
std::string json_str(const std::string& s) { return ojson(s).dump(-1, ' ', false, ojson::error_handler_t::replace); }

std::string to_json(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: case Value::kNone: return "null";
    case Value::kBool: return v.b ? "true" : "false";
    case Value::kInt: return std::to_string(v.i);
    case Value::kFloat: return ojson(v.f).dump();
    case Value::kString: return json_str(v.s);
    case Value::kArray: {
      std::string out = "[";
      for (std::size_t k = 0; k < v.arr->size(); ++k) out += (k ? ", " : "") + to_json((*v.arr)[k]);
      return out + "]";
    }
    case Value::kObject: {
      std::string out = "{";
      for (std::size_t k = 0; k < v.obj->size(); ++k) {
        out += (k ? ", " : "") + json_str((*v.obj)[k].first) + ": " + to_json((*v.obj)[k].second);
      }
      return out + "}";
    }
  }
  return "null";
}

std::string to_string(const Value& v) {
  switch (v.kind) {
    case Value::kUndefined: return "";
    case Value::kNone: return "None";
    case Value::kBool: return v.b ? "True" : "False";
    case Value::kInt: return std::to_string(v.i);
    case Value::kFloat: return float_str(v.f);
    case Value::kString: return v.s;
    case Value::kArray: case Value::kObject: return to_json(v);
  }
  return "";
}

bool equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.num() == b.num();
  if (a.kind == Value::kBool && b.kind == Value::kBool) return a.b == b.b;
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::kUndefined: case Value::kNone: return true;
    case Value::kString: return a.s == b.s;
    case Value::kArray:
      if (a.arr->size() != b.arr->size()) return false;
      for (std::size_t k = 0; k < a.arr->size(); ++k) if (!equal((*a.arr)[k], (*b.arr)[k])) return false;
      return true;
    case Value::kObject: return a.obj == b.obj;
    default: return false;
  }
}

// White space for strip()/trim: JavaScript's (the reference trims with String.prototype.trim).
bool is_space_cp(std::uint32_t c) { return utf8::is_js_space(c); }

std::string strip_chars(const std::string& s, const Value* chars, bool left, bool right) {
  auto in_set = [&](std::uint32_t c) {
    if (!chars || chars->kind == Value::kNone || chars->kind == Value::kUndefined) return is_space_cp(c);
    std::size_t i = 0;
    while (i < chars->s.size()) if (utf8::next(chars->s, i) == c) return true;
    return false;
  };
  std::vector<std::pair<std::size_t, std::uint32_t>> cps;
  for (std::size_t i = 0; i < s.size();) { const std::size_t b = i; cps.emplace_back(b, utf8::next(s, i)); }
  std::size_t lo = 0, hi = cps.size();
  if (left) while (lo < hi && in_set(cps[lo].second)) ++lo;
  if (right) while (hi > lo && in_set(cps[hi - 1].second)) --hi;
  const std::size_t b = lo < cps.size() ? cps[lo].first : s.size();
  const std::size_t e = hi < cps.size() ? cps[hi].first : s.size();
  return s.substr(b, e - b);
}

// ------------------------------------------------------------------------------------------ lexer
enum class Tok { kText, kOpenExpr, kCloseExpr, kOpenStmt, kCloseStmt, kName, kString, kInt, kFloat, kOp, kEnd };

struct Token {
  Tok type;
  std::string text;
  int line;
};

bool js_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::string trim_end_ws(const std::string& s) {
  std::size_t e = s.size();
  while (e > 0 && js_ws(s[e - 1])) --e;
  return s.substr(0, e);
}

std::string preprocess(std::string src) {
  if (!src.empty() && src.back() == '\n') src.pop_back();
  // lstrip_blocks: spaces/tabs at a line start before "{%", "{#" or "{-".
  std::string a;
  for (std::size_t i = 0; i < src.size();) {
    if (i == 0 || src[i - 1] == '\n') {
      std::size_t j = i;
      while (j < src.size() && (src[j] == ' ' || src[j] == '\t')) ++j;
      if (j + 1 < src.size() && src[j] == '{' && (src[j + 1] == '#' || src[j + 1] == '%' || src[j + 1] == '-')) i = j;
    }
    a += src[i++];
  }
  // trim_blocks: a newline right after "%}", "#}" or "-}".
  std::string b;
  for (std::size_t i = 0; i < a.size(); ++i) {
    b += a[i];
    if (a[i] == '}' && i > 0 && (a[i - 1] == '%' || a[i - 1] == '#' || a[i - 1] == '-') && i + 1 < a.size() &&
        a[i + 1] == '\n' && b.size() >= 2) {
      ++i;
    }
  }
  return b;
}

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& name) : src_(src), name_(name) {}

  std::vector<Token> run() {
    std::vector<Token> out;
    bool in_tag = false;
    Tok close = Tok::kCloseExpr;
    while (pos_ < src_.size()) {
      if (!in_tag) {
        std::string text;
        while (pos_ < src_.size() && !(src_[pos_] == '{' && pos_ + 1 < src_.size() &&
                                      (src_[pos_ + 1] == '%' || src_[pos_ + 1] == '{' || src_[pos_ + 1] == '#'))) {
          if (src_[pos_] == '\n') ++line_;
          text += src_[pos_++];
        }
        if (!text.empty()) out.push_back({Tok::kText, text, line_});
        if (pos_ >= src_.size()) break;
        const char k = src_[pos_ + 1];
        pos_ += 2;
        const bool strip_before = pos_ < src_.size() && src_[pos_] == '-';
        if (strip_before) ++pos_;
        if (strip_before && !out.empty() && out.back().type == Tok::kText) {
          out.back().text = trim_end_ws(out.back().text);
          if (out.back().text.empty()) out.pop_back();
        }
        if (k == '#') {
          const std::size_t e = src_.find("#}", pos_);
          if (e == std::string::npos) fail("missing end of comment tag");
          for (std::size_t q = pos_; q < e; ++q) if (src_[q] == '\n') ++line_;
          const bool strip_after = e > pos_ && src_[e - 1] == '-';
          pos_ = e + 2;
          if (strip_after) skip_ws();
          continue;
        }
        out.push_back({k == '%' ? Tok::kOpenStmt : Tok::kOpenExpr, "", line_});
        close = k == '%' ? Tok::kCloseStmt : Tok::kCloseExpr;
        in_tag = true;
        continue;
      }
      skip_ws();
      if (pos_ >= src_.size()) fail("unexpected end of template inside a tag");
      const char c = src_[pos_];
      const std::string_view rest(src_.data() + pos_, src_.size() - pos_);
      const char* end_tag = close == Tok::kCloseStmt ? "%}" : "}}";
      if (rest.substr(0, 3) == std::string("-") + end_tag || rest.substr(0, 2) == end_tag) {
        const bool strip_after = c == '-';
        pos_ += strip_after ? 3 : 2;
        out.push_back({close, "", line_});
        in_tag = false;
        if (strip_after) skip_ws();
        continue;
      }
      if (c == '\'' || c == '"') {
        ++pos_;
        std::string s;
        while (true) {
          if (pos_ >= src_.size()) fail("unterminated string literal");
          char d = src_[pos_++];
          if (d == c) break;
          if (d == '\\') {
            if (pos_ >= src_.size()) fail("unterminated string literal");
            const char e = src_[pos_++];
            switch (e) {
              case 'n': s += '\n'; break;
              case 't': s += '\t'; break;
              case 'r': s += '\r'; break;
              case 'b': s += '\b'; break;
              case 'f': s += '\f'; break;
              case 'v': s += '\v'; break;
              case '\'': s += '\''; break;
              case '"': s += '"'; break;
              case '\\': s += '\\'; break;
              case 'x': case 'u': {
                const std::size_t n = e == 'x' ? 2 : 4;
                if (pos_ + n > src_.size() ||
                    !std::all_of(src_.begin() + pos_, src_.begin() + pos_ + n,
                                 [](char h) { return std::isxdigit(static_cast<unsigned char>(h)) != 0; }))
                  fail(fmt::format("bad escape '\\{}' in string literal (needs {} hex digits)", e, n));
                s += utf8::encode(static_cast<std::uint32_t>(std::stoul(src_.substr(pos_, n), nullptr, 16)));
                pos_ += n;
                break;
              }
              default: fail(fmt::format("unexpected escaped character '\\{}'", e));
            }
            continue;
          }
          if (d == '\n') ++line_;
          s += d;
        }
        out.push_back({Tok::kString, s, line_});
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        std::size_t e = pos_;
        while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && std::isdigit(static_cast<unsigned char>(src_[e + 1]))) {
          is_float = true;
          ++e;
          while (e < src_.size() && std::isdigit(static_cast<unsigned char>(src_[e]))) ++e;
        }
        out.push_back({is_float ? Tok::kFloat : Tok::kInt, src_.substr(pos_, e - pos_), line_});
        pos_ = e;
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = pos_;
        while (e < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[e])) || src_[e] == '_')) ++e;
        out.push_back({Tok::kName, src_.substr(pos_, e - pos_), line_});
        pos_ = e;
        continue;
      }
      static const char* ops[] = {"//", "==", "!=", "<=", ">=", "**", "+", "-", "*", "/", "%", "~", "<", ">", "(", ")",
                                  "[", "]", "{", "}", ",", ".", ":", "|", "="};
      bool found = false;
      for (const char* op : ops) {
        if (rest.substr(0, std::strlen(op)) == op) {
          out.push_back({Tok::kOp, op, line_});
          pos_ += std::strlen(op);
          found = true;
          break;
        }
      }
      if (!found) fail(fmt::format("unexpected character '{}'", c));
    }
    if (in_tag) fail("unexpected end of template inside a tag");
    out.push_back({Tok::kEnd, "", line_});
    return out;
  }

 private:
  void skip_ws() {
    while (pos_ < src_.size() && js_ws(src_[pos_])) {
      if (src_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: line {}: {}", name_, line_, what)); }

  const std::string& src_;
  const std::string& name_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// ------------------------------------------------------------------------------------------ AST
struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum Kind { kLit, kName, kList, kDict, kAttr, kIndex, kSlice, kCall, kFilter, kTest, kUnary, kBinary, kTernary } kind;
  int line = 0;
  Value lit;
  std::string name;                    // name / attribute / filter / test / operator
  std::vector<ExprP> args;             // operands, list items, call args, dict k/v pairs
  std::vector<std::pair<std::string, ExprP>> kwargs;
  bool negated = false;                // test: is not
};

struct Node;
using NodeP = std::shared_ptr<Node>;
struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet } kind;
  int line = 0;
  std::string text;
  std::vector<std::pair<ExprP, std::vector<NodeP>>> branches;  // if: (cond or null for else, body)
  std::vector<std::string> targets;                            // for: loop variables; set: name [, attr]
  ExprP expr, filter;                                          // output/set value; for iterable; for filter
  std::vector<NodeP> body, else_body;
};

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string& name) : t_(std::move(toks)), name_(name) {}

  std::vector<NodeP> parse_all() {
    std::vector<NodeP> out = parse_block({});
    if (peek().type != Tok::kEnd) fail("unexpected tag");
    return out;
  }

 private:
  const Token& peek(int k = 0) const { return t_[std::min(p_ + static_cast<std::size_t>(k), t_.size() - 1)]; }
  const Token& next() { return t_[std::min(p_++, t_.size() - 1)]; }
  bool is_op(const char* op, int k = 0) const { return peek(k).type == Tok::kOp && peek(k).text == op; }
  bool is_name(const char* n, int k = 0) const { return peek(k).type == Tok::kName && peek(k).text == n; }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(fmt::format("expected '{}'", op));
    ++p_;
  }
  void expect(Tok type, const char* what) {
    if (peek().type != type) fail(fmt::format("expected {}", what));
    ++p_;
  }
  std::string expect_name() {
    if (peek().type != Tok::kName) fail("expected a name");
    return next().text;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw Error(fmt::format("{}: line {}: {}", name_, peek().line, what));
  }
  /// Counts one level of nesting while alive; fails beyond kMaxDepth.
  struct Nest {
    explicit Nest(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxDepth) p_.fail(fmt::format("nested more than {} levels deep", kMaxDepth));
    }
    ~Nest() { --p_.depth_; }
    Parser& p_;
  };

  /// Parses nodes until a statement whose keyword is in `stops` (left unconsumed, after "{%").
  std::vector<NodeP> parse_block(const std::vector<std::string>& stops) {
    const Nest nest(*this);
    std::vector<NodeP> out;
    while (peek().type != Tok::kEnd) {
      const Token& tk = peek();
      if (tk.type == Tok::kText) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kText;
        n->text = tk.text;
        out.push_back(n);
        ++p_;
      } else if (tk.type == Tok::kOpenExpr) {
        ++p_;
        auto n = std::make_shared<Node>();
        n->kind = Node::kOutput;
        n->line = tk.line;
        n->expr = parse_expr();
        expect(Tok::kCloseExpr, "'}}'");
        out.push_back(n);
      } else if (tk.type == Tok::kOpenStmt) {
        const Token& kw = peek(1);
        if (kw.type != Tok::kName) { ++p_; fail("expected a statement keyword"); }
        if (std::find(stops.begin(), stops.end(), kw.text) != stops.end()) return out;
        p_ += 2;
        out.push_back(parse_statement(kw.text, kw.line));
      } else {
        fail("unexpected token");
      }
    }
    if (!stops.empty()) fail(fmt::format("missing {{% {} %}}", stops.back()));
    return out;
  }

  NodeP parse_statement(const std::string& kw, int line) {
    auto n = std::make_shared<Node>();
    n->line = line;
    if (kw == "if") {
      n->kind = Node::kIf;
      ExprP cond = parse_expr();
      expect(Tok::kCloseStmt, "'%}'");
      while (true) {
        std::vector<NodeP> body = parse_block({"elif", "else", "endif"});
        n->branches.emplace_back(cond, std::move(body));
        ++p_;  // {%
        const std::string k = next().text;
        if (k == "elif") {
          cond = parse_expr();
          expect(Tok::kCloseStmt, "'%}'");
        } else if (k == "else") {
          expect(Tok::kCloseStmt, "'%}'");
          n->branches.emplace_back(nullptr, parse_block({"endif"}));
          p_ += 2;
          expect(Tok::kCloseStmt, "'%}'");
          break;
        } else {
          expect(Tok::kCloseStmt, "'%}'");
          break;
        }
      }
    } else if (kw == "for") {
      n->kind = Node::kFor;
      n->targets.push_back(expect_name());
      while (is_op(",")) { ++p_; n->targets.push_back(expect_name()); }
      if (!is_name("in")) fail("expected 'in'");
      ++p_;
      n->expr = parse_or_expr_no_ternary();
      if (is_name("if")) { ++p_; n->filter = parse_or_expr_no_ternary(); }
      if (is_name("recursive")) fail("recursive loops are not supported");
      expect(Tok::kCloseStmt, "'%}'");
      n->body = parse_block({"else", "endfor"});
      ++p_;
      if (next().text == "else") {
        expect(Tok::kCloseStmt, "'%}'");
        n->else_body = parse_block({"endfor"});
        p_ += 2;
      }
      expect(Tok::kCloseStmt, "'%}'");
    } else if (kw == "set") {
      n->kind = Node::kSet;
      n->targets.push_back(expect_name());
      if (is_op(".")) { ++p_; n->targets.push_back(expect_name()); }
      if (!is_op("=")) fail("block {% set %} is not supported; use {% set x = ... %}");
      ++p_;
      n->expr = parse_expr();
      expect(Tok::kCloseStmt, "'%}'");
    } else {
      fail(fmt::format("unsupported statement '{}'", kw));
    }
    return n;
  }

  ExprP make(Expr::Kind k, int line) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }
  ExprP binary(const std::string& op, ExprP a, ExprP b, int line) {
    ExprP e = make(Expr::kBinary, line);
    e->name = op;
    e->args = {std::move(a), std::move(b)};
    return e;
  }

  ExprP parse_expr() {
    const Nest nest(*this);
    ExprP e = parse_or_expr_no_ternary();
    if (is_name("if")) {
      const int line = peek().line;
      ++p_;
      ExprP cond = parse_or_expr_no_ternary();
      ExprP other;
      if (is_name("else")) { ++p_; other = parse_expr(); }
      ExprP t = make(Expr::kTernary, line);
      t->args = {cond, e, other};
      return t;
    }
    return e;
  }
  ExprP parse_or_expr_no_ternary() {
    ExprP e = parse_and();
    while (is_name("or")) { const int l = next().line; e = binary("or", e, parse_and(), l); }
    return e;
  }
  ExprP parse_and() {
    ExprP e = parse_not();
    while (is_name("and")) { const int l = next().line; e = binary("and", e, parse_not(), l); }
    return e;
  }
  ExprP parse_not() {
    const Nest nest(*this);
    if (is_name("not")) {
      const int l = next().line;
      ExprP e = make(Expr::kUnary, l);
      e->name = "not";
      e->args = {parse_not()};
      return e;
    }
    return parse_compare();
  }
  ExprP parse_compare() {
    ExprP e = parse_concat();
    while (true) {
      const int l = peek().line;
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        const std::string op = next().text;
        e = binary(op, e, parse_concat(), l);
      } else if (is_name("in")) {
        ++p_;
        e = binary("in", e, parse_concat(), l);
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        e = binary("not in", e, parse_concat(), l);
      } else {
        return e;
      }
    }
  }
  ExprP parse_concat() {
    ExprP e = parse_add();
    while (is_op("~")) { const int l = next().line; e = binary("~", e, parse_add(), l); }
    return e;
  }
  ExprP parse_add() {
    ExprP e = parse_mul();
    while (is_op("+") || is_op("-")) { const Token& t = next(); e = binary(t.text, e, parse_mul(), t.line); }
    return e;
  }
  ExprP parse_mul() {
    ExprP e = parse_unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& t = next();
      e = binary(t.text, e, parse_unary(), t.line);
    }
    return e;
  }
  ExprP parse_unary() {
    const Nest nest(*this);
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      ExprP e = make(Expr::kUnary, t.line);
      e->name = t.text;
      e->args = {parse_unary()};
      return e;
    }
    return parse_filters(parse_postfix(parse_primary()));
  }
  void parse_call_args(ExprP& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().type == Tok::kName && is_op("=", 1)) {
        const std::string k = next().text;
        ++p_;
        e->kwargs.emplace_back(k, parse_expr());
      } else {
        e->args.push_back(parse_expr());
      }
      if (!is_op(",")) break;
      ++p_;
    }
    expect_op(")");
  }
  ExprP parse_filters(ExprP e) {
    while (true) {
      if (is_op("|")) {
        const int l = next().line;
        ExprP f = make(Expr::kFilter, l);
        f->name = expect_name();
        f->args.push_back(e);
        if (is_op("(")) parse_call_args(f);
        e = f;
      } else if (is_name("is")) {
        const int l = next().line;
        ExprP t = make(Expr::kTest, l);
        if (is_name("not")) { ++p_; t->negated = true; }
        t->name = expect_name();
        t->args.push_back(e);
        if (is_op("(")) parse_call_args(t);
        else if (peek().type == Tok::kString || peek().type == Tok::kInt || peek().type == Tok::kFloat) t->args.push_back(parse_primary());
        e = t;
      } else {
        return e;
      }
    }
  }
  ExprP parse_postfix(ExprP e) {
    while (true) {
      const int l = peek().line;
      if (is_op(".")) {
        ++p_;
        ExprP a = make(Expr::kAttr, l);
        a->name = expect_name();
        a->args = {e};
        e = a;
      } else if (is_op("[")) {
        ++p_;
        ExprP parts[3];
        int colons = 0;
        while (!is_op("]")) {
          if (is_op(":")) { ++p_; if (++colons > 2) fail("bad slice"); continue; }
          parts[colons] = parse_expr();
        }
        ++p_;
        if (colons == 0) {
          if (!parts[0]) fail("empty subscript");
          ExprP ix = make(Expr::kIndex, l);
          ix->args = {e, parts[0]};
          e = ix;
        } else {
          ExprP s = make(Expr::kSlice, l);
          s->args = {e, parts[0], parts[1], parts[2]};
          e = s;
        }
      } else if (is_op("(")) {
        ExprP c = make(Expr::kCall, l);
        c->name = "";
        ExprP callee = e;
        parse_call_args(c);
        c->args.insert(c->args.begin(), callee);
        e = c;
      } else {
        return e;
      }
    }
  }
  ExprP parse_primary() {
    const Token& t = next();
    switch (t.type) {
      case Tok::kString: {
        std::string s = t.text;
        while (peek().type == Tok::kString) s += next().text;  // adjacent literals concatenate
        ExprP e = make(Expr::kLit, t.line);
        e->lit = Value::str(s);
        return e;
      }
      case Tok::kInt:
      case Tok::kFloat: {
        ExprP e = make(Expr::kLit, t.line);
        try {
          e->lit = t.type == Tok::kInt ? Value::integer(std::stoll(t.text)) : Value::real(std::stod(t.text));
        } catch (const std::logic_error&) {  // std::out_of_range (std::invalid_argument cannot occur)
          fail(fmt::format("number {} is out of range", t.text));
        }
        return e;
      }
      case Tok::kName: {
        ExprP e = make(Expr::kLit, t.line);
        if (t.text == "true" || t.text == "True") { e->lit = Value::boolean(true); return e; }
        if (t.text == "false" || t.text == "False") { e->lit = Value::boolean(false); return e; }
        if (t.text == "none" || t.text == "None") { e->lit = Value::none(); return e; }
        e->kind = Expr::kName;
        e->name = t.text;
        return e;
      }
      case Tok::kOp: {
        if (t.text == "(") {
          ExprP e = parse_expr();
          if (is_op(",")) {  // tuple -> list
            ExprP l = make(Expr::kList, t.line);
            l->args.push_back(e);
            while (is_op(",")) { ++p_; if (is_op(")")) break; l->args.push_back(parse_expr()); }
            e = l;
          }
          expect_op(")");
          return e;
        }
        if (t.text == "[") {
          ExprP l = make(Expr::kList, t.line);
          while (!is_op("]")) {
            l->args.push_back(parse_expr());
            if (!is_op(",")) break;
            ++p_;
          }
          expect_op("]");
          return l;
        }
        if (t.text == "{") {
          ExprP d = make(Expr::kDict, t.line);
          while (!is_op("}")) {
            d->args.push_back(parse_expr());
            expect_op(":");
            d->args.push_back(parse_expr());
            if (!is_op(",")) break;
            ++p_;
          }
          expect_op("}");
          return d;
        }
        break;
      }
      default: break;
    }
    --p_;
    fail(t.type == Tok::kEnd ? "unexpected end of template" : fmt::format("unexpected '{}'", t.text));
  }

  std::vector<Token> t_;
  std::size_t p_ = 0;
  int depth_ = 0;
  const std::string& name_;
};

// ------------------------------------------------------------------------------------------ runtime
struct Scope {
  std::vector<std::map<std::string, Value>> frames;
  Value* find(const std::string& n) {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      auto f = it->find(n);
      if (f != it->end()) return &f->second;
    }
    return nullptr;
  }
};

class Renderer {
 public:
  explicit Renderer(const std::string& name) : name_(name) {}

  void run(const std::vector<NodeP>& nodes, Scope& sc, std::string& out) {
    for (const NodeP& n : nodes) exec(*n, sc, out);
  }

 private:
  [[noreturn]] void fail(int line, const std::string& what) const {
    throw Error(fmt::format("{}: line {}: {}", name_, line, what));
  }

  /// Adds `units` to the work of this render; fails beyond kMaxWork.
  void work(long long units, int line) {
    work_ += units;
    if (work_ > kMaxWork) {
      fail(line, fmt::format("the template needs more than {} evaluation steps (an endless or huge loop?)", kMaxWork));
    }
  }
  static long long size_units(const Value& v) {
    if (v.kind == Value::kString) return static_cast<long long>(v.s.size() / 64);
    if (v.kind == Value::kArray) return static_cast<long long>(v.arr->size());
    if (v.kind == Value::kObject) return static_cast<long long>(v.obj->size());
    return 0;
  }

  void exec(const Node& n, Scope& sc, std::string& out) {
    work(1, n.line);
    exec_node(n, sc, out);
    if (out.size() > kMaxOutputBytes) fail(n.line, fmt::format("output exceeds {} bytes", kMaxOutputBytes));
  }

  void exec_node(const Node& n, Scope& sc, std::string& out) {
    switch (n.kind) {
      case Node::kText: out += n.text; break;
      case Node::kOutput: out += to_string(eval(*n.expr, sc)); break;
      case Node::kIf:
        for (const auto& [cond, body] : n.branches) {
          if (!cond || eval(*cond, sc).truthy()) { run(body, sc, out); break; }
        }
        break;
      case Node::kSet: {
        Value v = eval(*n.expr, sc);
        if (n.targets.size() == 1) {
          sc.frames.back()[n.targets[0]] = std::move(v);
        } else {
          Value* ns = sc.find(n.targets[0]);
          if (!ns || ns->kind != Value::kObject || !ns->is_namespace) {
            fail(n.line, fmt::format("'{}' is not a namespace", n.targets[0]));
          }
          if (Value* slot = ns->find(n.targets[1])) *slot = std::move(v);
          else ns->obj->emplace_back(n.targets[1], std::move(v));
        }
        break;
      }
      case Node::kFor: {
        Value it = eval(*n.expr, sc);
        Array items;
        if (it.kind == Value::kArray) items = *it.arr;
        else if (it.kind == Value::kObject) for (auto& [k, v] : *it.obj) items.push_back(Value::str(k));
        else if (it.kind == Value::kString) {
          for (std::size_t i = 0; i < it.s.size();) { const std::size_t b = i; utf8::next(it.s, i); items.push_back(Value::str(it.s.substr(b, i - b))); }
        } else if (it.kind != Value::kUndefined && it.kind != Value::kNone) fail(n.line, "for loop over a non-iterable value");
        if (n.filter) {
          Array kept;
          for (const Value& v : items) {
            sc.frames.emplace_back();
            bind(n, v, sc);
            if (eval(*n.filter, sc).truthy()) kept.push_back(v);
            sc.frames.pop_back();
          }
          items = std::move(kept);
        }
        if (items.empty()) { run(n.else_body, sc, out); break; }
        const long long len = static_cast<long long>(items.size());
        for (long long k = 0; k < len; ++k) {
          work(1, n.line);  // an iteration costs work even when its body is empty
          sc.frames.emplace_back();
          bind(n, items[static_cast<std::size_t>(k)], sc);
          sc.frames.back()["loop"] = Value::object({{"index0", Value::integer(k)},
                                                    {"index", Value::integer(k + 1)},
                                                    {"first", Value::boolean(k == 0)},
                                                    {"last", Value::boolean(k == len - 1)},
                                                    {"length", Value::integer(len)},
                                                    {"revindex", Value::integer(len - k)},
                                                    {"revindex0", Value::integer(len - k - 1)},
                                                    {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value()},
                                                    {"nextitem", k + 1 < len ? items[static_cast<std::size_t>(k + 1)] : Value()}});
          run(n.body, sc, out);
          sc.frames.pop_back();
        }
        break;
      }
    }
  }

  void bind(const Node& n, const Value& v, Scope& sc) {
    if (n.targets.size() == 1) {
      sc.frames.back()[n.targets[0]] = v;
      return;
    }
    if (v.kind != Value::kArray || v.arr->size() != n.targets.size()) fail(n.line, "cannot unpack loop item");
    for (std::size_t k = 0; k < n.targets.size(); ++k) sc.frames.back()[n.targets[k]] = (*v.arr)[k];
  }

  static long long py_index(long long i, long long n) { return i < 0 ? i + n : i; }

  /// eval_expr within the depth and work limits.
  Value eval(const Expr& e, Scope& sc) {
    if (++depth_ > kMaxDepth) fail(e.line, fmt::format("expressions nested more than {} levels deep", kMaxDepth));
    struct Leave {
      int& d;
      ~Leave() { --d; }
    } leave{depth_};
    Value v = eval_expr(e, sc);
    if (v.kind == Value::kString && v.s.size() > kMaxStringBytes) {
      fail(e.line, fmt::format("a string exceeds {} bytes", kMaxStringBytes));
    }
    if ((v.kind == Value::kArray && v.arr->size() > kMaxItems) || (v.kind == Value::kObject && v.obj->size() > kMaxItems)) {
      fail(e.line, fmt::format("a list or dict exceeds {} items", kMaxItems));
    }
    work(1 + size_units(v), e.line);
    return v;
  }

  Value eval_expr(const Expr& e, Scope& sc) {
    switch (e.kind) {
      case Expr::kLit: return e.lit;
      case Expr::kName: {
        Value* v = sc.find(e.name);
        return v ? *v : Value();
      }
      case Expr::kList: {
        Array a;
        for (const ExprP& x : e.args) a.push_back(eval(*x, sc));
        return Value::array(std::move(a));
      }
      case Expr::kDict: {
        Object o;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k], sc);
          if (key.kind != Value::kString) fail(e.line, "dict keys must be strings");
          o.emplace_back(key.s, eval(*e.args[k + 1], sc));
        }
        return Value::object(std::move(o));
      }
      case Expr::kAttr: {
        Value base = eval(*e.args[0], sc);
        if (Value* v = base.find(e.name)) return *v;
        return Value();
      }
      case Expr::kIndex: {
        Value base = eval(*e.args[0], sc);
        Value ix = eval(*e.args[1], sc);
        if (base.kind == Value::kObject && ix.kind == Value::kString) {
          if (Value* v = base.find(ix.s)) return *v;
          return Value();
        }
        if (ix.kind == Value::kInt && base.kind == Value::kArray) {
          const long long n = static_cast<long long>(base.arr->size()), i = py_index(ix.i, n);
          return (i >= 0 && i < n) ? (*base.arr)[static_cast<std::size_t>(i)] : Value();
        }
        if (ix.kind == Value::kInt && base.kind == Value::kString) {
          std::vector<std::string> chars = chars_of(base.s);
          const long long n = static_cast<long long>(chars.size()), i = py_index(ix.i, n);
          return (i >= 0 && i < n) ? Value::str(chars[static_cast<std::size_t>(i)]) : Value();
        }
        return Value();
      }
      case Expr::kSlice: return slice(e, sc);
      case Expr::kCall: return call(e, sc);
      case Expr::kFilter: return filter(e, sc);
      case Expr::kTest: return Value::boolean(test(e, sc) != e.negated);
      case Expr::kUnary: {
        Value v = eval(*e.args[0], sc);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.kind == Value::kInt) {
          if (e.name == "-" && v.i == std::numeric_limits<long long>::min()) fail(e.line, "integer overflow in unary -");
          return Value::integer(e.name == "-" ? -v.i : v.i);
        }
        if (v.kind == Value::kFloat) return Value::real(e.name == "-" ? -v.f : v.f);
        fail(e.line, "unary " + e.name + " on a non-number");
      }
      case Expr::kTernary: {
        if (eval(*e.args[0], sc).truthy()) return eval(*e.args[1], sc);
        return e.args[2] ? eval(*e.args[2], sc) : Value();
      }
      case Expr::kBinary: return binary(e, sc);
    }
    return Value();
  }

  static std::vector<std::string> chars_of(const std::string& s) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < s.size();) { const std::size_t b = i; utf8::next(s, i); out.push_back(s.substr(b, i - b)); }
    return out;
  }

  Value slice(const Expr& e, Scope& sc) {
    Value base = eval(*e.args[0], sc);
    auto opt = [&](const ExprP& x) -> std::optional<long long> {
      if (!x) return std::nullopt;
      Value v = eval(*x, sc);
      if (v.kind == Value::kNone) return std::nullopt;
      if (v.kind != Value::kInt) fail(e.line, "slice bounds must be integers");
      return v.i;
    };
    const auto start = opt(e.args[1]), stop = opt(e.args[2]), stepo = opt(e.args[3]);
    const long long step = stepo.value_or(1);
    if (step == 0) fail(e.line, "slice step cannot be zero");
    std::vector<Value> items;
    const bool is_str = base.kind == Value::kString;
    if (is_str) for (auto& c : chars_of(base.s)) items.push_back(Value::str(c));
    else if (base.kind == Value::kArray) items = *base.arr;
    else fail(e.line, "slice of a value that is not a list or string");
    const long long n = static_cast<long long>(items.size());
    auto clamp = [&](std::optional<long long> v, long long dflt) {
      if (!v) return dflt;
      long long x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp(x, 0LL, n);
      return std::clamp(x, -1LL, n - 1);
    };
    const long long b = clamp(start, step > 0 ? 0 : n - 1), en = clamp(stop, step > 0 ? n : -1);
    Array out;
    for (long long k = b; step > 0 ? k < en : k > en; k += step) out.push_back(items[static_cast<std::size_t>(k)]);
    if (is_str) {
      std::string s;
      for (auto& v : out) s += v.s;
      return Value::str(s);
    }
    return Value::array(std::move(out));
  }

  Value binary(const Expr& e, Scope& sc) {
    const std::string& op = e.name;
    if (op == "and") { Value a = eval(*e.args[0], sc); return a.truthy() ? eval(*e.args[1], sc) : a; }
    if (op == "or") { Value a = eval(*e.args[0], sc); return a.truthy() ? a : eval(*e.args[1], sc); }
    Value a = eval(*e.args[0], sc), b = eval(*e.args[1], sc);
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "~") return Value::str(to_string(a) + to_string(b));
    if (op == "in" || op == "not in") {
      bool r = false;
      if (b.kind == Value::kString && a.kind == Value::kString) r = b.s.find(a.s) != std::string::npos;
      else if (b.kind == Value::kArray) r = std::any_of(b.arr->begin(), b.arr->end(), [&](const Value& x) { return equal(a, x); });
      else if (b.kind == Value::kObject && a.kind == Value::kString) r = b.find(a.s) != nullptr;
      else if (b.kind == Value::kUndefined || b.kind == Value::kNone) r = false;
      else fail(e.line, "'in' needs a string, list or dict on the right");
      return Value::boolean(op == "in" ? r : !r);
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c;
      if (a.is_number() && b.is_number()) c = a.num() < b.num() ? -1 : (a.num() > b.num() ? 1 : 0);
      else if (a.kind == Value::kString && b.kind == Value::kString) c = a.s.compare(b.s) < 0 ? -1 : (a.s == b.s ? 0 : 1);
      else fail(e.line, "cannot compare these values with " + op);
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (op == "+") {
      if (a.kind == Value::kString && b.kind == Value::kString) return Value::str(a.s + b.s);
      if (a.kind == Value::kArray && b.kind == Value::kArray) {
        Array r = *a.arr;
        r.insert(r.end(), b.arr->begin(), b.arr->end());
        return Value::array(std::move(r));
      }
      if (a.kind == Value::kString || b.kind == Value::kString) {
        if (a.kind == Value::kUndefined || b.kind == Value::kUndefined) return Value::str(to_string(a) + to_string(b));
        fail(e.line, "cannot add a string and a non-string");
      }
    }
    if (a.kind == Value::kBool) a = Value::integer(a.b);
    if (b.kind == Value::kBool) b = Value::integer(b.b);
    if (!a.is_number() || !b.is_number()) fail(e.line, "operator " + op + " needs numbers");
    const bool ints = a.kind == Value::kInt && b.kind == Value::kInt;
    if (ints && (op == "+" || op == "-" || op == "*")) {
      long long r = 0;
      const bool overflow = op == "+" ? __builtin_add_overflow(a.i, b.i, &r)
                            : op == "-" ? __builtin_sub_overflow(a.i, b.i, &r)
                                        : __builtin_mul_overflow(a.i, b.i, &r);
      if (overflow) fail(e.line, "integer overflow in " + op);
      return Value::integer(r);
    }
    if (op == "+") return Value::real(a.num() + b.num());
    if (op == "-") return Value::real(a.num() - b.num());
    if (op == "*") return Value::real(a.num() * b.num());
    if (op == "/") { if (b.num() == 0) fail(e.line, "division by zero"); return Value::real(a.num() / b.num()); }
    if (op == "//" || op == "%") {
      if (b.num() == 0) fail(e.line, "division by zero");
      if (ints) {
        if (a.i == std::numeric_limits<long long>::min() && b.i == -1) fail(e.line, "integer overflow in " + op);
        long long q = a.i / b.i, r = a.i % b.i;
        if (r != 0 && ((r < 0) != (b.i < 0))) { --q; r += b.i; }
        return Value::integer(op == "//" ? q : r);
      }
      const double q = std::floor(a.num() / b.num());
      return Value::real(op == "//" ? q : a.num() - q * b.num());
    }
    fail(e.line, "unknown operator " + op);
  }

  bool test(const Expr& e, Scope& sc) {
    Value v = eval(*e.args[0], sc);
    const std::string& t = e.name;
    if (t == "defined") return v.kind != Value::kUndefined;
    if (t == "undefined") return v.kind == Value::kUndefined;
    if (t == "none") return v.kind == Value::kNone;
    if (t == "string") return v.kind == Value::kString;
    if (t == "number") return v.is_number();
    if (t == "integer") return v.kind == Value::kInt;
    if (t == "float") return v.kind == Value::kFloat;
    if (t == "boolean") return v.kind == Value::kBool;
    if (t == "true") return v.kind == Value::kBool && v.b;
    if (t == "false") return v.kind == Value::kBool && !v.b;
    if (t == "mapping") return v.kind == Value::kObject;
    if (t == "sequence" || t == "iterable") return v.kind == Value::kArray || v.kind == Value::kString || (t == "iterable" && v.kind == Value::kObject);
    if (t == "odd" || t == "even") {
      if (v.kind != Value::kInt) fail(e.line, "test " + t + " needs an integer");
      return (v.i % 2 != 0) == (t == "odd");
    }
    if (t == "eq" || t == "equalto" || t == "sameas") {
      if (e.args.size() < 2) fail(e.line, "test " + t + " needs an argument");
      return equal(v, eval(*e.args[1], sc));
    }
    fail(e.line, "unknown test '" + t + "'");
  }

  std::vector<Value> eval_args(const Expr& e, Scope& sc, std::size_t from) {
    std::vector<Value> out;
    for (std::size_t k = from; k < e.args.size(); ++k) out.push_back(eval(*e.args[k], sc));
    return out;
  }

  Value filter(const Expr& e, Scope& sc) {
    Value v = eval(*e.args[0], sc);
    const std::vector<Value> a = eval_args(e, sc, 1);
    const std::string& f = e.name;
    auto need_string = [&] { if (v.kind != Value::kString) fail(e.line, "filter " + f + " needs a string"); };
    if (f == "safe") return v;
    if (f == "tojson") return Value::str(to_json(v));
    if (f == "string") return Value::str(to_string(v));
    if (f == "trim") { need_string(); return Value::str(strip_chars(v.s, nullptr, true, true)); }
    if (f == "upper" || f == "lower") {
      need_string();
      std::string s = v.s;
      for (char& c : s) c = static_cast<char>(f == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      return Value::str(s);
    }
    if (f == "capitalize") {
      need_string();
      std::string s = v.s;
      if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));  // rest unchanged, as the reference
      return Value::str(s);
    }
    if (f == "title") return string_method(v, "title", a, e.line);
    if (f == "replace") return string_method(v, "replace", a, e.line);
    if (f == "length" || f == "count") {
      if (v.kind == Value::kString) return Value::integer(static_cast<long long>(chars_of(v.s).size()));
      if (v.kind == Value::kArray) return Value::integer(static_cast<long long>(v.arr->size()));
      if (v.kind == Value::kObject) return Value::integer(static_cast<long long>(v.obj->size()));
      fail(e.line, "filter length needs a string, list or dict");
    }
    if (f == "default" || f == "d") {
      const bool boolean = (a.size() > 1 && a[1].truthy()) ||
                           std::any_of(e.kwargs.begin(), e.kwargs.end(), [&](const auto& kw) { return kw.first == "boolean" && eval(*kw.second, sc).truthy(); });
      const bool use_default = boolean ? !v.truthy() : v.kind == Value::kUndefined;
      return use_default ? (a.empty() ? Value::str("") : a[0]) : v;
    }
    if (f == "first" || f == "last") {
      if (v.kind == Value::kArray) return v.arr->empty() ? Value() : (f == "first" ? v.arr->front() : v.arr->back());
      if (v.kind == Value::kString) { auto c = chars_of(v.s); return c.empty() ? Value() : Value::str(f == "first" ? c.front() : c.back()); }
      fail(e.line, "filter " + f + " needs a list or string");
    }
    if (f == "join") {
      if (v.kind != Value::kArray) fail(e.line, "filter join needs a list");
      const std::string sep = a.empty() ? "" : to_string(a[0]);
      std::string s;
      for (std::size_t k = 0; k < v.arr->size(); ++k) {
        s += (k ? sep : "") + to_string((*v.arr)[k]);
        if (s.size() > kMaxStringBytes) fail(e.line, fmt::format("a string exceeds {} bytes", kMaxStringBytes));
      }
      return Value::str(s);
    }
    if (f == "list") {
      if (v.kind == Value::kArray) return v;
      if (v.kind == Value::kString) { Array r; for (auto& c : chars_of(v.s)) r.push_back(Value::str(c)); return Value::array(r); }
      fail(e.line, "filter list needs a list or string");
    }
    if (f == "reverse") {
      if (v.kind == Value::kArray) { Array r(v.arr->rbegin(), v.arr->rend()); return Value::array(r); }
      if (v.kind == Value::kString) { auto c = chars_of(v.s); std::string s; for (auto it = c.rbegin(); it != c.rend(); ++it) s += *it; return Value::str(s); }
      fail(e.line, "filter reverse needs a list or string");
    }
    if (f == "items") return string_method(v, "items", a, e.line);
    if (f == "int") {
      if (v.kind == Value::kInt) return v;
      if (v.kind == Value::kFloat) return Value::integer(static_cast<long long>(v.f));
      if (v.kind == Value::kString) { try { return Value::integer(std::stoll(v.s)); } catch (...) { return Value::integer(0); } }
      return Value::integer(0);
    }
    fail(e.line, "unknown filter '" + f + "'");
  }

  Value string_method(const Value& v, const std::string& m, const std::vector<Value>& a, int line) {
    if (v.kind == Value::kObject) {
      if (m == "get") {
        if (a.empty()) fail(line, "get() needs a key");
        if (Value* x = v.find(to_string(a[0]))) return *x;
        return a.size() > 1 ? a[1] : Value::none();
      }
      if (m == "items" || m == "keys" || m == "values") {
        Array r;
        for (auto& [k, x] : *v.obj) {
          if (m == "items") r.push_back(Value::array({Value::str(k), x}));
          else r.push_back(m == "keys" ? Value::str(k) : x);
        }
        return Value::array(r);
      }
      fail(line, "unknown dict method '" + m + "'");
    }
    if (v.kind != Value::kString) fail(line, "method '" + m + "' called on a value that is not a string");
    const std::string& s = v.s;
    auto arg_str = [&](std::size_t k) {
      if (k >= a.size() || a[k].kind != Value::kString) fail(line, m + "() needs a string argument");
      return a[k].s;
    };
    if (m == "startswith" || m == "endswith") {
      std::vector<std::string> opts;
      if (!a.empty() && a[0].kind == Value::kArray) for (auto& x : *a[0].arr) opts.push_back(x.s);
      else opts.push_back(arg_str(0));
      for (const auto& o : opts) {
        if (m == "startswith" ? s.compare(0, o.size(), o) == 0 && s.size() >= o.size()
                              : s.size() >= o.size() && s.compare(s.size() - o.size(), o.size(), o) == 0) return Value::boolean(true);
      }
      return Value::boolean(false);
    }
    // Like @huggingface/jinja, strip/lstrip/rstrip ignore a `chars` argument and remove white
    // space (Python would remove only the given characters).
    if (m == "strip") return Value::str(strip_chars(s, nullptr, true, true));
    if (m == "lstrip") return Value::str(strip_chars(s, nullptr, true, false));
    if (m == "rstrip") return Value::str(strip_chars(s, nullptr, false, true));
    if (m == "upper" || m == "lower") {
      std::string r = s;
      for (char& c : r) c = static_cast<char>(m == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      return Value::str(r);
    }
    if (m == "title") {
      std::string r = s;
      bool start = true;
      for (char& c : r) {
        const bool alpha = std::isalpha(static_cast<unsigned char>(c));
        c = static_cast<char>(alpha ? (start ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c))) : c);
        start = !alpha;
      }
      return Value::str(r);
    }
    if (m == "replace") {
      const std::string from = arg_str(0), to = arg_str(1);
      std::string r;
      if (from.empty()) return Value::str(s);
      std::size_t pos = 0;
      for (std::size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + from.size()) {
        r.append(s, pos, f - pos);
        r += to;
        if (r.size() > kMaxStringBytes) fail(line, fmt::format("a string exceeds {} bytes", kMaxStringBytes));
      }
      r.append(s, pos);
      return Value::str(r);
    }
    if (m == "split") {
      Array r;
      if (a.empty() || a[0].kind == Value::kNone) {  // split on runs of white space
        std::string cur;
        for (char c : s) {
          if (js_ws(c)) { if (!cur.empty()) r.push_back(Value::str(cur)); cur.clear(); }
          else cur += c;
        }
        if (!cur.empty()) r.push_back(Value::str(cur));
        return Value::array(r);
      }
      const std::string sep = arg_str(0);
      if (sep.empty()) fail(line, "split() separator is empty");
      std::size_t pos = 0;
      for (std::size_t f; (f = s.find(sep, pos)) != std::string::npos; pos = f + sep.size()) r.push_back(Value::str(s.substr(pos, f - pos)));
      r.push_back(Value::str(s.substr(pos)));
      return Value::array(r);
    }
    fail(line, "unknown string method '" + m + "'");
  }

  Value call(const Expr& e, Scope& sc) {
    const Expr& callee = *e.args[0];
    const std::vector<Value> a = eval_args(e, sc, 1);
    if (callee.kind == Expr::kAttr) {
      Value base = eval(*callee.args[0], sc);
      return string_method(base, callee.name, a, e.line);
    }
    if (callee.kind != Expr::kName) fail(e.line, "call of something that is not a function");
    const std::string& fn = callee.name;
    if (fn == "raise_exception") {
      throw Error(fmt::format("{}: raise_exception: {}", name_, a.empty() ? "" : to_string(a[0])));
    }
    if (fn == "namespace") {
      Value ns = Value::object();
      ns.is_namespace = true;
      for (const auto& [k, x] : e.kwargs) ns.obj->emplace_back(k, eval(*x, sc));
      return ns;
    }
    if (fn == "range") {
      long long start = 0, stop = 0, step = 1;
      for (const Value& x : a) if (x.kind != Value::kInt) fail(e.line, "range() needs integers");
      if (a.size() == 1) stop = a[0].i;
      else if (a.size() >= 2) { start = a[0].i; stop = a[1].i; if (a.size() > 2) step = a[2].i; }
      if (step == 0) fail(e.line, "range() step is zero");
      // Item count, computed without overflow: ceil((stop - start) / step) when positive.
      const __int128 span = step > 0 ? static_cast<__int128>(stop) - start : static_cast<__int128>(start) - stop;
      const __int128 mag = step > 0 ? static_cast<__int128>(step) : -static_cast<__int128>(step);
      const __int128 count = span > 0 ? (span + mag - 1) / mag : 0;
      if (count > kMaxRange) {
        fail(e.line, fmt::format("range({}, {}, {}) has more than {} items", start, stop, step, kMaxRange));
      }
      Array r;
      r.reserve(static_cast<std::size_t>(count));
      for (long long k = 0; k < static_cast<long long>(count); ++k) r.push_back(Value::integer(start + k * step));
      return Value::array(std::move(r));
    }
    fail(e.line, "unknown function '" + fn + "'");
  }

  const std::string& name_;
  int depth_ = 0;        // eval nesting
  long long work_ = 0;   // see kMaxWork
};

}  // namespace

struct Template::Impl {
  std::string name;
  std::vector<NodeP> nodes;
};

Template::Template(std::string_view source, std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  const std::string src = preprocess(std::string(source));
  Lexer lexer(src, impl_->name);
  Parser parser(lexer.run(), impl_->name);
  impl_->nodes = parser.parse_all();
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context) const {
  Scope sc;
  sc.frames.emplace_back();
  if (!context.is_object() && !context.is_null()) throw Error(impl_->name + ": render context must be a JSON object");
  if (context.is_object()) {
    for (auto it = context.begin(); it != context.end(); ++it) sc.frames.back()[it.key()] = from_json(it.value());
  }
  std::string out;
  Renderer r(impl_->name);
  r.run(impl_->nodes, sc, out);
  return out;
}

}  // namespace kvcompact::jinja
