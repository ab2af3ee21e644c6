// chrF (metrics/chrf.h) against hand-counted n-grams and sacreBLEU's own published test values.
#include <gtest/gtest.h>

#include "metrics/chrf.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(Chrf, IdenticalIs100AndDisjointIs0) {
  EXPECT_DOUBLE_EQ(chrf("The cat sat on the mat.", "The cat sat on the mat."), 100.0);
  EXPECT_DOUBLE_EQ(chrf("abcdefg", "hijklmnop"), 0.0);
  EXPECT_DOUBLE_EQ(chrf("", "reference"), 0.0);
  EXPECT_DOUBLE_EQ(chrf("hypothesis", ""), 0.0);
}

// hyp "abc", ref "abd" (beta 2):
//   n=1: hyp {a,b,c} = 3, ref {a,b,d} = 3, matches {a,b} = 2  -> P = 2/3, R = 2/3
//   n=2: hyp {ab,bc} = 2, ref {ab,bd} = 2, matches {ab} = 1   -> P = 1/2, R = 1/2
//   n=3: hyp {abc} = 1, ref {abd} = 1, matches 0              -> P = 0,   R = 0
//   n=4..6: no n-grams on either side -> not counted (effective order 3)
//   P = R = (2/3 + 1/2 + 0) / 3 = 7/18; F2 = 5 P R / (4 P + R) = P = 7/18 = 38.888...%
TEST(Chrf, HandCountedSameLength) {
  const ChrfStats st = chrf_statistics("abc", "abd");
  EXPECT_EQ(st.hyp, (std::vector<long long>{3, 2, 1, 0, 0, 0}));
  EXPECT_EQ(st.ref, (std::vector<long long>{3, 2, 1, 0, 0, 0}));
  EXPECT_EQ(st.match, (std::vector<long long>{2, 1, 0, 0, 0, 0}));
  EXPECT_NEAR(chrf("abc", "abd"), 100.0 * 7.0 / 18.0, 1e-12);
}

// hyp "ab", ref "abc":
//   n=1: hyp 2, ref 3, matches {a,b} = 2 -> P = 1, R = 2/3
//   n=2: hyp {ab} = 1, ref {ab,bc} = 2, matches 1 -> P = 1, R = 1/2
//   n=3: hyp has no 3-gram (count 0), ref {abc} = 1 -> not counted; n=4..6 none
//   P = 1, R = (2/3 + 1/2) / 2 = 7/12; F2 = 5 * 1 * 7/12 / (4 + 7/12) = 35/55 = 7/11 = 63.6363...%
TEST(Chrf, HandCountedShorterHypothesis) {
  const ChrfStats st = chrf_statistics("ab", "abc");
  EXPECT_EQ(st.hyp, (std::vector<long long>{2, 1, 0, 0, 0, 0}));
  EXPECT_EQ(st.ref, (std::vector<long long>{3, 2, 1, 0, 0, 0}));
  EXPECT_EQ(st.match, (std::vector<long long>{2, 1, 0, 0, 0, 0}));
  EXPECT_NEAR(chrf("ab", "abc"), 100.0 * 7.0 / 11.0, 1e-12);
}

// Characters are code points, not bytes: hyp "h\u00e9\u00e9" (héé), ref "h\u00e9" (hé):
//   n=1: hyp {h,é,é} = 3, ref {h,é} = 2, matches {h,é} = 2 -> P = 2/3, R = 1
//   n=2: hyp {hé,éé} = 2, ref {hé} = 1, matches 1          -> P = 1/2, R = 1
//   n=3: ref has no 3-gram, so sacreBLEU counts the hyp's as 0 too -> not counted
//   P = 7/12, R = 1; F2 = 5 * 7/12 / (4 * 7/12 + 1) = (35/12) / (40/12) = 7/8 = 87.5%
TEST(Chrf, HandCountedUnicodeCodePoints) {
  const ChrfStats st = chrf_statistics("h\xC3\xA9\xC3\xA9", "h\xC3\xA9");
  EXPECT_EQ(st.hyp, (std::vector<long long>{3, 2, 0, 0, 0, 0}));
  EXPECT_EQ(st.ref, (std::vector<long long>{2, 1, 0, 0, 0, 0}));
  EXPECT_NEAR(chrf("h\xC3\xA9\xC3\xA9", "h\xC3\xA9"), 87.5, 1e-12);
}

TEST(Chrf, WhitespaceIsIgnored) {
  EXPECT_DOUBLE_EQ(chrf("a b c", "abc"), 100.0);
  EXPECT_DOUBLE_EQ(chrf(" a\tb\nc ", "abc"), 100.0);
  EXPECT_DOUBLE_EQ(chrf("a\xC2\xA0" "bc", "abc"), 100.0);  // U+00A0 no-break space is white space in Python
  EXPECT_DOUBLE_EQ(chrf("ab c", "a bd"), chrf("abc", "abd"));
}

// Corpus statistics are sums over sentences: hyps {"abc", "ab"}, refs {"abd", "abc"}:
//   n=1: hyp 3+2 = 5, ref 3+3 = 6, match 2+2 = 4;  n=2: hyp 2+1 = 3, ref 2+2 = 4, match 1+1 = 2
//   n=3: hyp 1+0 = 1, ref 1+1 = 2, match 0
//   P = (4/5 + 2/3 + 0)/3 = 22/45, R = (4/6 + 2/4 + 0)/3 = 7/18
//   F2 = 5 P R / (4 P + R) = (77/81) / (211/90) = 6930/17091 = 40.5476...%
TEST(Chrf, CorpusSumsStatistics) {
  EXPECT_NEAR(corpus_chrf({"abc", "ab"}, {"abd", "abc"}), 100.0 * 6930.0 / 17091.0, 1e-12);
  EXPECT_THROW(corpus_chrf({"a"}, {"a", "b"}), Error);
  EXPECT_THROW(corpus_chrf({}, {}), Error);
}

// Expected values published in sacreBLEU's test/test_chrf.py (computed there by sacreBLEU itself).
TEST(Chrf, MatchesSacreBleuTestSuite) {
  // test_cases_effective_order: corpus_chrf(..., char_order=6, beta=3, eps_smoothing=False)
  EXPECT_NEAR(corpus_chrf({"a"}, {"a"}, 6, 3.0), 100.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({""}, {"reference"}, 6, 3.0), 0.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}, 6, 3.0), 100.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a", "b"}, {"a", "c"}, 6, 3.0), 50.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({"aa"}, {"ab"}, 6, 3.0), 25.0, 1e-4);
  // test_cases: eps_smoothing=True, beta=3
  EXPECT_NEAR(corpus_chrf({"aa"}, {"ab"}, 6, 3.0, true), 8.3333, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a"}, {"a"}, 6, 3.0, true), 16.6667, 1e-4);
  EXPECT_NEAR(corpus_chrf({"a b c"}, {"abc"}, 6, 3.0, true), 50.0, 1e-4);
  EXPECT_NEAR(corpus_chrf({" risk assessment must be made of those who are qualified and expertise in the sector - "
                           "these are the scientists ."},
                          {"risk assessment has to be undertaken by those who are qualified and expert in that area - "
                           "that is the scientists ."},
                          6, 3.0, true),
              63.361730, 1e-4);
  EXPECT_NEAR(corpus_chrf({" Die    Beziehung zwischen  Obama und Netanjahu ist nicht gerade  freundlich. "},
                          {"Das Verh\xC3\xA4ltnis zwischen Obama und Netanyahu ist nicht gerade freundschaftlich."}, 6,
                          3.0, true),
              64.1302698, 1e-4);
  // test_sentence_level_chrf: sentence_chrf(hyp, [ref], eps_smoothing=True) with default beta 2
  EXPECT_NEAR(chrf("Co n\xC3\xA1s nejv\xC3\xAD" "c tr\xC3\xA1p\xC3\xAD, proto\xC5\xBE" "e l\xC3\xA9ka\xC5\x99i si "
                   "vyb\xC3\xADraj\xC3\xAD, kdo bude \xC5\xBE\xC3\xADt a kdo zem\xC5\x99" "e.",
                   "Nejv\xC3\xAD" "ce smutn\xC3\xAD jsme z toho, \xC5\xBE" "e mus\xC3\xADme rozhodovat o tom, kdo "
                   "bude \xC5\xBE\xC3\xADt a kdo zem\xC5\x99" "e.",
                   6, 2.0, true),
              39.14078509, 1e-4);
}

TEST(Chrf, RejectsBadOptions) {
  EXPECT_THROW(chrf("a", "a", 0), Error);
  EXPECT_THROW(chrf("a", "a", 6, 0.0), Error);
}

}}  // namespace
}  // namespace kvcompact
