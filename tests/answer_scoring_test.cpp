// Answer normalisation, exact match and stop strings (tasks/answer_scoring.h).
#include <gtest/gtest.h>

#include "tasks/answer_scoring.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(AnswerScoring, NumberTakesTheFirstNumber) {
  EXPECT_EQ(normalize_answer(" 48213. Remember it.", "number"), "48213");
  EXPECT_EQ(normalize_answer("The answer is 18.0 dollars", "number"), "18");
  EXPECT_EQ(normalize_answer("$1,234,567 in total", "number"), "1234567");
  EXPECT_EQ(normalize_answer("2.50", "number"), "2.5");
  EXPECT_EQ(normalize_answer("-7 degrees", "number"), "-7");
  EXPECT_EQ(normalize_answer("x-7", "number"), "7");       // a hyphen after a letter is no sign
  EXPECT_EQ(normalize_answer("12 - 7 = 5", "number"), "12");
  EXPECT_EQ(normalize_answer("007", "number"), "7");
  EXPECT_EQ(normalize_answer("-0.0", "number"), "0");
  EXPECT_EQ(normalize_answer("1,2,3", "number"), "1");     // not a thousands separator
  EXPECT_EQ(normalize_answer("3.", "number"), "3");        // sentence end, not a decimal point
  EXPECT_EQ(normalize_answer("no digits here", "number"), "");
  EXPECT_EQ(normalize_answer("", "number"), "");
}

TEST(AnswerScoring, WordTakesTheFirstWordLowercasedWithoutPunctuation) {
  EXPECT_EQ(normalize_answer(" Paris.", "word"), "paris");
  EXPECT_EQ(normalize_answer("\"Kitchen\", said Mary", "word"), "kitchen");
  EXPECT_EQ(normalize_answer("  -- hallway", "word"), "hallway");  // a word of punctuation only is skipped
  EXPECT_EQ(normalize_answer("Buenos Aires", "word"), "buenos");
  EXPECT_EQ(normalize_answer("don't", "word"), "dont");
  EXPECT_EQ(normalize_answer("...", "word"), "");
}

TEST(AnswerScoring, TextLowercasesDropsPunctuationAndCollapsesSpace) {
  EXPECT_EQ(normalize_answer("  She  smiled,\tand said \"Hi!\"  ", "text"), "she smiled and said hi");
  EXPECT_EQ(normalize_answer("It\xE2\x80\x99s a dog \xE2\x80\x94 big.", "text"), "its a dog big");  // ’ and —
  EXPECT_EQ(normalize_answer("Caf\xC3\xA9 OK", "text"), "caf\xC3\xA9 ok");  // non-ASCII letters kept as they are
  EXPECT_EQ(normalize_answer("", "text"), "");
}

TEST(AnswerScoring, AnswerCorrectComparesNormalisedForms) {
  EXPECT_TRUE(answer_correct(" 19\n", "19", "number"));
  EXPECT_TRUE(answer_correct("19.00 apples", "19", "number"));
  EXPECT_FALSE(answer_correct("190", "19", "number"));
  EXPECT_TRUE(answer_correct(" Paris. The capital", "Paris", "word"));
  EXPECT_FALSE(answer_correct(" Lyon", "Paris", "word"));
  EXPECT_TRUE(answer_correct(" went to the park.", "went to the park", "text"));
  EXPECT_FALSE(answer_correct(" went to the park and", "went to the park", "text"));
  EXPECT_FALSE(answer_correct("", "", "text"));  // an empty reference is never matched
  EXPECT_THROW(answer_correct("1", "1", "integer"), Error);
}

// RULER's string_match_all / string_match_part (scripts/eval/synthetic/constants.py), worked by hand:
// refs {"7263540", "Apple", "dune-X"} against "The numbers are 7263540 and APPLE-pie." (lower-cased:
// "the numbers are 7263540 and apple-pie."): "7263540" found, "apple" found (inside "apple-pie"),
// "dune-x" not -> 2/3; part -> 1.
TEST(AnswerScoring, RecallIsRulersStringMatchAll) {
  const std::vector<std::string> refs = {"7263540", "Apple", "dune-X"};
  const std::string pred = "The numbers are 7263540 and APPLE-pie.";
  EXPECT_DOUBLE_EQ(string_match_all(pred, refs), 2.0 / 3.0);
  EXPECT_DOUBLE_EQ(string_match_part(pred, refs), 1.0);
  EXPECT_DOUBLE_EQ(string_match_all("nothing", refs), 0.0);
  EXPECT_DOUBLE_EQ(string_match_part("nothing", refs), 0.0);
  EXPECT_DOUBLE_EQ(string_match_all(" DUNE-x, apple, 7263540", refs), 1.0);
  EXPECT_DOUBLE_EQ(string_match_all("726354", {"7263540"}), 0.0);  // a prefix of a reference is no match
  EXPECT_DOUBLE_EQ(string_match_all("abc", {"", "abc"}), 0.5);     // an empty reference is never found
  EXPECT_THROW(string_match_all("x", {}), Error);
  EXPECT_THROW(string_match_part("x", {}), Error);
  // Mean over three items, as RULER reports it (x 100): (2/3 + 1 + 0) / 3 = 5/9 -> 55.56.
  const double mean = (string_match_all(pred, refs) + string_match_all("7263540 apple dune-x", refs) +
                       string_match_all("", refs)) / 3.0;
  EXPECT_NEAR(mean * 100, 55.56, 0.005);

  EXPECT_EQ(normalize_answer("Caf\xC3\xA9 ABC-1.", "recall"), "caf\xC3\xA9 abc-1.");  // only ASCII lower-cased
  EXPECT_TRUE(answer_correct("so: ABC-def!", "abc-DEF", "recall"));
  EXPECT_FALSE(answer_correct("so: abc", "abc-def", "recall"));
  EXPECT_FALSE(answer_correct("anything", "", "recall"));

  TaskItem item;
  item.answer_type = "recall";
  item.reference = "7263540, Apple, dune-X";
  item.references = refs;
  EXPECT_DOUBLE_EQ(item_score(pred, item), 2.0 / 3.0);
  item.references.clear();  // falls back to {reference}
  EXPECT_DOUBLE_EQ(item_score("7263540, apple, dune-x", item), 1.0);
  EXPECT_DOUBLE_EQ(item_score(pred, item), 0.0);
  item.answer_type = "number";
  item.reference = "19";
  EXPECT_DOUBLE_EQ(item_score(" 19.0 apples", item), 1.0);
  EXPECT_DOUBLE_EQ(item_score(" 190", item), 0.0);
}

TEST(AnswerScoring, CutAtStopUsesTheEarliestStopString) {
  EXPECT_EQ(cut_at_stop(" 19\n3 + 4 = 7", {"\n"}), " 19");
  EXPECT_EQ(cut_at_stop(" Paris. Next\n", {"\n", "."}), " Paris");
  EXPECT_EQ(cut_at_stop(" abc<end>def\n", {"\n", "<end>"}), " abc");
  EXPECT_EQ(cut_at_stop("no stop here", {"\n"}), "no stop here");
  EXPECT_EQ(cut_at_stop("empty stops ignored", {""}), "empty stops ignored");
  EXPECT_EQ(cut_at_stop("\nleading", {"\n"}), "");
}

}}  // namespace
}  // namespace kvcompact
