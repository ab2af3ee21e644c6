#include "metrics/chrf.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "core/utf8.h"

namespace kvcompact {

namespace {

/// Python's str.isspace (what str.split() splits at, so what sacreBLEU's "".join(line.split())
/// removes).
bool is_python_space(std::uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/// Code points of the text without white space; an invalid byte becomes 0x110000 + byte (a value
/// that is no code point), so distinct invalid bytes stay distinct characters.
std::u32string code_points_without_space(const std::string& s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    const std::size_t start = i;
    std::uint32_t c = utf8::next(s, i);
    if (c == 0xFFFFFFFFu) c = 0x110000u + static_cast<unsigned char>(s[start]);
    if (!is_python_space(c)) out.push_back(static_cast<char32_t>(c));
  }
  return out;
}

using Counter = std::unordered_map<std::u32string, long long>;

Counter ngrams(const std::u32string& s, int n) {
  Counter c;
  const std::size_t len = static_cast<std::size_t>(n);
  for (std::size_t i = 0; i + len <= s.size(); ++i) ++c[s.substr(i, len)];
  return c;
}

}  // namespace

ChrfStats chrf_statistics(const std::string& hypothesis, const std::string& reference, int char_order) {
  if (char_order < 1) throw Error(fmt::format("chrF: char_order must be >= 1, got {}", char_order));
  const std::u32string h = code_points_without_space(hypothesis), r = code_points_without_space(reference);
  ChrfStats st;
  st.hyp.assign(char_order, 0);
  st.ref.assign(char_order, 0);
  st.match.assign(char_order, 0);
  for (int n = 1; n <= char_order; ++n) {
    const Counter hc = ngrams(h, n), rc = ngrams(r, n);
    long long hyp_count = 0, ref_count = 0, match = 0;
    for (const auto& [g, count] : hc) {
      hyp_count += count;
      if (auto it = rc.find(g); it != rc.end()) match += std::min(count, it->second);
    }
    for (const auto& [g, count] : rc) ref_count += count;
    st.hyp[n - 1] = rc.empty() ? 0 : hyp_count;  // sacreBLEU: no hits counted without reference n-grams
    st.ref[n - 1] = ref_count;
    st.match[n - 1] = match;
  }
  return st;
}

double chrf_from_statistics(const ChrfStats& stats, double beta, bool eps_smoothing) {
  const std::size_t order = stats.hyp.size();
  if (order == 0 || stats.ref.size() != order || stats.match.size() != order)
    throw Error("chrF: statistics are empty or of unequal sizes");
  if (!(beta > 0)) throw Error(fmt::format("chrF: beta must be > 0, got {}", beta));
  const double eps = 1e-16, factor = beta * beta;
  double score = 0, avg_prec = 0, avg_rec = 0;
  int effective_order = 0;
  for (std::size_t i = 0; i < order; ++i) {
    const long long n_hyp = stats.hyp[i], n_ref = stats.ref[i], n_match = stats.match[i];
    const double prec = n_hyp > 0 ? static_cast<double>(n_match) / static_cast<double>(n_hyp) : eps;
    const double rec = n_ref > 0 ? static_cast<double>(n_match) / static_cast<double>(n_ref) : eps;
    const double denom = factor * prec + rec;
    score += denom > 0 ? (1 + factor) * prec * rec / denom : eps;
    if (n_hyp > 0 && n_ref > 0) {
      avg_prec += prec;
      avg_rec += rec;
      ++effective_order;
    }
  }
  if (eps_smoothing) return 100 * score / static_cast<double>(order);
  if (effective_order == 0) return 0.0;
  avg_prec /= effective_order;
  avg_rec /= effective_order;
  if (avg_prec + avg_rec == 0) return 0.0;
  return 100 * (1 + factor) * avg_prec * avg_rec / (factor * avg_prec + avg_rec);
}

double chrf(const std::string& hypothesis, const std::string& reference, int char_order, double beta,
            bool eps_smoothing) {
  return chrf_from_statistics(chrf_statistics(hypothesis, reference, char_order), beta, eps_smoothing);
}

double corpus_chrf(const std::vector<std::string>& hypotheses, const std::vector<std::string>& references,
                   int char_order, double beta, bool eps_smoothing) {
  if (char_order < 1) throw Error(fmt::format("chrF: char_order must be >= 1, got {}", char_order));
  if (hypotheses.size() != references.size())
    throw Error(fmt::format("chrF: {} hypotheses but {} references", hypotheses.size(), references.size()));
  if (hypotheses.empty()) throw Error("chrF: no sentences to score");
  ChrfStats total;
  total.hyp.assign(char_order, 0);
  total.ref.assign(char_order, 0);
  total.match.assign(char_order, 0);
  for (std::size_t s = 0; s < hypotheses.size(); ++s) {
    const ChrfStats st = chrf_statistics(hypotheses[s], references[s], char_order);
    for (int i = 0; i < char_order; ++i) {
      total.hyp[i] += st.hyp[i];
      total.ref[i] += st.ref[i];
      total.match[i] += st.match[i];
    }
  }
  return chrf_from_statistics(total, beta, eps_smoothing);
}

}  // namespace kvcompact
