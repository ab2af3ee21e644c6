// Jinja2 interpreter (lexer, parser, renderer); see jinja.h. The lexer follows jinja2/lexer.py
// (trim_blocks, lstrip_blocks, "-"/"+" whitespace control, brace balancing inside tags), the
// parser jinja2/parser.py (operator precedence, tests, filters), the renderer jinja2's runtime
// (scopes: a for-loop iteration, macro call, with block and generation block each get their own).
#include "io/jinja.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>

#include "core/error.h"
#include "io/jinja_builtins.h"
#include "io/jinja_value.h"
#include "core/utf8.h"

namespace kvcompact::jinja {
namespace {

// ------------------------------------------------------------------------------------------ lexer
enum class Tok { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };

struct Token {
  Tok type;
  std::string text;
  int line;
};

std::string rstrip_ws(const std::string& s) {
  std::size_t keep = 0;
  for (std::size_t i = 0; i < s.size();) {
    const std::uint32_t c = utf8::next(s, i);
    if (!is_py_space(c)) keep = i;
  }
  return s.substr(0, keep);
}

// Newlines normalised to "\n" and one trailing newline dropped (keep_trailing_newline=False).
std::string normalize_source(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (std::size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out += '\n';
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out += src[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

class Lexer {
 public:
  Lexer(const std::string& src, const std::string& name) : s_(src), name_(name) {}

  std::vector<Token> run() {
    bool line_starting = true;
    while (pos_ < s_.size()) {
      std::size_t i = pos_;
      while (i + 1 < s_.size() && !(s_[i] == '{' && (s_[i + 1] == '{' || s_[i + 1] == '%' || s_[i + 1] == '#'))) ++i;
      if (i + 1 >= s_.size()) {  // no more tags
        emit_data(s_.substr(pos_));
        pos_ = s_.size();
        break;
      }
      std::string text = s_.substr(pos_, i - pos_);
      const int text_lines = static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      const char kind = s_[i + 1];
      std::size_t j = i + 2;
      const char sign = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j] : 0;
      if (sign) ++j;
      if (sign == '-') {
        text = rstrip_ws(text);
      } else if (sign != '+' && kind != '{') {  // lstrip_blocks
        const std::size_t nl = text.rfind('\n');
        const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if ((l_pos > 0 || line_starting) && l_pos < text.size() && all_space(text, l_pos)) text.resize(l_pos);
      }
      emit_data(text);
      line_ += text_lines - static_cast<int>(std::count(text.begin(), text.end(), '\n'));
      pos_ = j;
      if (kind == '#') {
        line_starting = comment();
      } else if (kind == '%' && is_raw(j)) {
        line_starting = raw();
      } else {
        out_.push_back({kind == '%' ? Tok::kBlockBegin : Tok::kVarBegin, "", line_});
        line_starting = tag(kind == '%');
      }
    }
    out_.push_back({Tok::kEof, "", line_});
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: line {}: {}", name_, line_, what)); }

  static bool all_space(const std::string& t, std::size_t from) {
    for (std::size_t i = from; i < t.size();)
      if (!is_py_space(utf8::next(t, i))) return false;
    return true;
  }
  void emit_data(const std::string& t) {
    if (t.empty()) return;
    out_.push_back({Tok::kData, t, line_});
    line_ += static_cast<int>(std::count(t.begin(), t.end(), '\n'));
  }
  void advance(std::size_t to) {
    line_ += static_cast<int>(std::count(s_.begin() + static_cast<long>(pos_), s_.begin() + static_cast<long>(to), '\n'));
    pos_ = to;
  }
  std::size_t skip_space(std::size_t p) const {
    while (p < s_.size()) {
      std::size_t q = p;
      if (!is_py_space(utf8::next(s_, q))) break;
      p = q;
    }
    return p;
  }
  // After "%}" (trim_blocks) one newline; after "-%}" all white space. Returns where it ends.
  std::size_t block_suffix(std::size_t after, char sign) const {
    if (sign == '-') return skip_space(after);
    if (sign == '+') return after;
    return after < s_.size() && s_[after] == '\n' ? after + 1 : after;
  }
  bool ends_nl(std::size_t end) const { return end > 0 && s_[end - 1] == '\n'; }

  bool comment() {
    const std::size_t e = s_.find("#}", pos_);
    if (e == std::string::npos) fail("Missing end of comment tag");
    const char sign = e > pos_ && (s_[e - 1] == '-' || s_[e - 1] == '+') ? s_[e - 1] : 0;
    const std::size_t end = block_suffix(e + 2, sign);
    advance(end);
    return ends_nl(end);
  }

  // "{%[-+] raw [-]%}" at the opener whose sign ends at j.
  bool is_raw(std::size_t j) const {
    std::size_t p = skip_space(j);
    if (s_.compare(p, 3, "raw") != 0) return false;
    p = skip_space(p + 3);
    return s_.compare(p, 2, "%}") == 0 || s_.compare(p, 3, "-%}") == 0;
  }
  bool raw() {
    std::size_t p = skip_space(skip_space(pos_) + 3);
    const bool strip = s_[p] == '-';
    p += strip ? 3 : 2;
    if (strip) p = skip_space(p);
    advance(p);
    // Body up to "{%[-+] endraw [-+]%}".
    for (std::size_t q = s_.find("{%", pos_); q != std::string::npos; q = s_.find("{%", q + 1)) {
      std::size_t r = q + 2;
      const char sign = r < s_.size() && (s_[r] == '-' || s_[r] == '+') ? s_[r] : 0;
      if (sign) ++r;
      r = skip_space(r);
      if (s_.compare(r, 6, "endraw") != 0) continue;
      r = skip_space(r + 6);
      char esign = 0;
      if (r < s_.size() && (s_[r] == '-' || s_[r] == '+')) esign = s_[r++];
      if (s_.compare(r, 2, "%}") != 0) continue;
      std::string body = s_.substr(pos_, q - pos_);
      const int body_lines = static_cast<int>(std::count(body.begin(), body.end(), '\n'));
      if (sign == '-') body = rstrip_ws(body);
      else if (sign != '+') {
        const std::size_t nl = body.rfind('\n');
        const std::size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
        if (l_pos > 0 && l_pos < body.size() && all_space(body, l_pos)) body.resize(l_pos);
      }
      emit_data(body);
      line_ += body_lines - static_cast<int>(std::count(body.begin(), body.end(), '\n'));
      pos_ = q;
      const std::size_t end = block_suffix(r + 2, esign);
      advance(end);
      return ends_nl(end);
    }
    fail("Missing end of raw directive");
  }

  // Tokens of a {{ }} or {% %} tag up to its end; returns whether the end match ended in "\n".
  bool tag(bool block) {
    std::vector<char> balance;
    while (true) {
      advance(skip_space(pos_));
      if (pos_ >= s_.size()) fail(block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (balance.empty()) {
        const char* close = block ? "%}" : "}}";
        for (char sign : {'-', '+', '\0'}) {
          if (sign == '+' && !block) continue;
          const std::string end = sign ? std::string(1, sign) + close : std::string(close);
          if (s_.compare(pos_, end.size(), end) != 0) continue;
          std::size_t e = pos_ + end.size();
          if (block) e = block_suffix(e, sign);
          else if (sign == '-') e = skip_space(e);
          out_.push_back({block ? Tok::kBlockEnd : Tok::kVarEnd, "", line_});
          advance(e);
          return ends_nl(e);
        }
      }
      const char c = s_[pos_];
      if (c == '\'' || c == '"') { string_literal(c); continue; }
      if (std::isdigit(static_cast<unsigned char>(c))) { number(); continue; }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        std::size_t e = pos_;
        while (e < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[e])) || s_[e] == '_')) ++e;
        out_.push_back({Tok::kName, s_.substr(pos_, e - pos_), line_});
        pos_ = e;
        continue;
      }
      static const char* ops[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[", "]", "(", ")",
                                  "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
      const char* op = nullptr;
      for (const char* o : ops)
        if (s_.compare(pos_, std::strlen(o), o) == 0) { op = o; break; }
      if (!op) fail(fmt::format("unexpected char '{}'", c));
      const std::string t = op;
      if (t == "(" || t == "[" || t == "{") balance.push_back(t == "(" ? ')' : t == "[" ? ']' : '}');
      if (t == ")" || t == "]" || t == "}") {
        if (balance.empty()) fail(fmt::format("unexpected '{}'", t));
        if (balance.back() != t[0]) fail(fmt::format("unexpected '{}', expected '{}'", t, balance.back()));
        balance.pop_back();
      }
      out_.push_back({Tok::kOp, t, line_});
      pos_ += t.size();
    }
  }

  void number() {
    const bool after_dot = pos_ > 0 && s_[pos_ - 1] == '.';
    auto digits = [&](std::size_t p) {
      while (p < s_.size() && (std::isdigit(static_cast<unsigned char>(s_[p])) || (s_[p] == '_' && p + 1 < s_.size() && std::isdigit(static_cast<unsigned char>(s_[p + 1]))))) ++p;
      return p;
    };
    std::size_t e = digits(pos_);
    bool is_float = false;
    if (!after_dot && e + 1 < s_.size() && s_[e] == '.' && std::isdigit(static_cast<unsigned char>(s_[e + 1]))) {
      is_float = true;
      e = digits(e + 1);
    }
    if (!after_dot && e < s_.size() && (s_[e] == 'e' || s_[e] == 'E')) {
      std::size_t q = e + 1;
      if (q < s_.size() && (s_[q] == '+' || s_[q] == '-')) ++q;
      if (q < s_.size() && std::isdigit(static_cast<unsigned char>(s_[q]))) { is_float = true; e = digits(q); }
    }
    std::string t = s_.substr(pos_, e - pos_);
    t.erase(std::remove(t.begin(), t.end(), '_'), t.end());
    out_.push_back({is_float ? Tok::kFloat : Tok::kInt, t, line_});
    pos_ = e;
  }

  // Python's unicode-escape decoding of the literal's body; unknown escapes stay as written.
  void string_literal(char q) {
    const int start_line = line_;
    std::size_t p = pos_ + 1;
    std::string v;
    while (true) {
      if (p >= s_.size()) fail("unexpected end of string");
      const char d = s_[p++];
      if (d == q) break;
      if (d != '\\') { v += d; continue; }
      if (p >= s_.size()) fail("unexpected end of string");
      const char e = s_[p++];
      auto hex = [&](std::size_t n) {
        if (p + n > s_.size() || !std::all_of(s_.begin() + static_cast<long>(p), s_.begin() + static_cast<long>(p + n), ::isxdigit))
          fail("truncated \\x/\\u/\\U escape in a string literal");
        const auto cp = static_cast<std::uint32_t>(std::stoul(s_.substr(p, n), nullptr, 16));
        p += n;
        utf8::append(v, cp);
      };
      switch (e) {
        case '\n': break;
        case '\\': v += '\\'; break;
        case '\'': v += '\''; break;
        case '"': v += '"'; break;
        case 'a': v += '\a'; break;
        case 'b': v += '\b'; break;
        case 'f': v += '\f'; break;
        case 'n': v += '\n'; break;
        case 'r': v += '\r'; break;
        case 't': v += '\t'; break;
        case 'v': v += '\v'; break;
        case 'x': hex(2); break;
        case 'u': hex(4); break;
        case 'U': hex(8); break;
        default:
          if (e >= '0' && e <= '7') {
            std::uint32_t cp = static_cast<std::uint32_t>(e - '0');
            for (int k = 0; k < 2 && p < s_.size() && s_[p] >= '0' && s_[p] <= '7'; ++k) cp = cp * 8 + static_cast<std::uint32_t>(s_[p++] - '0');
            utf8::append(v, cp);
          } else {
            v += '\\';
            v += e;
          }
      }
    }
    out_.push_back({Tok::kString, v, start_line});
    advance(p);
  }

  const std::string& s_;
  const std::string& name_;
  std::vector<Token> out_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

// ------------------------------------------------------------------------------------------ AST
struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum Kind { kConst, kName, kList, kTuple, kDict, kAttr, kItem, kSlice, kCall, kFilter, kTest, kUnary, kBinary,
              kCompare, kCond } kind;
  int line = 0;
  Value value;                          // kConst
  std::string name;                     // name, attribute, filter, test, operator
  std::vector<ExprP> args;              // operands / items / positional arguments (base first)
  std::vector<std::pair<std::string, ExprP>> kwargs;
  std::vector<std::string> ops;         // kCompare: operators between args
  bool negated = false;                 // kTest: is not
};

struct Node;
using NodeP = std::shared_ptr<Node>;
using Body = std::vector<NodeP>;
struct Node {
  enum Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock, kWith, kScope, kBreak,
              kContinue } kind;
  int line = 0;
  std::string text;                                  // kText; kMacro: name; kSet: namespace attribute
  std::vector<std::pair<ExprP, Body>> branches;      // kIf: (condition or null for else, body)
  std::vector<std::string> targets;                  // kFor/kSet targets; kMacro/kCallBlock parameters
  std::vector<ExprP> defaults;                       // kMacro/kCallBlock: parameter defaults (null = none)
  std::vector<std::pair<std::string, ExprP>> assigns;  // kWith
  ExprP expr, filter;                                // value / iterable / call / filter chain; kFor: if-filter
  Body body, else_body;
};

const char* const kFilterBody = " filter body";  // name no template can write

class Parser {
 public:
  Parser(std::vector<Token> toks, const std::string& name) : t_(std::move(toks)), name_(name) {}

  Body parse_all() {
    Body out = subparse({});
    if (peek().type != Tok::kEof) fail("unexpected tag");
    return out;
  }

 private:
  const Token& peek(std::size_t k = 0) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(p_++, t_.size() - 1)]; }
  bool is_op(const char* op, std::size_t k = 0) const { return peek(k).type == Tok::kOp && peek(k).text == op; }
  bool is_name(const char* n, std::size_t k = 0) const { return peek(k).type == Tok::kName && peek(k).text == n; }
  bool skip_op(const char* op) { if (!is_op(op)) return false; ++p_; return true; }
  bool skip_name(const char* n) { if (!is_name(n)) return false; ++p_; return true; }
  void expect_op(const char* op) { if (!skip_op(op)) fail(fmt::format("expected token '{}', got '{}'", op, describe(peek()))); }
  void expect_end() { if (peek().type != Tok::kBlockEnd) fail(fmt::format("expected token 'end of statement block', got '{}'", describe(peek()))); ++p_; }
  std::string expect_name() {
    if (peek().type != Tok::kName) fail(fmt::format("expected a name, got '{}'", describe(peek())));
    return next().text;
  }
  static std::string describe(const Token& t) {
    switch (t.type) {
      case Tok::kEof: return "end of template";
      case Tok::kBlockEnd: return "end of statement block";
      case Tok::kVarEnd: return "end of print statement";
      case Tok::kBlockBegin: return "begin of statement block";
      default: return t.text;
    }
  }
  [[noreturn]] void fail(const std::string& what) const { throw Error(fmt::format("{}: line {}: {}", name_, peek().line, what)); }

  /// Nodes until a block tag whose keyword is in `stops` (left unconsumed, positioned at its
  /// keyword after "{%").
  Body subparse(const std::vector<std::string>& stops) {
    Body out;
    while (peek().type != Tok::kEof) {
      const Token& tk = peek();
      if (tk.type == Tok::kData) {
        auto n = std::make_shared<Node>();
        n->kind = Node::kText;
        n->text = tk.text;
        out.push_back(n);
        ++p_;
      } else if (tk.type == Tok::kVarBegin) {
        ++p_;
        auto n = std::make_shared<Node>();
        n->kind = Node::kOutput;
        n->line = tk.line;
        n->expr = parse_tuple();
        if (peek().type != Tok::kVarEnd) fail(fmt::format("expected token 'end of print statement', got '{}'", describe(peek())));
        ++p_;
        out.push_back(n);
      } else if (tk.type == Tok::kBlockBegin) {
        const Token& kw = peek(1);
        if (kw.type != Tok::kName) { ++p_; fail("tag name expected"); }
        if (std::find(stops.begin(), stops.end(), kw.text) != stops.end()) { ++p_; return out; }
        p_ += 2;
        out.push_back(statement(kw.text, kw.line, stops));
      } else {
        fail("unexpected token");
      }
    }
    if (!stops.empty()) fail(fmt::format("Unexpected end of template. Jinja was looking for the following tags: '{}'.", stops.back()));
    return out;
  }

  Body body_until(const std::string& end) {
    Body b = subparse({end});
    ++p_;  // end keyword
    expect_end();
    return b;
  }

  NodeP statement(const std::string& kw, int line, const std::vector<std::string>& outer) {
    auto n = std::make_shared<Node>();
    n->line = line;
    if (kw == "if") {
      n->kind = Node::kIf;
      ExprP cond = parse_tuple();
      expect_end();
      while (true) {
        Body body = subparse({"elif", "else", "endif"});
        n->branches.emplace_back(cond, std::move(body));
        const std::string k = next().text;
        if (k == "elif") { cond = parse_tuple(); expect_end(); continue; }
        expect_end();
        if (k == "else") n->branches.emplace_back(nullptr, body_until("endif"));
        break;
      }
    } else if (kw == "for") {
      n->kind = Node::kFor;
      n->targets.push_back(expect_name());
      while (skip_op(",")) { if (is_name("in")) break; n->targets.push_back(expect_name()); }
      if (!skip_name("in")) fail(fmt::format("expected token 'in', got '{}'", describe(peek())));
      n->expr = parse_tuple(/*condexpr=*/false);
      if (skip_name("if")) n->filter = parse_expression();
      if (is_name("recursive")) fail("recursive for loops are not supported");
      expect_end();
      ++loops_;
      n->body = subparse({"else", "endfor"});
      --loops_;
      if (next().text == "else") { expect_end(); n->else_body = body_until("endfor"); }
      else expect_end();
    } else if (kw == "set") {
      const std::string first = expect_name();
      if (skip_op(".")) {
        n->kind = Node::kSet;
        n->targets = {first};
        n->text = expect_name();
        expect_op("=");
        n->expr = parse_tuple();
        expect_end();
      } else if (is_op("=") || is_op(",")) {
        n->kind = Node::kSet;
        n->targets = {first};
        while (skip_op(",")) { if (is_op("=")) break; n->targets.push_back(expect_name()); }
        expect_op("=");
        n->expr = parse_tuple();
        expect_end();
      } else {
        n->kind = Node::kSetBlock;
        n->targets = {first};
        if (is_op("|")) n->filter = parse_filter_chain();
        expect_end();
        n->body = body_until("endset");
      }
    } else if (kw == "macro") {
      n->kind = Node::kMacro;
      n->text = expect_name();
      parse_signature(*n);
      expect_end();
      const int saved = loops_;
      loops_ = 0;
      n->body = body_until("endmacro");
      loops_ = saved;
    } else if (kw == "call") {
      n->kind = Node::kCallBlock;
      if (is_op("(")) parse_signature(*n);
      n->expr = parse_expression();
      if (n->expr->kind != Expr::kCall) fail("expected call");
      expect_end();
      n->body = body_until("endcall");
    } else if (kw == "filter") {
      n->kind = Node::kFilterBlock;
      n->filter = parse_filter_chain();
      expect_end();
      n->body = body_until("endfilter");
    } else if (kw == "with") {
      n->kind = Node::kWith;
      while (peek().type != Tok::kBlockEnd) {
        if (!n->assigns.empty()) expect_op(",");
        const std::string k = expect_name();
        expect_op("=");
        n->assigns.emplace_back(k, parse_expression());
      }
      expect_end();
      n->body = body_until("endwith");
    } else if (kw == "generation") {  // transformers' AssistantTracker: renders its body
      n->kind = Node::kScope;
      expect_end();
      n->body = body_until("endgeneration");
    } else if (kw == "break" || kw == "continue") {
      if (loops_ == 0) fail(fmt::format("'{}' outside of a for loop", kw));
      n->kind = kw == "break" ? Node::kBreak : Node::kContinue;
      expect_end();
    } else {
      --p_;
      if (kw.starts_with("end") || kw == "elif" || kw == "else") {
        fail(outer.empty() ? fmt::format("Encountered unknown tag '{}'.", kw)
                           : fmt::format("Encountered unknown tag '{}'. Jinja was looking for the following tags: '{}'.", kw, outer.back()));
      }
      if (kw == "include" || kw == "import" || kw == "from" || kw == "extends" || kw == "block")
        fail(fmt::format("'{}' is not supported (a chat template has no other templates to load)", kw));
      fail(fmt::format("Encountered unknown tag '{}'.", kw));
    }
    return n;
  }

  void parse_signature(Node& n) {
    expect_op("(");
    while (!is_op(")")) {
      if (!n.targets.empty()) expect_op(",");
      if (is_op(")")) break;
      n.targets.push_back(expect_name());
      n.defaults.push_back(skip_op("=") ? parse_expression() : nullptr);
    }
    expect_op(")");
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

  ExprP parse_tuple(bool condexpr = true) {
    const int line = peek().line;
    std::vector<ExprP> items;
    bool comma = false;
    while (true) {
      if (!items.empty()) {
        if (!skip_op(",")) break;
        comma = true;
      }
      if (peek().type == Tok::kVarEnd || peek().type == Tok::kBlockEnd || is_op(")") || (!items.empty() && is_name("in")) ||
          (!items.empty() && is_name("if")) || (!items.empty() && is_name("recursive")))
        break;
      items.push_back(condexpr ? parse_expression() : parse_or());
    }
    if (items.empty()) fail(fmt::format("Expected an expression, got '{}'", describe(peek())));
    if (!comma) return items[0];
    ExprP t = make(Expr::kTuple, line);
    t->args = std::move(items);
    return t;
  }
  ExprP parse_expression() {
    ExprP e = parse_or();
    while (is_name("if")) {
      const int line = next().line;
      ExprP cond = parse_or();
      ExprP other = skip_name("else") ? parse_expression() : nullptr;
      ExprP t = make(Expr::kCond, line);
      t->args = {cond, e, other};
      e = t;
    }
    return e;
  }
  ExprP parse_or() {
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
    const int line = peek().line;
    ExprP first = parse_math1();
    ExprP c = make(Expr::kCompare, line);
    c->args.push_back(first);
    while (true) {
      if (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=")) {
        c->ops.push_back(next().text);
      } else if (skip_name("in")) {
        c->ops.push_back("in");
      } else if (is_name("not") && is_name("in", 1)) {
        p_ += 2;
        c->ops.push_back("not in");
      } else {
        break;
      }
      c->args.push_back(parse_math1());
    }
    return c->ops.empty() ? first : c;
  }
  ExprP parse_math1() {
    ExprP e = parse_concat();
    while (is_op("+") || is_op("-")) { const Token& t = next(); e = binary(t.text, e, parse_concat(), t.line); }
    return e;
  }
  ExprP parse_concat() {
    ExprP e = parse_math2();
    while (is_op("~")) { const int l = next().line; e = binary("~", e, parse_math2(), l); }
    return e;
  }
  ExprP parse_math2() {
    ExprP e = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) { const Token& t = next(); e = binary(t.text, e, parse_pow(), t.line); }
    return e;
  }
  ExprP parse_pow() {
    ExprP e = parse_unary();
    while (is_op("**")) { const int l = next().line; e = binary("**", e, parse_unary(), l); }
    return e;
  }
  ExprP parse_unary(bool with_filter = true) {
    ExprP e;
    if (is_op("-") || is_op("+")) {
      const Token& t = next();
      e = make(Expr::kUnary, t.line);
      e->name = t.text;
      e->args = {parse_unary(false)};
    } else {
      e = parse_primary();
    }
    e = parse_postfix(e);
    return with_filter ? parse_filter_expr(e) : e;
  }
  ExprP parse_primary() {
    const Token& t = next();
    switch (t.type) {
      case Tok::kName: {
        ExprP e = make(Expr::kConst, t.line);
        if (t.text == "true" || t.text == "True") { e->value = Value::boolean(true); return e; }
        if (t.text == "false" || t.text == "False") { e->value = Value::boolean(false); return e; }
        if (t.text == "none" || t.text == "None") { e->value = Value::none(); return e; }
        e->kind = Expr::kName;
        e->name = t.text;
        return e;
      }
      case Tok::kString: {
        std::string s = t.text;
        while (peek().type == Tok::kString) s += next().text;
        ExprP e = make(Expr::kConst, t.line);
        e->value = Value::str(s);
        return e;
      }
      case Tok::kInt: {
        ExprP e = make(Expr::kConst, t.line);
        try { e->value = Value::integer(parse_digits(t.text, "integer literal")); } catch (const Failure&) { --p_; fail("integer literal too large"); }
        return e;
      }
      case Tok::kFloat: {  // strtod: an overflow is inf, as Python's float('1e999'), not an exception
        ExprP e = make(Expr::kConst, t.line);
        e->value = Value::real(std::strtod(t.text.c_str(), nullptr));
        return e;
      }
      case Tok::kOp:
        if (t.text == "(") {
          if (skip_op(")")) { ExprP e = make(Expr::kTuple, t.line); return e; }
          ExprP first = parse_expression();
          if (!is_op(",")) { expect_op(")"); return first; }
          ExprP tup = make(Expr::kTuple, t.line);
          tup->args.push_back(first);
          while (skip_op(",")) {
            if (is_op(")")) break;
            tup->args.push_back(parse_expression());
          }
          expect_op(")");
          return tup;
        }
        if (t.text == "[") {
          ExprP l = make(Expr::kList, t.line);
          while (!is_op("]")) {
            if (!l->args.empty()) expect_op(",");
            if (is_op("]")) break;
            l->args.push_back(parse_expression());
          }
          expect_op("]");
          return l;
        }
        if (t.text == "{") {
          ExprP d = make(Expr::kDict, t.line);
          while (!is_op("}")) {
            if (!d->args.empty()) expect_op(",");
            if (is_op("}")) break;
            d->args.push_back(parse_expression());
            expect_op(":");
            d->args.push_back(parse_expression());
          }
          expect_op("}");
          return d;
        }
        break;
      default: break;
    }
    --p_;
    fail(fmt::format("unexpected '{}'", describe(t)));
  }
  ExprP parse_postfix(ExprP e) {
    while (true) {
      const int l = peek().line;
      if (skip_op(".")) {
        if (peek().type == Tok::kInt) {
          ExprP ix = make(Expr::kItem, l);
          ExprP k = make(Expr::kConst, l);
          try { k->value = Value::integer(parse_digits(next().text, "integer literal")); } catch (const Failure&) { --p_; fail("integer literal too large"); }
          ix->args = {e, k};
          e = ix;
          continue;
        }
        ExprP a = make(Expr::kAttr, l);
        a->name = expect_name();
        a->args = {e};
        e = a;
      } else if (skip_op("[")) {
        e = parse_subscript(e, l);
      } else if (is_op("(")) {
        ExprP c = make(Expr::kCall, l);
        c->args.push_back(e);
        parse_call_args(*c);
        e = c;
      } else {
        return e;
      }
    }
  }
  ExprP parse_subscript(ExprP base, int line) {
    std::vector<ExprP> parts;  // each a slice (kSlice with 3 optional args) or expression
    while (!is_op("]")) {
      if (!parts.empty()) expect_op(",");
      if (is_op("]")) break;
      ExprP part;
      ExprP lo, hi, st;
      bool is_slice = false;
      if (!is_op(":")) lo = parse_expression();
      if (skip_op(":")) {
        is_slice = true;
        if (!is_op("]") && !is_op(",") && !is_op(":")) hi = parse_expression();
        if (skip_op(":") && !is_op("]") && !is_op(",")) st = parse_expression();
      }
      if (is_slice) {
        part = make(Expr::kSlice, line);
        part->args = {nullptr, lo, hi, st};
      } else {
        part = lo;
      }
      parts.push_back(part);
    }
    expect_op("]");
    if (parts.empty()) fail("expected an expression in []");
    if (parts.size() == 1 && parts[0]->kind == Expr::kSlice) {
      parts[0]->args[0] = base;
      return parts[0];
    }
    for (const ExprP& part : parts)  // a slice has no base inside a tuple (found by fuzzing: x[::,2])
      if (part->kind == Expr::kSlice) fail("a slice inside a tuple subscript is not supported");
    ExprP ix = make(Expr::kItem, line);
    if (parts.size() == 1) {
      ix->args = {base, parts[0]};
    } else {
      ExprP tup = make(Expr::kTuple, line);
      tup->args = parts;
      ix->args = {base, tup};
    }
    return ix;
  }
  void parse_call_args(Expr& e) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (is_op("*") || is_op("**")) fail("*args and **kwargs in calls are not supported");
      if (peek().type == Tok::kName && is_op("=", 1)) {
        const std::string k = next().text;
        ++p_;
        e.kwargs.emplace_back(k, parse_expression());
      } else {
        if (!e.kwargs.empty()) fail("Invalid argument syntax (positional argument after keyword argument)");
        e.args.push_back(parse_expression());
      }
    }
    expect_op(")");
  }
  ExprP parse_filter_expr(ExprP e) {
    while (true) {
      if (is_op("|")) {
        e = parse_filter(e);
      } else if (is_name("is")) {
        const int l = next().line;
        ExprP t = make(Expr::kTest, l);
        t->negated = skip_name("not");
        t->name = expect_name();
        while (skip_op(".")) t->name += "." + expect_name();
        if (!known_test(t->name)) { --p_; fail(fmt::format("No test named '{}'.", t->name)); }
        t->args.push_back(e);
        const Token& c = peek();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((c.type == Tok::kName || c.type == Tok::kString || c.type == Tok::kInt || c.type == Tok::kFloat ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) fail("You cannot chain multiple tests with is");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = t;
      } else if (is_op("(")) {
        ExprP c = make(Expr::kCall, peek().line);
        c->args.push_back(e);
        parse_call_args(*c);
        e = c;
      } else {
        return e;
      }
    }
  }
  ExprP parse_filter(ExprP base) {
    const int l = next().line;  // '|'
    ExprP f = make(Expr::kFilter, l);
    f->name = expect_name();
    while (skip_op(".")) f->name += "." + expect_name();
    if (!known_filter(f->name)) { --p_; fail(fmt::format("No filter named '{}'.", f->name)); }
    f->args.push_back(base);
    if (is_op("(")) parse_call_args(*f);
    return f;
  }
  // "| f(args) | g" of {% filter %} / {% set x | f %}: applied to the body text.
  ExprP parse_filter_chain() {
    ExprP e = make(Expr::kName, peek().line);
    e->name = kFilterBody;
    if (!is_op("|")) {  // {% filter upper %}: the first filter has no "|"
      ExprP f = make(Expr::kFilter, peek().line);
      f->name = expect_name();
      if (!known_filter(f->name)) { --p_; fail(fmt::format("No filter named '{}'.", f->name)); }
      f->args.push_back(e);
      if (is_op("(")) parse_call_args(*f);
      e = f;
    }
    while (is_op("|")) e = parse_filter(e);
    return e;
  }

  std::vector<Token> t_;
  std::size_t p_ = 0;
  const std::string& name_;
  int loops_ = 0;
};

// ------------------------------------------------------------------------------------------ runtime
using Frame = std::map<std::string, Value>;
struct Scope {
  std::vector<std::shared_ptr<Frame>> frames;
  const Value* find(const std::string& n) const {
    for (auto it = frames.rbegin(); it != frames.rend(); ++it) {
      auto f = (*it)->find(n);
      if (f != (*it)->end()) return &f->second;
    }
    return nullptr;
  }
  Frame& top() { return *frames.back(); }
  Scope child() const {
    Scope s{frames};
    s.frames.push_back(std::make_shared<Frame>());
    return s;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

class Renderer {
 public:
  Renderer(const std::string& name, const RenderOptions& options) : name_(name), options_(options) {}

  Flow run(const Body& nodes, Scope& sc, std::string& out) {
    for (const NodeP& n : nodes) {
      const Flow f = exec(*n, sc, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  [[noreturn]] void fail(int line, const std::string& what) const { throw Error(fmt::format("{}: line {}: {}", name_, line, what)); }

 private:
  Flow exec(const Node& n, Scope& sc, std::string& out) {
    try {
      return exec_inner(n, sc, out);
    } catch (const Failure& f) {
      fail(f.line ? f.line : n.line, f.what());
    }
  }

  Flow exec_inner(const Node& n, Scope& sc, std::string& out) {
    switch (n.kind) {
      case Node::kText: out += n.text; return Flow::kNormal;
      case Node::kOutput: out += to_str(eval(*n.expr, sc)); return Flow::kNormal;
      case Node::kIf:
        for (const auto& [cond, body] : n.branches)
          if (!cond || eval(*cond, sc).truthy()) return run(body, sc, out);
        return Flow::kNormal;
      case Node::kSet: {
        Value v = eval(*n.expr, sc);
        if (!n.text.empty()) {  // ns.attr
          const Value* ns = sc.find(n.targets[0]);
          if (!ns || ns->kind != Value::kObject || !ns->is_namespace)
            throw Failure("cannot assign attribute on non-namespace object", n.line);
          if (Value* slot = ns->find(n.text)) *slot = std::move(v);
          else ns->obj->emplace_back(n.text, std::move(v));
        } else {
          assign(n.targets, v, sc.top(), n.line);
        }
        return Flow::kNormal;
      }
      case Node::kSetBlock: {
        std::string body;
        Scope inner = sc.child();
        run(n.body, inner, body);
        Value v = Value::str(body);
        if (n.filter) v = apply_filter_chain(*n.filter, v, sc);
        sc.top()[n.targets[0]] = v;
        return Flow::kNormal;
      }
      case Node::kMacro:
        sc.top()[n.text] = make_macro(n, sc);
        return Flow::kNormal;
      case Node::kCallBlock: {
        const Expr& call = *n.expr;
        Value callee = eval(*call.args[0], sc);
        CallArgs a = eval_args(call, sc, 1);
        a.kw.emplace_back("caller", make_macro(n, sc));
        out += to_str(invoke(callee, a));
        return Flow::kNormal;
      }
      case Node::kFilterBlock: {
        std::string body;
        Scope inner = sc.child();
        run(n.body, inner, body);
        out += to_str(apply_filter_chain(*n.filter, Value::str(body), sc));
        return Flow::kNormal;
      }
      case Node::kWith: {
        Scope inner = sc.child();
        for (const auto& [k, e] : n.assigns) inner.top()[k] = eval(*e, sc);
        return run(n.body, inner, out);
      }
      case Node::kScope: {
        Scope inner = sc.child();
        run(n.body, inner, out);
        return Flow::kNormal;
      }
      case Node::kBreak: return Flow::kBreak;
      case Node::kContinue: return Flow::kContinue;
      case Node::kFor: return exec_for(n, sc, out);
    }
    return Flow::kNormal;
  }

  void assign(const std::vector<std::string>& targets, const Value& v, Frame& frame, int line) {
    if (targets.size() == 1) {
      frame[targets[0]] = v;
      return;
    }
    if (v.kind == Value::kUndefined) fail_undefined(v);
    const Array items = iterate(v);
    if (items.size() != targets.size())
      throw Failure(items.size() < targets.size()
                        ? fmt::format("not enough values to unpack (expected {}, got {})", targets.size(), items.size())
                        : fmt::format("too many values to unpack (expected {})", targets.size()),
                    line);
    for (std::size_t k = 0; k < targets.size(); ++k) frame[targets[k]] = items[k];
  }

  Flow exec_for(const Node& n, Scope& sc, std::string& out) {
    const Value it = eval(*n.expr, sc);
    Array items = iterate(it);
    if (n.filter) {
      Array kept;
      for (const Value& v : items) {
        Scope inner = sc.child();
        assign(n.targets, v, inner.top(), n.line);
        if (eval(*n.filter, inner).truthy()) kept.push_back(v);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Scope inner = sc.child();
      run(n.else_body, inner, out);
      return Flow::kNormal;
    }
    const long long len = static_cast<long long>(items.size());
    auto last_changed = std::make_shared<std::optional<Value>>();  // loop.changed(*args) state
    const Value changed = Value::callable("changed", [last_changed](const CallArgs& a) {
      const Value now = Value::tuple(a.pos);
      if (*last_changed && equal(**last_changed, now)) return Value::boolean(false);
      *last_changed = now;
      return Value::boolean(true);
    });
    for (long long k = 0; k < len; ++k) {
      Scope inner = sc.child();
      assign(n.targets, items[static_cast<std::size_t>(k)], inner.top(), n.line);
      auto cycle = [k](const CallArgs& a) -> Value {
        if (a.pos.empty()) throw Failure("no items for cycling given");
        return a.pos[static_cast<std::size_t>(k) % a.pos.size()];
      };
      inner.top()["loop"] = Value::object({
          {"index0", Value::integer(k)},
          {"index", Value::integer(k + 1)},
          {"revindex", Value::integer(len - k)},
          {"revindex0", Value::integer(len - k - 1)},
          {"first", Value::boolean(k == 0)},
          {"last", Value::boolean(k == len - 1)},
          {"length", Value::integer(len)},
          {"depth", Value::integer(1)},
          {"depth0", Value::integer(0)},
          {"previtem", k > 0 ? items[static_cast<std::size_t>(k - 1)] : Value::undefined("there is no previous item")},
          {"nextitem", k + 1 < len ? items[static_cast<std::size_t>(k + 1)] : Value::undefined("there is no next item")},
          {"cycle", Value::callable("cycle", cycle)},
          {"changed", changed},
      });
      if (run(n.body, inner, out) == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  // A macro (or the caller of a call block): parameters bound over the defining scope's frames.
  Value make_macro(const Node& n, const Scope& defining) {
    const Node* node = &n;
    // A macro lives in a frame of the scope it captures, so a strong capture would be a
    // shared_ptr cycle (a leak per macro). The renderer pins the captured frames for the whole
    // render instead and the macro holds weak references.
    std::vector<std::weak_ptr<Frame>> captured;
    for (const auto& f : defining.frames) {
      pinned_.push_back(f);
      captured.push_back(f);
    }
    const std::string name = n.kind == Node::kMacro ? n.text : "caller";
    return Value::callable(name, [this, node, captured, name](const CallArgs& a) -> Value {
      // Python raises RecursionError; a native stack overflow would be a crash.
      struct DepthGuard {
        int& d;
        explicit DepthGuard(int& depth) : d(depth) { ++d; }
        ~DepthGuard() { --d; }
      } guard(call_depth_);
      if (call_depth_ > kMaxCallDepth) throw Failure(fmt::format("maximum recursion depth exceeded in macro '{}'", name));
      Scope defined;
      for (const auto& w : captured) {
        std::shared_ptr<Frame> f = w.lock();
        defined.frames.push_back(f ? f : std::make_shared<Frame>());
      }
      Scope sc = defined.child();
      Frame& f = sc.top();
      std::vector<bool> bound(node->targets.size(), false);
      for (std::size_t k = 0; k < a.pos.size() && k < node->targets.size(); ++k) {
        f[node->targets[k]] = a.pos[k];
        bound[k] = true;
      }
      Array varargs;
      for (std::size_t k = node->targets.size(); k < a.pos.size(); ++k) varargs.push_back(a.pos[k]);
      Object kwargs;
      for (const auto& [k, v] : a.kw) {
        auto it = std::find(node->targets.begin(), node->targets.end(), k);
        if (it != node->targets.end()) {
          const std::size_t idx = static_cast<std::size_t>(it - node->targets.begin());
          if (bound[idx]) throw Failure(fmt::format("macro '{}' got multiple values for argument '{}'", name, k));
          f[k] = v;
          bound[idx] = true;
        } else if (k == "caller") {
          f["caller"] = v;
        } else {
          kwargs.emplace_back(k, v);
        }
      }
      for (std::size_t k = 0; k < node->targets.size(); ++k) {
        if (bound[k]) continue;
        f[node->targets[k]] = node->defaults[k] ? eval(*node->defaults[k], sc)
                                                : Value::undefined(fmt::format("parameter '{}' was not provided", node->targets[k]));
      }
      f["varargs"] = Value::tuple(varargs);
      f["kwargs"] = Value::object(kwargs);
      std::string out;
      run(node->body, sc, out);
      return Value::str(out);
    });
  }

  Value apply_filter_chain(const Expr& chain, const Value& body, Scope& sc) {
    Scope inner = sc.child();
    inner.top()[kFilterBody] = body;
    return eval(chain, inner);
  }

  Value invoke(const Value& callee, const CallArgs& a) {
    if (callee.kind == Value::kUndefined) fail_undefined(callee);
    if (callee.kind != Value::kCallable) throw Failure(fmt::format("'{}' object is not callable", type_name(callee)));
    return callee.fn->fn(a);
  }

  CallArgs eval_args(const Expr& e, Scope& sc, std::size_t from) {
    CallArgs a;
    for (std::size_t k = from; k < e.args.size(); ++k) a.pos.push_back(eval(*e.args[k], sc));
    for (const auto& [k, x] : e.kwargs) a.kw.emplace_back(k, eval(*x, sc));
    return a;
  }

  Value eval(const Expr& e, Scope& sc) {
    try {
      return eval_inner(e, sc);
    } catch (Failure& f) {
      if (!f.line) f.line = e.line;
      throw;
    }
  }

  Value eval_inner(const Expr& e, Scope& sc) {
    switch (e.kind) {
      case Expr::kConst: return e.value;
      case Expr::kName: {
        if (const Value* v = sc.find(e.name)) return *v;
        return global(e.name);
      }
      case Expr::kList: case Expr::kTuple: {
        Array a;
        for (const ExprP& x : e.args) a.push_back(eval(*x, sc));
        return e.kind == Expr::kTuple ? Value::tuple(std::move(a)) : Value::array(std::move(a));
      }
      case Expr::kDict: {
        Object o;
        for (std::size_t k = 0; k + 1 < e.args.size(); k += 2) {
          Value key = eval(*e.args[k], sc);
          if (key.kind != Value::kString) throw Failure("dict keys other than strings are not supported");
          Value val = eval(*e.args[k + 1], sc);
          auto it = std::find_if(o.begin(), o.end(), [&](const auto& kv) { return kv.first == key.s; });
          if (it != o.end()) it->second = std::move(val);
          else o.emplace_back(key.s, std::move(val));
        }
        return Value::object(std::move(o));
      }
      case Expr::kAttr: return get_attr(eval(*e.args[0], sc), e.name);
      case Expr::kItem: return get_item(eval(*e.args[0], sc), eval(*e.args[1], sc));
      case Expr::kSlice: return slice(e, sc);
      case Expr::kCall: {
        Value callee = eval(*e.args[0], sc);
        return invoke(callee, eval_args(e, sc, 1));
      }
      case Expr::kFilter: {
        Value base = eval(*e.args[0], sc);
        return apply_filter(e.name, base, eval_args(e, sc, 1));
      }
      case Expr::kTest: {
        // "defined"/"undefined" of a name must not raise; everything else evaluates normally.
        Value base = eval(*e.args[0], sc);
        return Value::boolean(apply_test(e.name, base, eval_args(e, sc, 1)) != e.negated);
      }
      case Expr::kUnary: {
        Value v = eval(*e.args[0], sc);
        if (e.name == "not") return Value::boolean(!v.truthy());
        if (v.kind == Value::kUndefined) fail_undefined(v);
        if (v.kind == Value::kInt || v.kind == Value::kBool) { const long long x = v.kind == Value::kInt ? v.i : v.b; if (e.name == "-" && x == LLONG_MIN) throw Failure("integer overflow in unary -");
          return Value::integer(e.name == "-" ? -x : x); }
        if (v.kind == Value::kFloat) return Value::real(e.name == "-" ? -v.f : v.f);
        throw Failure(fmt::format("bad operand type for unary {}: '{}'", e.name, type_name(v)));
      }
      case Expr::kCond: {
        if (eval(*e.args[0], sc).truthy()) return eval(*e.args[1], sc);
        return e.args[2] ? eval(*e.args[2], sc) : Value::undefined("the inline if-expression on line " + std::to_string(e.line) + " evaluated to false and no else section was defined.");
      }
      case Expr::kCompare: {
        Value left = eval(*e.args[0], sc);
        for (std::size_t k = 0; k < e.ops.size(); ++k) {
          Value right = eval(*e.args[k + 1], sc);
          if (!compare_op(e.ops[k], left, right)) return Value::boolean(false);
          left = std::move(right);
        }
        return Value::boolean(true);
      }
      case Expr::kBinary: return binary(e, sc);
    }
    return Value();
  }

  Value global(const std::string& n) {
    if (n == "range") {
      return Value::callable(n, [](const CallArgs& a) {
        for (const Value& x : a.pos) if (x.kind != Value::kInt && x.kind != Value::kBool) throw Failure(fmt::format("'{}' object cannot be interpreted as an integer", type_name(x)));
        auto iv = [](const Value& x) { return x.kind == Value::kInt ? x.i : static_cast<long long>(x.b); };
        long long start = 0, stop = 0, step = 1;
        if (a.pos.size() == 1) stop = iv(a.pos[0]);
        else if (a.pos.size() >= 2) { start = iv(a.pos[0]); stop = iv(a.pos[1]); if (a.pos.size() > 2) step = iv(a.pos[2]); }
        else throw Failure("range expected at least 1 argument, got 0");
        if (step == 0) throw Failure("range() arg 3 must not be zero");
        Array r;
        for (long long k = start; step > 0 ? k < stop : k > stop; k += step) {
          r.push_back(Value::integer(k));
          if (r.size() > 100000) throw Failure("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
        }
        return Value::array(r);
      });
    }
    if (n == "namespace" || n == "dict") {
      const bool ns = n == "namespace";
      return Value::callable(n, [ns](const CallArgs& a) {
        Value v = Value::object();
        v.is_namespace = ns;
        for (const Value& p : a.pos) {
          if (p.kind != Value::kObject) throw Failure("namespace()/dict() takes a dict positional argument");
          for (const auto& kv : *p.obj) v.obj->push_back(kv);
        }
        for (const auto& [k, x] : a.kw) {
          if (Value* slot = v.find(k)) *slot = x;
          else v.obj->emplace_back(k, x);
        }
        return v;
      });
    }
    if (n == "raise_exception") {
      return Value::callable(n, [this](const CallArgs& a) -> Value {
        throw Error(fmt::format("{}: raise_exception: {}", name_, a.pos.empty() ? "" : to_str(a.pos[0])));
      });
    }
    if (n == "strftime_now") {
      return Value::callable(n, [this](const CallArgs& a) -> Value {
        if (a.pos.empty() || a.pos[0].kind != Value::kString) throw Failure("strftime_now() needs a format string");
        return Value::str(strftime_now(a.pos[0].s));
      });
    }
    if (n == "cycler") {
      return Value::callable(n, [](const CallArgs& a) {
        auto state = std::make_shared<std::size_t>(0);
        auto vals = std::make_shared<Array>(a.pos);
        Value c = Value::object();
        c.obj->emplace_back("next", Value::callable("next", [state, vals](const CallArgs&) {
          if (vals->empty()) throw Failure("cycler has no items");
          Value v = (*vals)[*state % vals->size()];
          ++*state;
          return v;
        }));
        return c;
      });
    }
    if (n == "joiner") {
      return Value::callable(n, [](const CallArgs& a) {
        const std::string sep = a.pos.empty() ? ", " : to_str(a.pos[0]);
        auto used = std::make_shared<bool>(false);
        return Value::callable("joiner", [sep, used](const CallArgs&) {
          if (!*used) { *used = true; return Value::str(""); }
          return Value::str(sep);
        });
      });
    }
    return Value::undefined(fmt::format("'{}' is undefined", n));
  }

  std::string strftime_now(const std::string& format) const {
    const auto tp = options_.now ? options_.now() : std::chrono::system_clock::now();
    const std::time_t t = std::chrono::system_clock::to_time_t(tp);
    const auto micros = std::chrono::duration_cast<std::chrono::microseconds>(tp.time_since_epoch()).count() % 1000000;
    std::tm tm{};
    localtime_r(&t, &tm);
    // Python's datetime.strftime: %f is microseconds; a naive datetime has empty %z and %Z.
    std::string f;
    for (std::size_t i = 0; i < format.size(); ++i) {
      if (format[i] == '%' && i + 1 < format.size()) {
        const char c = format[i + 1];
        if (c == 'f') { f += fmt::format("{:06d}", (micros + 1000000) % 1000000); ++i; continue; }
        if (c == 'z' || c == 'Z') { ++i; continue; }
        f += format[i];
        f += format[++i];
        continue;
      }
      f += format[i];
    }
    if (f.empty()) return "";
    std::string buf(256 + f.size() * 8, '\0');
    const std::size_t len = std::strftime(buf.data(), buf.size(), f.c_str(), &tm);
    buf.resize(len);
    return buf;
  }

  bool compare_op(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return equal(a, b);
    if (op == "!=") return !equal(a, b);
    if (op == "in" || op == "not in") return contains(b, a) == (op == "in");
    const int c = compare(a, b, op.c_str());
    return op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0;
  }

  static bool contains(const Value& container, const Value& x) {
    switch (container.kind) {
      case Value::kString:
        if (x.kind == Value::kUndefined) fail_undefined(x);
        if (x.kind != Value::kString) throw Failure(fmt::format("'in <string>' requires string as left operand, not {}", type_name(x)));
        return container.s.find(x.s) != std::string::npos;
      case Value::kObject:
        if (container.is_namespace) break;
        return x.kind == Value::kString && container.find(x.s) != nullptr;
      case Value::kArray:
        return std::any_of(container.arr->begin(), container.arr->end(), [&](const Value& y) { return equal(x, y); });
      case Value::kUndefined: return false;
      default: break;
    }
    throw Failure(fmt::format("argument of type '{}' is not iterable", type_name(container)));
  }

  Value slice(const Expr& e, Scope& sc) {
    Value base = eval(*e.args[0], sc);
    if (base.kind == Value::kUndefined) fail_undefined(base);
    auto opt = [&](const ExprP& x) -> std::optional<long long> {
      if (!x) return std::nullopt;
      Value v = eval(*x, sc);
      if (v.kind == Value::kNone) return std::nullopt;
      if (v.kind == Value::kBool) return v.b;
      if (v.kind != Value::kInt) throw Failure("slice indices must be integers or None");
      return v.i;
    };
    const auto start = opt(e.args[1]), stop = opt(e.args[2]), stepo = opt(e.args[3]);
    const long long step = stepo.value_or(1);
    if (step == 0) throw Failure("slice step cannot be zero");
    Array items;
    const bool is_str = base.kind == Value::kString;
    if (is_str) for (auto& c : chars_of(base.s)) items.push_back(Value::str(c));
    else if (base.kind == Value::kArray) items = *base.arr;
    else throw Failure(fmt::format("'{}' object is not subscriptable", type_name(base)));
    const long long n = static_cast<long long>(items.size());
    auto clamp = [&](std::optional<long long> v, long long dflt) {
      if (!v) return dflt;
      const long long x = *v < 0 ? *v + n : *v;
      return step > 0 ? std::clamp(x, 0LL, n) : std::clamp(x, -1LL, n - 1);
    };
    const long long b = clamp(start, step > 0 ? 0 : n - 1), en = clamp(stop, step > 0 ? n : -1);
    Array out;
    for (long long k = b; step > 0 ? k < en : k > en; k += step) out.push_back(items[static_cast<std::size_t>(k)]);
    if (is_str) {
      std::string s;
      for (auto& v : out) s += v.s;
      return Value::str(s);
    }
    return base.is_tuple ? Value::tuple(std::move(out)) : Value::array(std::move(out));
  }

  Value binary(const Expr& e, Scope& sc) {
    const std::string& op = e.name;
    if (op == "and") { Value a = eval(*e.args[0], sc); return a.truthy() ? eval(*e.args[1], sc) : a; }
    if (op == "or") { Value a = eval(*e.args[0], sc); return a.truthy() ? a : eval(*e.args[1], sc); }
    const Value a = eval(*e.args[0], sc), b = eval(*e.args[1], sc);
    if (op == "~") return Value::str(to_str(a) + to_str(b));
    if (a.kind == Value::kUndefined) fail_undefined(a);
    if (b.kind == Value::kUndefined) fail_undefined(b);
    auto unsupported = [&]() -> Failure {
      return Failure(fmt::format("unsupported operand type(s) for {}: '{}' and '{}'", op, type_name(a), type_name(b)));
    };
    if (op == "+") {
      if (a.kind == Value::kString && b.kind == Value::kString) return Value::str(a.s + b.s);
      if (a.kind == Value::kArray && b.kind == Value::kArray && a.is_tuple == b.is_tuple) {
        Array r = *a.arr;
        r.insert(r.end(), b.arr->begin(), b.arr->end());
        return a.is_tuple ? Value::tuple(std::move(r)) : Value::array(std::move(r));
      }
      if (a.kind == Value::kString) throw Failure(fmt::format("can only concatenate str (not \"{}\") to str", type_name(b)));
      if (a.kind == Value::kArray) throw Failure(fmt::format("can only concatenate {} (not \"{}\") to {}", type_name(a), type_name(b), type_name(a)));
    }
    if (op == "*") {
      const Value* seq = a.kind == Value::kString || a.kind == Value::kArray ? &a : b.kind == Value::kString || b.kind == Value::kArray ? &b : nullptr;
      const Value* cnt = seq == &a ? &b : &a;
      if (seq && (cnt->kind == Value::kInt || cnt->kind == Value::kBool)) {
        const long long n = std::max(0LL, cnt->kind == Value::kInt ? cnt->i : static_cast<long long>(cnt->b));
        // A bound on the result (16 Mi characters or items): an error, never an out-of-memory.
        const std::size_t unit = seq->kind == Value::kString ? seq->s.size() : seq->arr->size();
        if (unit > 0 && n > static_cast<long long>((std::size_t{1} << 24) / unit))
          throw Failure(fmt::format("sequence repetition too large ({} x {})", unit, n));
        if (seq->kind == Value::kString) {
          std::string r;
          for (long long k = 0; k < n; ++k) r += seq->s;
          return Value::str(r);
        }
        Array r;
        for (long long k = 0; k < n; ++k) r.insert(r.end(), seq->arr->begin(), seq->arr->end());
        return seq->is_tuple ? Value::tuple(std::move(r)) : Value::array(std::move(r));
      }
    }
    if (op == "%" && a.kind == Value::kString) return Value::str(percent_format(a.s, b));
    if (!a.is_number() || !b.is_number()) throw unsupported();
    const bool ints = a.kind != Value::kFloat && b.kind != Value::kFloat;
    const long long ai = a.kind == Value::kInt ? a.i : a.b, bi = b.kind == Value::kInt ? b.i : b.b;
    // Python's integers are unbounded, ours are 64-bit: an overflow is an error, never UB.
    long long r = 0;
    if (op == "+") {
      if (!ints) return Value::real(a.num() + b.num());
      if (__builtin_add_overflow(ai, bi, &r)) throw Failure("integer overflow in +");
      return Value::integer(r);
    }
    if (op == "-") {
      if (!ints) return Value::real(a.num() - b.num());
      if (__builtin_sub_overflow(ai, bi, &r)) throw Failure("integer overflow in -");
      return Value::integer(r);
    }
    if (op == "*") {
      if (!ints) return Value::real(a.num() * b.num());
      if (__builtin_mul_overflow(ai, bi, &r)) throw Failure("integer overflow in *");
      return Value::integer(r);
    }
    if (op == "/") {
      if (b.num() == 0) throw Failure("division by zero");
      return Value::real(a.num() / b.num());
    }
    if (op == "//" || op == "%") {
      if (b.num() == 0) throw Failure(ints ? "integer division or modulo by zero" : "float modulo");
      if (ints) {
        if (ai == LLONG_MIN && bi == -1) throw Failure(fmt::format("integer overflow in {}", op));
        long long q = ai / bi, r = ai % bi;
        if (r != 0 && ((r < 0) != (bi < 0))) { --q; r += bi; }
        return Value::integer(op == "//" ? q : r);
      }
      // CPython's float_divmod.
      const double vx = a.num(), wx = b.num();
      double mod = std::fmod(vx, wx), div = (vx - mod) / wx;
      if (mod != 0) {
        if ((wx < 0) != (mod < 0)) { mod += wx; div -= 1.0; }
      } else {
        mod = std::copysign(0.0, wx);
      }
      double floordiv = std::copysign(0.0, vx / wx);
      if (div != 0) {
        floordiv = std::floor(div);
        if (div - floordiv > 0.5) floordiv += 1.0;
      }
      return Value::real(op == "//" ? floordiv : mod);
    }
    if (op == "**") {
      if (ints && bi >= 0) {
        // Square-and-multiply; Python's integers are unbounded, ours are 64-bit: an overflow is an
        // error, never a wrapped (undefined) value or a billion-step loop.
        long long r = 1, base = ai;
        for (long long e = bi; e > 0; e >>= 1) {
          if ((e & 1) && __builtin_mul_overflow(r, base, &r)) throw Failure("integer overflow in **");
          if (e > 1 && __builtin_mul_overflow(base, base, &base)) throw Failure("integer overflow in **");
        }
        return Value::integer(r);
      }
      return Value::real(std::pow(a.num(), b.num()));
    }
    throw unsupported();
  }

  const std::string& name_;
  const RenderOptions& options_;
  std::vector<std::shared_ptr<Frame>> pinned_;  // frames captured by macros, kept for the render
  static constexpr int kMaxCallDepth = 100;  // nested macro calls
  int call_depth_ = 0;
};

}  // namespace

struct Template::Impl {
  std::string name;
  Body nodes;
};

Template::Template(std::string_view source, std::string name) : impl_(std::make_unique<Impl>()) {
  impl_->name = std::move(name);
  const std::string src = normalize_source(source);
  Lexer lexer(src, impl_->name);
  Parser parser(lexer.run(), impl_->name);
  impl_->nodes = parser.parse_all();
}

Template::~Template() = default;
Template::Template(Template&&) noexcept = default;
Template& Template::operator=(Template&&) noexcept = default;

std::string Template::render(const nlohmann::ordered_json& context, const RenderOptions& options) const {
  if (!context.is_object() && !context.is_null()) throw Error(impl_->name + ": render context must be a JSON object");
  Scope sc;
  sc.frames.push_back(std::make_shared<Frame>());
  Renderer r(impl_->name, options);
  try {
    if (context.is_object())
      for (auto it = context.begin(); it != context.end(); ++it) sc.top()[it.key()] = from_json(it.value());
  } catch (const Failure& f) {
    throw Error(fmt::format("{}: render context: {}", impl_->name, f.what()));
  }
  std::string out;
  r.run(impl_->nodes, sc, out);
  return out;
}

}  // namespace kvcompact::jinja
