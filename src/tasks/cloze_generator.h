// A small cloze-style multiple-choice QA set built from short stories (e.g. TinyStories), in the
// QuALITY JSONL format of io/qa_dataset.h, that a tiny story model can attempt.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "io/qa_dataset.h"

namespace kvcompact {

/// Options of make_cloze.
struct ClozeOptions {
  int articles = 10;            ///< articles to make
  int stories_per_article = 3;  ///< K consecutive stories per article, joined by blank lines
  int questions = 4;            ///< questions per article (exactly this many)
  uint64_t seed = 1;            ///< everything random derives from it (SplitMix64)
  /// Token counter (e.g. the model's tokenizer, BOS included); when set, an article must have at
  /// most max_article_tokens tokens, else at most max_article_chars bytes.
  std::function<int(std::string_view)> count_tokens;
  int max_article_tokens = 440;  ///< stories260K: 512 positions minus room for question and answer
  int max_article_chars = 1200;  ///< byte budget used without a token counter
};

/// SplitMix64 (Steele, Lea, Flood 2014): a small, fully specified generator, so that a seed gives
/// the same bytes on every platform (std:: distributions are implementation-defined).
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next();
  /// Uniform integer in [0, n) by rejection (n >= 1).
  uint64_t below(uint64_t n);

 private:
  uint64_t state_;
};

/// True for a cloze target word: ASCII letters only, length >= 3, not a function word
/// ("the", "and", "was", "she", ... compared case-insensitively).
bool is_content_word(std::string_view word);

/// Builds the set. The stories are grouped into consecutive blocks of K (block b = stories
/// [b*K, b*K+K)); blocks are taken in a seeded random order, skipping those over the length budget
/// or with fewer than Q usable questions. An article's text is its K stories joined by "\n\n".
/// Each question restates one sentence of the article up to (not including) a target word: a
/// content word, not the sentence's first word, preceded by a space, that also occurs (same
/// spelling, as a whole word) earlier in the article than that sentence. Questions use distinct
/// sentences and are in article order. Options: the target plus 3 distinct distractors drawn from
/// the article's other content words not in the question (preferring the target's capitalization), the target at a
/// random position (gold_label 1-based). prompt_template is "{question}" (the question continues the
/// article as a restated sentence). Throws Error when fewer than `articles` articles can be made
/// or an option is out of range.
std::vector<QaArticle> make_cloze(const std::vector<std::string>& stories, const ClozeOptions& options);

}  // namespace kvcompact
