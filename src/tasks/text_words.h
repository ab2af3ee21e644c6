// Small text and shuffling helpers shared by the task generators (task_generators.cpp,
// ruler_tasks.cpp): data files and the essay haystack, white-space word splitting, sentence ends,
// a string hash and a seeded Fisher-Yates shuffle.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tasks/cloze_generator.h"

namespace kvcompact::text_words {

/// ASCII white space (space, \t, \n, \r, \f, \v).
inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/// Words at runs of white space (all white space dropped).
inline std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> words;
  std::size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    const std::size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.push_back(text.substr(start, i - start));
  }
  return words;
}

/// True when a word ends a sentence: '.', '!' or '?' before any closing quotes or parentheses.
inline bool ends_sentence(const std::string& w) {
  std::size_t e = w.size();
  while (e > 0 && (w[e - 1] == '"' || w[e - 1] == '\'' || w[e - 1] == ')')) --e;
  return e > 0 && (w[e - 1] == '.' || w[e - 1] == '!' || w[e - 1] == '?');
}

/// True when a word starts with an ASCII upper-case letter.
inline bool starts_upper(const std::string& w) { return !w.empty() && w[0] >= 'A' && w[0] <= 'Z'; }

/// FNV-1a 64 of the bytes of s.
inline uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

/// The bytes of a data file of the shared data folder. Throws Error naming the path when it is
/// missing (with the --data-dir hint) or holds only white space.
std::string read_data_file(const std::string& path);

/// The Paul Graham essays of data_dir/needle_haystack/PaulGrahamEssays (every .txt, in file-name
/// order, each read by read_data_file) as one list of words (split_words). Throws Error naming the
/// folder when it is missing or has no .txt file, and as read_data_file.
std::vector<std::string> read_essay_words(const std::string& data_dir);

/// Indices i >= 1 of the words that start a sentence (ends_sentence(words[i - 1]) and
/// starts_upper(words[i])), in order; {0} when there is none.
std::vector<std::size_t> sentence_starts(const std::vector<std::string>& words);

/// Fisher-Yates shuffle of v with rng (SplitMix64, tasks/cloze_generator.h).
template <typename T>
void shuffle(std::vector<T>& v, SplitMix64& rng) {
  for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(i)]);
}

}  // namespace kvcompact::text_words
