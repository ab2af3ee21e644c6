// The cloze QA generator: seeded reproducibility and the structure of every question.
#include <gtest/gtest.h>

#include <set>

#include "tasks/cloze_generator.h"
#include "core/error.h"
#include "io/qa_dataset.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;

const std::vector<std::string>& stories() {
  static const std::vector<std::string> s = read_documents(kShared + "/data/tinystories/tinystories_val_head.txt", 300);
  return s;
}

std::string to_bytes(const std::vector<QaArticle>& set) {
  std::string out;
  for (const auto& a : set) out += qa_article_to_jsonl(a) + "\n";
  return out;
}

bool whole_word_at(const std::string& t, std::size_t pos, const std::string& w) {
  if (t.compare(pos, w.size(), w) != 0) return false;
  const bool left = pos == 0 || !std::isalpha(static_cast<unsigned char>(t[pos - 1]));
  const std::size_t e = pos + w.size();
  return left && (e >= t.size() || !std::isalpha(static_cast<unsigned char>(t[e])));
}

bool has_word(const std::string& t, const std::string& w, std::size_t limit) {
  for (std::size_t p = t.find(w); p != std::string::npos && p + w.size() <= limit; p = t.find(w, p + 1))
    if (whole_word_at(t, p, w)) return true;
  return false;
}

TEST(SplitMix64, PublishedFirstOutputAndBoundedDraws) {
  SplitMix64 r(0);
  EXPECT_EQ(r.next(), 0xe220a8397b1dcdafULL);  // reference SplitMix64 from seed 0
  SplitMix64 s(42);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(s.below(7), 7u);
  EXPECT_EQ(s.below(1), 0u);
}

TEST(ClozeGenerator, SameSeedSameBytesDifferentSeedDifferent) {
  ClozeOptions o;
  o.articles = 4;
  o.stories_per_article = 3;
  o.questions = 3;
  o.seed = 11;
  const std::string a = to_bytes(make_cloze(stories(), o)), b = to_bytes(make_cloze(stories(), o));
  EXPECT_EQ(a, b);
  o.seed = 12;
  EXPECT_NE(a, to_bytes(make_cloze(stories(), o)));
}

TEST(ClozeGenerator, QuestionsRestateASentenceUpToARecalledWord) {
  const Model model = load_model(kShared + "/models/stories260K/stories260K.bin");
  ClozeOptions o;
  o.articles = 6;
  o.stories_per_article = 2;
  o.questions = 3;
  o.seed = 5;
  o.max_article_tokens = 300;
  o.count_tokens = [&](std::string_view t) { return static_cast<int>(model.tokenizer->encode(t, true).size()); };
  const auto set = make_cloze(stories(), o);
  ASSERT_EQ(set.size(), 6u);
  std::set<int> gold_positions;
  for (const QaArticle& a : set) {
    EXPECT_LE(static_cast<int>(model.tokenizer->encode(a.article, true).size()), 300);
    // The article is 2 consecutive stories of the input joined by a blank line.
    bool found = false;
    for (std::size_t i = 0; i + 1 < stories().size() && !found; i += 2)
      found = a.article == stories()[i] + "\n\n" + stories()[i + 1];
    EXPECT_TRUE(found) << a.article.substr(0, 80);
    EXPECT_EQ(a.prompt_template, "{question}");
    ASSERT_EQ(a.questions.size(), 3u);
    for (const QaQuestion& q : a.questions) {
      ASSERT_EQ(q.options.size(), 4u);
      ASSERT_GE(q.gold_label, 1);
      ASSERT_LE(q.gold_label, 4);
      gold_positions.insert(q.gold_label);
      const std::string& gold = q.options[q.gold_label - 1];
      EXPECT_TRUE(is_content_word(gold)) << gold;
      // The question is a prefix of a sentence, followed in the article by " " + gold.
      const std::size_t at = a.article.find(q.question + " " + gold);
      ASSERT_NE(at, std::string::npos) << q.question << " | " << gold;
      EXPECT_TRUE(whole_word_at(a.article, at + q.question.size() + 1, gold));
      // Not the sentence's first word: a non-empty restated prefix that starts a sentence.
      EXPECT_FALSE(q.question.empty());
      EXPECT_TRUE(at == 0 || std::isspace(static_cast<unsigned char>(a.article[at - 1]))) << q.question;
      EXPECT_TRUE(std::isupper(static_cast<unsigned char>(q.question[0])) || q.question[0] == '"') << q.question;
      // The gold word occurs earlier in the article than the restated sentence.
      EXPECT_TRUE(has_word(a.article, gold, at)) << gold;
      // Options are distinct words of the article.
      std::set<std::string> distinct(q.options.begin(), q.options.end());
      EXPECT_EQ(distinct.size(), 4u);
      for (const auto& opt : q.options) EXPECT_TRUE(has_word(a.article, opt, a.article.size())) << opt;
    }
  }
  EXPECT_GE(gold_positions.size(), 3u);  // the gold position varies
  // The file round-trips through the QA reader.
  const auto back = parse_qa_jsonl(to_bytes(set), "cloze.jsonl");
  ASSERT_EQ(back.size(), set.size());
  EXPECT_EQ(back[2].questions[1].gold_label, set[2].questions[1].gold_label);
  EXPECT_EQ(back[2].prompt_template, "{question}");
}

TEST(ClozeGenerator, ImpossibleRequestsAreRefused) {
  ClozeOptions o;
  o.articles = 1000;
  o.stories_per_article = 3;
  EXPECT_THROW(make_cloze(stories(), o), Error);
  o.articles = 1;
  o.questions = 0;
  EXPECT_THROW(make_cloze(stories(), o), Error);
  o.questions = 2;
  EXPECT_THROW(make_cloze({"One story."}, o), Error);
  EXPECT_FALSE(is_content_word("the"));
  EXPECT_FALSE(is_content_word("ab"));
  EXPECT_FALSE(is_content_word("ball2"));
  EXPECT_TRUE(is_content_word("Lily"));
}

}}  // namespace
}  // namespace kvcompact
