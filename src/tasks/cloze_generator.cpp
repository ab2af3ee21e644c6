#include "tasks/cloze_generator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "core/error.h"
#include "tasks/text_words.h"

namespace kvcompact {

uint64_t SplitMix64::next() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

uint64_t SplitMix64::below(uint64_t n) {
  if (n <= 1) return 0;
  const uint64_t limit = UINT64_MAX - UINT64_MAX % n;  // accept [0, limit)
  uint64_t x;
  do x = next();
  while (x >= limit);
  return x % n;
}

namespace {

bool is_alpha(char c) { return std::isalpha(static_cast<unsigned char>(c)) != 0; }

using text_words::shuffle;

struct Word {
  std::size_t start;
  std::string text;
};

struct Sentence {
  std::size_t start, end;  // [start, end) bytes of the article
};

/// Sentences: a terminator . ! ? (then closing quotes) followed by whitespace or the end.
std::vector<Sentence> split_sentence_spans(const std::string& t) {
  std::vector<Sentence> out;
  std::size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    if (i >= t.size()) break;
    const std::size_t start = i;
    while (i < t.size()) {
      const char c = t[i++];
      if (c == '.' || c == '!' || c == '?') {
        while (i < t.size() && (t[i] == '"' || t[i] == '\'' || t[i] == '.' || t[i] == '!' || t[i] == '?')) ++i;
        if (i >= t.size() || std::isspace(static_cast<unsigned char>(t[i]))) break;
      }
    }
    out.push_back({start, i});
  }
  return out;
}

/// Maximal runs of ASCII letters in [begin, end).
std::vector<Word> words_in(const std::string& t, std::size_t begin, std::size_t end) {
  std::vector<Word> out;
  std::size_t i = begin;
  while (i < end) {
    if (!is_alpha(t[i])) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < end && is_alpha(t[j])) ++j;
    out.push_back({i, t.substr(i, j - i)});
    i = j;
  }
  return out;
}

bool whole_word_before(const std::string& t, const std::string& w, std::size_t limit) {
  std::size_t pos = 0;
  while ((pos = t.find(w, pos)) != std::string::npos && pos + w.size() <= limit) {
    const bool left = pos == 0 || !is_alpha(t[pos - 1]);
    const bool right = pos + w.size() >= t.size() || !is_alpha(t[pos + w.size()]);
    if (left && right) return true;
    ++pos;
  }
  return false;
}

struct Candidate {
  std::size_t sentence;
  std::size_t sentence_start, word_start;
  std::string word;
};

bool upper_first(const std::string& w) { return std::isupper(static_cast<unsigned char>(w[0])) != 0; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool is_content_word(std::string_view word) {
  if (word.size() < 3) return false;
  for (char c : word)
    if (!is_alpha(c)) return false;
  static const std::set<std::string> kStop = {
      "the", "and", "was", "were", "she", "her", "hers", "his", "him", "they", "them", "their",
      "you", "your", "are", "but", "for", "not", "with", "had", "has", "have", "that", "this",
      "there", "then", "than", "when", "what", "who", "why", "how", "where", "which", "said",
      "from", "into", "onto", "out", "all", "can", "could", "would", "should", "will", "did",
      "does", "one", "day", "very", "too", "also", "its", "our", "ours", "about", "over",
      "under", "again", "just", "some", "any", "each", "every", "because", "after", "before",
      "while", "upon", "time", "once", "yes", "now", "off", "down", "too", "got", "get", "went",
      "let", "lets", "see", "saw", "like", "liked", "want", "wanted", "more", "most", "much",
      "many", "both", "own", "same", "such", "only", "these", "those", "here", "being", "been",
      "these", "him", "himself", "herself", "itself", "themselves", "myself", "way", "things",
      "thing", "lot", "big", "little", "happy", "sad", "good", "new", "old", "know", "knew"};
  return kStop.count(lower(std::string(word))) == 0;
}

std::vector<QaArticle> make_cloze(const std::vector<std::string>& stories, const ClozeOptions& o) {
  if (o.articles < 1) throw Error(fmt::format("--articles {} must be >= 1", o.articles));
  if (o.stories_per_article < 1)
    throw Error(fmt::format("--stories-per-article {} must be >= 1", o.stories_per_article));
  if (o.questions < 1) throw Error(fmt::format("--questions {} must be >= 1", o.questions));
  const std::size_t K = static_cast<std::size_t>(o.stories_per_article);
  const std::size_t n_blocks = stories.size() / K;
  if (n_blocks == 0)
    throw Error(fmt::format("make-cloze: {} stories cannot fill one article of {}", stories.size(), K));
  SplitMix64 rng(o.seed);
  std::vector<std::size_t> order(n_blocks);
  for (std::size_t b = 0; b < n_blocks; ++b) order[b] = b;
  shuffle(order, rng);

  std::vector<QaArticle> out;
  std::size_t too_long = 0, too_few = 0;
  for (std::size_t b : order) {
    if (static_cast<int>(out.size()) == o.articles) break;
    std::string text;
    for (std::size_t k = 0; k < K; ++k) {
      if (k) text += "\n\n";
      text += stories[b * K + k];
    }
    const bool fits = o.count_tokens ? o.count_tokens(text) <= o.max_article_tokens
                                     : static_cast<int>(text.size()) <= o.max_article_chars;
    if (!fits) {
      ++too_long;
      continue;
    }
    const std::vector<Sentence> sents = split_sentence_spans(text);
    std::vector<Candidate> cands;
    std::set<std::string> pool_set;
    for (std::size_t s = 0; s < sents.size(); ++s) {
      const std::vector<Word> ws = words_in(text, sents[s].start, sents[s].end);
      for (std::size_t w = 0; w < ws.size(); ++w) {
        const Word& wd = ws[w];
        if (!is_content_word(wd.text)) continue;
        const std::size_t after = wd.start + wd.text.size();
        if (after < text.size() && (text[after] == '\'' || text[after] == '-')) continue;  // "Tom's", "couldn't"
        if (wd.start > 0 && (text[wd.start - 1] == '\'' || text[wd.start - 1] == '-')) continue;
        pool_set.insert(wd.text);
        if (w == 0 || wd.start == sents[s].start || text[wd.start - 1] != ' ') continue;
        if (!whole_word_before(text, wd.text, sents[s].start)) continue;
        cands.push_back({s, sents[s].start, wd.start, wd.text});
      }
    }
    const std::vector<std::string> pool(pool_set.begin(), pool_set.end());  // sorted: deterministic
    shuffle(cands, rng);
    std::vector<Candidate> chosen;
    std::set<std::size_t> used;
    for (const Candidate& c : cands) {
      if (static_cast<int>(chosen.size()) == o.questions) break;
      if (used.count(c.sentence)) continue;
      // Distractors: other content words (case-insensitively different), preferring the same case.
      std::vector<std::string> same, other;
      std::set<std::string> seen{lower(c.word)};
      const std::string prefix_text = text.substr(c.sentence_start, c.word_start - c.sentence_start);
      for (const auto& w : pool) {
        if (!seen.insert(lower(w)).second || whole_word_before(prefix_text, w, prefix_text.size())) continue;
        (upper_first(w) == upper_first(c.word) ? same : other).push_back(w);
      }
      if (same.size() + other.size() < 3) continue;
      used.insert(c.sentence);
      chosen.push_back(c);
    }
    if (static_cast<int>(chosen.size()) < o.questions) {
      ++too_few;
      continue;
    }
    std::sort(chosen.begin(), chosen.end(),
              [](const Candidate& a, const Candidate& b) { return a.word_start < b.word_start; });
    QaArticle art;
    art.id = fmt::format("cloze-s{}-{}", o.seed, out.size() + 1);
    art.title = fmt::format("stories {}-{}", b * K + 1, b * K + K);
    art.article = text;
    art.prompt_template = "{question}";
    for (const Candidate& c : chosen) {
      std::vector<std::string> same, other;
      std::set<std::string> seen{lower(c.word)};
      const std::string prefix_text = text.substr(c.sentence_start, c.word_start - c.sentence_start);
      for (const auto& w : pool) {
        if (!seen.insert(lower(w)).second || whole_word_before(prefix_text, w, prefix_text.size())) continue;
        (upper_first(w) == upper_first(c.word) ? same : other).push_back(w);
      }
      shuffle(same, rng);
      shuffle(other, rng);
      std::vector<std::string> distractors;
      for (auto* v : {&same, &other})
        for (const auto& w : *v)
          if (distractors.size() < 3) distractors.push_back(w);
      QaQuestion q;
      std::string prefix = text.substr(c.sentence_start, c.word_start - c.sentence_start);
      while (!prefix.empty() && std::isspace(static_cast<unsigned char>(prefix.back()))) prefix.pop_back();
      q.question = prefix;
      const std::size_t gold = rng.below(4);
      std::size_t d = 0;
      for (std::size_t i = 0; i < 4; ++i) q.options.push_back(i == gold ? c.word : distractors[d++]);
      q.gold_label = static_cast<int>(gold) + 1;
      art.questions.push_back(std::move(q));
    }
    out.push_back(std::move(art));
  }
  if (static_cast<int>(out.size()) < o.articles)
    throw Error(fmt::format("make-cloze: only {} of {} articles could be made from {} blocks of {} stories "
                            "({} over the length budget, {} with fewer than {} usable questions)",
                            out.size(), o.articles, n_blocks, K, too_long, too_few, o.questions));
  return out;
}

}  // namespace kvcompact
