#include "io/text_documents.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "core/error.h"

namespace kvcompact {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v'; }

std::string_view strip(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

}  // namespace

std::vector<std::string> split_documents(std::string_view text) {
  std::vector<std::string> docs;
  std::string current;
  auto flush = [&] {
    std::string_view s = strip(current);
    if (!s.empty()) docs.emplace_back(s);
    current.clear();
  };
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (strip(line).empty()) {
      flush();
    } else {
      current.append(line);
      current.push_back('\n');
    }
    start = end + 1;
  }
  flush();
  return docs;
}

std::vector<std::string> split_wikitext_articles(std::string_view text) {
  std::vector<std::string> docs;
  std::string current;
  auto flush = [&] {
    std::string_view s = strip(current);
    if (!s.empty()) docs.emplace_back(s);
    current.clear();
  };
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view line = text.substr(start, end - start);
    const std::string_view t = strip(line);
    const bool heading = t.size() >= 5 && t.starts_with("= ") && t.ends_with(" =") && !t.starts_with("= =") &&
                         !t.ends_with("= =");
    if (heading) flush();
    current.append(line);
    current.push_back('\n');
    start = end + 1;
  }
  flush();
  return docs;
}

std::vector<std::string> split_corpus(std::string_view text, const std::string& how) {
  if (how == "blank-lines") return split_documents(text);
  if (how == "wikitext") return split_wikitext_articles(text);
  throw Error(fmt::format("--split '{}' is not a document split (use blank-lines or wikitext)", how));
}

std::string read_text_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open data file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read error", path));
  std::string text = ss.str();
  if (strip(text).empty()) throw Error(fmt::format("{}: empty data file (no text)", path));
  return text;
}

std::vector<std::string> read_documents(const std::string& path, int max_docs, const std::string& split) {
  auto docs = split_corpus(read_text_file(path), split);
  if (docs.empty()) throw Error(fmt::format("{}: no documents found", path));
  if (max_docs > 0 && static_cast<int>(docs.size()) > max_docs) docs.resize(max_docs);
  return docs;
}

}  // namespace kvcompact
