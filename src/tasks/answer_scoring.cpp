#include "tasks/answer_scoring.h"

#include <fmt/format.h>

#include "core/error.h"
#include "core/utf8.h"

namespace kvcompact {

namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ascii_alnum(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool is_ascii_punct(unsigned char c) {
  return (c >= 0x21 && c <= 0x2F) || (c >= 0x3A && c <= 0x40) || (c >= 0x5B && c <= 0x60) || (c >= 0x7B && c <= 0x7E);
}
bool is_ascii_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string normalize_number(const std::string& t) {
  std::size_t i = 0;
  while (i < t.size() && !is_digit(t[i])) ++i;
  if (i == t.size()) return "";
  bool negative = i > 0 && t[i - 1] == '-' && (i == 1 || !is_ascii_alnum(t[i - 2]));
  std::string int_part, frac_part;
  while (i < t.size()) {
    if (is_digit(t[i])) {
      int_part += t[i++];
    } else if (t[i] == ',' && i + 3 < t.size() && is_digit(t[i + 1]) && is_digit(t[i + 2]) && is_digit(t[i + 3]) &&
               (i + 4 >= t.size() || !is_digit(t[i + 4]))) {
      ++i;  // thousands separator
    } else {
      break;
    }
  }
  if (i + 1 < t.size() && t[i] == '.' && is_digit(t[i + 1])) {
    ++i;
    while (i < t.size() && is_digit(t[i])) frac_part += t[i++];
  }
  std::size_t nz = int_part.find_first_not_of('0');
  int_part = nz == std::string::npos ? "0" : int_part.substr(nz);
  while (!frac_part.empty() && frac_part.back() == '0') frac_part.pop_back();
  std::string out = int_part;
  if (!frac_part.empty()) out += "." + frac_part;
  if (negative && out != "0") out = "-" + out;
  return out;
}

std::string normalize_word(const std::string& t) {
  std::size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && is_ascii_space(t[i])) ++i;
    std::string word;
    while (i < t.size() && !is_ascii_space(t[i])) {
      const char c = t[i++];
      if (!is_ascii_punct(static_cast<unsigned char>(c))) word += lower(c);
    }
    if (!word.empty()) return word;
  }
  return "";
}

std::string normalize_text(const std::string& t) {
  std::string out;
  bool pending_space = false;
  std::size_t i = 0;
  while (i < t.size()) {
    const std::size_t start = i;
    const std::uint32_t cp = utf8::next(t, i);
    if (cp < 0x80 && is_ascii_space(static_cast<char>(cp))) {
      pending_space = !out.empty();
      continue;
    }
    if (cp < 0x80 && is_ascii_punct(static_cast<unsigned char>(cp))) continue;
    if (cp >= 0x2010 && cp <= 0x205E) continue;  // General Punctuation: dashes, quotes, ellipsis
    if (pending_space) out += ' ';
    pending_space = false;
    if (cp < 0x80)
      out += lower(static_cast<char>(cp));
    else
      out.append(t, start, i - start);  // other characters (and invalid bytes) kept as they are
  }
  return out;
}

}  // namespace

std::string normalize_answer(const std::string& text, const std::string& answer_type) {
  if (answer_type == "number") return normalize_number(text);
  if (answer_type == "word") return normalize_word(text);
  if (answer_type == "text") return normalize_text(text);
  if (answer_type == "recall") {
    std::string out = text;
    for (char& c : out) c = lower(c);
    return out;
  }
  throw Error(fmt::format("unknown answer_type \"{}\" (expected number, word, text or recall)", answer_type));
}

bool answer_correct(const std::string& prediction, const std::string& reference, const std::string& answer_type) {
  const std::string ref = normalize_answer(reference, answer_type);
  if (answer_type == "recall") return !ref.empty() && normalize_answer(prediction, answer_type).find(ref) != std::string::npos;
  return !ref.empty() && normalize_answer(prediction, answer_type) == ref;
}

namespace {

/// How many of the references occur in the prediction (both lower-cased).
int references_found(const std::string& prediction, const std::vector<std::string>& references, const char* what) {
  if (references.empty()) throw Error(fmt::format("{}: no references", what));
  const std::string pred = normalize_answer(prediction, "recall");
  int found = 0;
  for (const std::string& r : references) {
    const std::string ref = normalize_answer(r, "recall");
    if (!ref.empty() && pred.find(ref) != std::string::npos) ++found;
  }
  return found;
}

}  // namespace

double string_match_all(const std::string& prediction, const std::vector<std::string>& references) {
  return static_cast<double>(references_found(prediction, references, "string_match_all")) /
         static_cast<double>(references.size());
}

double string_match_part(const std::string& prediction, const std::vector<std::string>& references) {
  return references_found(prediction, references, "string_match_part") > 0 ? 1.0 : 0.0;
}

double item_score(const std::string& prediction, const TaskItem& item) {
  if (item.answer_type == "recall")
    return string_match_all(prediction, item.references.empty() ? std::vector<std::string>{item.reference} : item.references);
  return answer_correct(prediction, item.reference, item.answer_type) ? 1.0 : 0.0;
}

std::string cut_at_stop(const std::string& text, const std::vector<std::string>& stop) {
  std::size_t cut = text.size();
  for (const std::string& s : stop) {
    if (s.empty()) continue;
    const std::size_t p = text.find(s);
    if (p != std::string::npos && p < cut) cut = p;
  }
  return text.substr(0, cut);
}

bool cognitive_mirrors_correct(double bleu, double rouge1, double cosine) {
  return bleu > 0.8 || rouge1 > 0.6 || cosine > 0.6;
}

}  // namespace kvcompact
