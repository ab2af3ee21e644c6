#include "io/qa_dataset.h"

#include "core/utf8.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/text_documents.h"

namespace kvcompact {
namespace {

using json = nlohmann::json;

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

void append_utf8(std::string& out, unsigned long cp) {
  if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) cp = 0xFFFD;
  utf8::append(out, static_cast<std::uint32_t>(cp));
}

// Decodes one entity starting at s[i] == '&'; returns the bytes consumed (0 when not an entity).
std::size_t decode_entity(std::string_view s, std::size_t i, std::string& out) {
  const std::size_t semi = s.find(';', i);
  if (semi == std::string_view::npos || semi - i > 10) return 0;
  const std::string_view name = s.substr(i + 1, semi - i - 1);
  static const std::pair<const char*, const char*> kNamed[] = {
      {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}, {"nbsp", " "},
      {"mdash", "\xE2\x80\x94"}, {"ndash", "\xE2\x80\x93"}, {"hellip", "\xE2\x80\xA6"}};
  for (const auto& [n, v] : kNamed)
    if (name == n) {
      out += v;
      return semi - i + 1;
    }
  if (name.size() >= 2 && name[0] == '#') {
    const bool hex = name[1] == 'x' || name[1] == 'X';
    const std::string digits(name.substr(hex ? 2 : 1));
    if (digits.empty()) return 0;
    for (char c : digits)
      if (!(hex ? std::isxdigit(static_cast<unsigned char>(c)) : std::isdigit(static_cast<unsigned char>(c))))
        return 0;
    if (digits.size() > 7) return 0;
    append_utf8(out, std::stoul(digits, nullptr, hex ? 16 : 10));
    return semi - i + 1;
  }
  return 0;
}

bool is_block_tag(const std::string& tag) {
  static const char* kBlocks[] = {"p", "br", "div", "h1", "h2", "h3", "h4", "h5", "h6", "hr",
                                  "li", "tr", "title", "blockquote", "pre", "ul", "ol", "table"};
  for (const char* b : kBlocks)
    if (tag == b) return true;
  return false;
}

// Collapses whitespace in each paragraph (paragraphs separated by '\f'), joins them by "\n\n".
std::string normalize_paragraphs(const std::string& raw) {
  std::string out, para;
  auto flush = [&] {
    while (!para.empty() && para.back() == ' ') para.pop_back();
    if (!para.empty()) {
      if (!out.empty()) out += "\n\n";
      out += para;
    }
    para.clear();
  };
  for (char c : raw) {
    if (c == '\f') {
      flush();
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      if (!para.empty() && para.back() != ' ') para += ' ';
    } else {
      para += c;
    }
  }
  flush();
  return out;
}

const json& need_field(const json& obj, const char* key, const std::string& where, const std::string& what) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) throw Error(fmt::format("{}: missing field '{}'", where, what));
  return *it;
}

std::string need_string(const json& obj, const char* key, const std::string& where, const std::string& what) {
  const json& v = need_field(obj, key, where, what);
  if (!v.is_string()) throw Error(fmt::format("{}: field '{}' must be a string", where, what));
  return v.get<std::string>();
}

int need_label(const json& obj, const char* key, const std::string& where, const std::string& what,
               std::size_t n_options) {
  const json& v = need_field(obj, key, where, what);
  long long label = 0;
  if (v.is_number_integer()) {
    label = v.get<long long>();
  } else if (v.is_string()) {  // tolerate "2"
    const std::string s = v.get<std::string>();
    if (s.empty() || s.size() > 6 || !std::all_of(s.begin(), s.end(), ::isdigit))
      throw Error(fmt::format("{}: field '{}' must be an integer, got \"{}\"", where, what, s));
    label = std::stoll(s);
  } else {
    throw Error(fmt::format("{}: field '{}' must be an integer", where, what));
  }
  if (label < 1 || label > static_cast<long long>(n_options))
    throw Error(fmt::format("{}: field '{}' is {}, not in 1..{} (1-based option index)", where, what, label,
                            n_options));
  return static_cast<int>(label);
}

QaArticle parse_line(const json& j, const std::string& where, int line) {
  if (!j.is_object()) throw Error(fmt::format("{}: a line must hold one JSON object", where));
  QaArticle a;
  a.line = line;
  for (const char* k : {"article_id", "unique_id"}) {
    auto it = j.find(k);
    if (it != j.end() && (it->is_string() || it->is_number())) {
      a.id = it->is_string() ? it->get<std::string>() : it->dump();
      break;
    }
  }
  if (a.id.empty()) a.id = fmt::format("line {}", line);
  if (auto it = j.find("title"); it != j.end() && it->is_string()) a.title = it->get<std::string>();
  if (auto it = j.find("prompt_template"); it != j.end()) {
    if (!it->is_string()) throw Error(fmt::format("{}: field 'prompt_template' must be a string", where));
    a.prompt_template = it->get<std::string>();
  }
  const json& art = need_field(j, "article", where, "article");
  std::string text;
  if (art.is_string()) {
    text = art.get<std::string>();
  } else if (art.is_array()) {
    for (const auto& part : art) {
      if (!part.is_string()) throw Error(fmt::format("{}: field 'article' must hold strings", where));
      text += part.get<std::string>();
    }
  } else {
    throw Error(fmt::format("{}: field 'article' must be a string or an array of strings", where));
  }
  a.article = looks_like_html(text) ? strip_html(text) : text;
  if (a.article.find_first_not_of(" \t\r\n") == std::string::npos)
    throw Error(fmt::format("{}: field 'article' is empty", where));

  auto read_options = [&](const json& arr, const std::string& what) {
    if (!arr.is_array()) throw Error(fmt::format("{}: field '{}' must be an array of strings", where, what));
    std::vector<std::string> opts;
    for (const auto& o : arr) {
      if (!o.is_string()) throw Error(fmt::format("{}: field '{}' must be an array of strings", where, what));
      opts.push_back(o.get<std::string>());
    }
    if (opts.size() < 2) throw Error(fmt::format("{}: field '{}' needs at least 2 options", where, what));
    return opts;
  };

  if (auto it = j.find("questions"); it != j.end()) {
    if (!it->is_array() || it->empty())
      throw Error(fmt::format("{}: field 'questions' must be a non-empty array", where));
    for (std::size_t q = 0; q < it->size(); ++q) {
      const json& qj = (*it)[q];
      const std::string p = fmt::format("questions[{}]", q);
      if (!qj.is_object()) throw Error(fmt::format("{}: field '{}' must be an object", where, p));
      QaQuestion qq;
      qq.question = need_string(qj, "question", where, p + ".question");
      qq.options = read_options(need_field(qj, "options", where, p + ".options"), p + ".options");
      qq.gold_label = need_label(qj, "gold_label", where, p + ".gold_label", qq.options.size());
      a.questions.push_back(std::move(qq));
    }
  } else if (j.contains("question1")) {  // flattened layout
    for (int q = 1; j.contains(fmt::format("question{}", q)); ++q) {
      const std::string qk = fmt::format("question{}", q);
      QaQuestion qq;
      qq.question = need_string(j, qk.c_str(), where, qk);
      for (int k = 1; j.contains(fmt::format("{}option{}", qk, k)); ++k) {
        const std::string ok = fmt::format("{}option{}", qk, k);
        qq.options.push_back(need_string(j, ok.c_str(), where, ok));
      }
      if (qq.options.size() < 2)
        throw Error(fmt::format("{}: missing field '{}option{}' (a question needs at least 2 options)", where,
                                qk, qq.options.size() + 1));
      const std::string gk = qk + "_gold_label";
      qq.gold_label = need_label(j, gk.c_str(), where, gk, qq.options.size());
      a.questions.push_back(std::move(qq));
    }
  } else {
    throw Error(fmt::format("{}: missing field 'questions'", where));
  }
  return a;
}

}  // namespace

bool looks_like_html(std::string_view text) {
  const std::string l = lower(text.substr(0, std::min<std::size_t>(text.size(), 1 << 20)));
  for (const char* m : {"<html", "<p>", "<p ", "<br", "</p>", "<!doctype"})
    if (l.find(m) != std::string::npos) return true;
  return false;
}

std::string strip_html(std::string_view s) {
  std::string raw;
  std::size_t i = 0;
  const std::string low = lower(s);
  while (i < s.size()) {
    const char c = s[i];
    if (c == '<') {
      if (low.compare(i, 4, "<!--") == 0) {
        const std::size_t e = low.find("-->", i + 4);
        i = e == std::string::npos ? s.size() : e + 3;
        continue;
      }
      const std::size_t e = s.find('>', i);
      if (e == std::string_view::npos) {  // a lone '<' is text
        raw += c;
        ++i;
        continue;
      }
      std::size_t k = i + 1;
      if (k < s.size() && (s[k] == '/' || s[k] == '!' || s[k] == '?')) ++k;
      std::string tag;
      while (k < e && std::isalnum(static_cast<unsigned char>(s[k]))) tag += static_cast<char>(std::tolower(static_cast<unsigned char>(s[k++])));
      const bool closing = s[i + 1] == '/';
      if (!closing && (tag == "head" || tag == "script" || tag == "style")) {
        const std::size_t close = low.find("</" + tag, e);
        const std::size_t end = close == std::string::npos ? s.size() : low.find('>', close);
        i = end == std::string::npos ? s.size() : end + 1;
        raw += '\f';
        continue;
      }
      if (is_block_tag(tag)) raw += '\f';
      i = e + 1;
    } else if (c == '&') {
      const std::size_t used = decode_entity(s, i, raw);
      if (used == 0) raw += c;
      i += used ? used : 1;
    } else {
      raw += c;
      ++i;
    }
  }
  return normalize_paragraphs(raw);
}

std::vector<QaArticle> parse_qa_jsonl(std::string_view text, const std::string& name) {
  std::vector<QaArticle> out;
  int line_no = 0;
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    start = end + 1;
    ++line_no;
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = fmt::format("{}:{}", name, line_no);
    json j;
    try {
      j = json::parse(line);
    } catch (const json::parse_error& e) {
      throw Error(fmt::format("{}: invalid JSON at byte {}", where, e.byte));
    } catch (const json::exception& e) {  // out_of_range: a number beyond double
      throw Error(fmt::format("{}: invalid JSON: {}", where, e.what()));
    }
    out.push_back(parse_line(j, where, line_no));
    out.back().file = name;
  }
  if (out.empty()) throw Error(fmt::format("{}: no article (empty QA file)", name));
  return out;
}

std::vector<QaArticle> read_qa_jsonl(const std::string& path) {
  return parse_qa_jsonl(read_text_file(path), path);
}

std::string qa_article_to_jsonl(const QaArticle& a) {
  nlohmann::ordered_json j;
  j["article_id"] = a.id;
  j["title"] = a.title;
  j["article"] = a.article;
  if (!a.prompt_template.empty()) j["prompt_template"] = a.prompt_template;
  j["questions"] = nlohmann::ordered_json::array();
  for (const auto& q : a.questions) {
    nlohmann::ordered_json qj;
    qj["question"] = q.question;
    qj["options"] = q.options;
    qj["gold_label"] = q.gold_label;
    j["questions"].push_back(qj);
  }
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace kvcompact
