// SpmTokenizer: hand-worked merges, byte fallback, decode rules, and agreement with a plain
// transcription of llama2.c run.c `encode` (O(n^2) scan) on real text and random bytes.
#include "io/spm_tokenizer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "loaders/llama2c_checkpoint.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kTok512 = kShared + "/models/stories260K/tok512.bin";
const std::string kTinyStories = kShared + "/data/tinystories/tinystories_val_head.txt";

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Plain reference: llama2.c run.c `encode` transcribed literally (linear piece lookup by map,
/// O(n^2) merge scan, strict '>' against -1e10, byte fallback id = byte + 3).
std::vector<int> reference_encode(const SpmTokenizer& tok, const std::string& text, bool bos) {
  std::unordered_map<std::string, int> idx;
  for (int i = tok.vocab_size() - 1; i >= 0; --i) idx[tok.piece(i)] = i;  // first id wins
  auto look = [&](const std::string& s) {
    auto it = idx.find(s);
    return it == idx.end() ? -1 : it->second;
  };
  std::vector<int> ids;
  if (bos) ids.push_back(1);
  if (!text.empty()) ids.push_back(look(" "));
  std::string buf;
  for (std::size_t c = 0; c < text.size(); ++c) {
    if ((static_cast<unsigned char>(text[c]) & 0xC0) != 0x80) buf.clear();
    buf.push_back(text[c]);
    if (c + 1 < text.size() && (static_cast<unsigned char>(text[c + 1]) & 0xC0) == 0x80 && buf.size() < 4) continue;
    int id = look(buf);
    if (id != -1) {
      ids.push_back(id);
    } else {
      for (char ch : buf) ids.push_back(static_cast<unsigned char>(ch) + 3);
    }
    buf.clear();
  }
  for (;;) {
    float best = -1e10f;
    int best_id = -1, best_idx = -1;
    for (std::size_t i = 0; i + 1 < ids.size(); ++i) {
      int id = look(tok.piece(ids[i]) + tok.piece(ids[i + 1]));
      if (id != -1 && tok.score(id) > best) {
        best = tok.score(id);
        best_id = id;
        best_idx = static_cast<int>(i);
      }
    }
    if (best_idx == -1) break;
    ids[best_idx] = best_id;
    ids.erase(ids.begin() + best_idx + 1);
  }
  return ids;
}

/// A toy vocabulary: <unk>, <s>, </s>, 256 byte tokens (ids 3..258), then extra pieces.
SpmTokenizer toy(const std::vector<std::pair<std::string, float>>& extra) {
  std::vector<std::string> pieces = {"<unk>", "\n<s>\n", "\n</s>\n"};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    pieces.push_back(buf);
    scores.push_back(0);
  }
  for (const auto& [p, s] : extra) {
    pieces.push_back(p);
    scores.push_back(s);
  }
  return SpmTokenizer(pieces, scores, 1, 2, "toy");
}

TEST(SpmTokenizer, ToyMergeHighestScoreLeftmostOnTies) {
  // ids: " "=259, "a"=260, "b"=261, "c"=262, "ab"=263, "bc"=264
  SpmTokenizer t = toy({{" ", -10}, {"a", -10}, {"b", -10}, {"c", -10}, {"ab", -1}, {"bc", -1}});
  // " ","a","b","c": "ab" and "bc" tie at -1 -> leftmost "ab"; then " ab" and "abc" are absent.
  EXPECT_EQ(t.encode("abc", false), (std::vector<int>{259, 263, 262}));
  // A higher-scoring right pair wins over the left one.
  SpmTokenizer t2 = toy({{" ", -10}, {"a", -10}, {"b", -10}, {"c", -10}, {"ab", -2}, {"bc", -1}});
  EXPECT_EQ(t2.encode("abc", true), (std::vector<int>{1, 259, 260, 264}));
}

TEST(SpmTokenizer, ToyMergeCascadeAndScoreFloor) {
  // " "=259 a=260 b=261 "ab"=262 " ab"=263 "aa"=264 (score <= -1e10: run.c never merges it)
  SpmTokenizer t = toy({{" ", 0}, {"a", 0}, {"b", 0}, {"ab", -3}, {" ab", -4}, {"aa", -1e10f}});
  EXPECT_EQ(t.encode("ab", false), (std::vector<int>{263}));
  EXPECT_EQ(t.encode("aa", false), (std::vector<int>{259, 260, 260}));
  // Unknown byte 'z' (0x7A) -> <0x7A> = id 3 + 0x7A.
  EXPECT_EQ(t.encode("z", false), (std::vector<int>{259, 3 + 0x7A}));
}

TEST(SpmTokenizer, ConstructorRejectsBadVocabularies) {
  EXPECT_THROW(SpmTokenizer({"a", "b"}, {0.0f}, 0, 1, "v.bin"), Error);
  EXPECT_THROW(SpmTokenizer({}, {}, 0, 0, "v.bin"), Error);
  EXPECT_THROW(SpmTokenizer({"a", "b"}, {0.0f, 0.0f}, 0, 5, "v.bin"), Error);
  try {
    SpmTokenizer({"a", "b"}, {0.0f, std::nanf("")}, 0, 1, "v.bin");
    FAIL() << "no throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("v.bin"), std::string::npos);
  }
  // No " " and no <0x20>: the dummy prefix cannot be encoded -> Error, not a wrong id.
  SpmTokenizer t({"<unk>", "<s>", "</s>", "a"}, {0, 0, 0, 0}, 1, 2, "v.bin");
  EXPECT_THROW(t.encode("a", false), Error);
  EXPECT_EQ(t.encode("", true), std::vector<int>{1});
}

class Tok512 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tok_ = read_llama2c_tokenizer(kTok512, 512).release(); }
  static void TearDownTestSuite() {
    delete tok_;
    tok_ = nullptr;
  }
  static SpmTokenizer* tok_;
};
SpmTokenizer* Tok512::tok_ = nullptr;

TEST_F(Tok512, HandWorkedCases) {
  const SpmTokenizer& t = *tok_;
  EXPECT_EQ(t.vocab_size(), 512);
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_EQ(t.piece(1), "\n<s>\n");
  EXPECT_EQ(t.encode("", true), std::vector<int>{1});
  EXPECT_TRUE(t.encode("", false).empty());
  // "the": " ","t","h","e" -> " t" (259, score 0) first, then "he" (260, -1) beats " th" (308,
  // -49), then " t"+"he" = " the" (265, -6).
  ASSERT_EQ(t.piece(259), " t");
  ASSERT_EQ(t.piece(260), "he");
  ASSERT_EQ(t.piece(265), " the");
  EXPECT_EQ(t.encode("the", true), (std::vector<int>{1, 265}));
  EXPECT_EQ(t.encode("Once upon a time", true), (std::vector<int>{1, 403, 407, 261, 378}));
  // Emoji U+1F600 (F0 9F 98 80) is not in the vocabulary: byte fallback, ids byte + 3.
  const std::vector<int> emoji = t.encode("\xF0\x9F\x98\x80", true);
  EXPECT_EQ(emoji, (std::vector<int>{1, 410, 0xF0 + 3, 0x9F + 3, 0x98 + 3, 0x80 + 3}));
  EXPECT_EQ(t.piece(0xF0 + 3), "<0xF0>");
  EXPECT_EQ(t.decode(emoji), "\xF0\x9F\x98\x80");
  // "é" is a vocabulary piece (485).
  EXPECT_EQ(t.encode("\xC3\xA9", false), (std::vector<int>{410, 485}));
}

TEST_F(Tok512, DecodeTokenRules) {
  const SpmTokenizer& t = *tok_;
  EXPECT_EQ(t.decode_token(1, 403), "Once");   // leading space dropped after BOS
  EXPECT_EQ(t.decode_token(265, 403), " Once");
  EXPECT_EQ(t.decode_token(1, 3 + 0x0A), "\n");  // <0x0A>
  EXPECT_EQ(t.decode_token(1, 3), std::string(1, '\0'));
  EXPECT_THROW(t.decode_token(1, 512), Error);
  EXPECT_THROW(t.decode_token(1, -1), Error);
  EXPECT_THROW(t.piece(512), Error);
}

TEST_F(Tok512, RoundTripEveryTinyStoriesLine) {
  const SpmTokenizer& t = *tok_;
  std::ifstream in(kTinyStories);
  ASSERT_TRUE(in.good()) << kTinyStories;
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    ASSERT_EQ(t.decode(t.encode(line, true)), line) << "line " << n;
    ++n;
  }
  EXPECT_EQ(n, 8659);
}

TEST_F(Tok512, MatchesRunCReferenceOnTextAndRandomBytes) {
  const SpmTokenizer& t = *tok_;
  const std::string text = read_text(kTinyStories);
  ASSERT_GT(text.size(), 5000u);
  // Several multi-line chunks (newlines -> byte tokens, many merges).
  for (std::size_t off : {std::size_t{0}, std::size_t{1234}, std::size_t{400000}}) {
    const std::string chunk = text.substr(off, 1500);
    EXPECT_EQ(t.encode(chunk, true), reference_encode(t, chunk, true)) << "offset " << off;
  }
  // Random bytes, including invalid UTF-8 and long continuation runs.
  std::mt19937 rng(12345);
  const std::string alphabet = "aeiou tnsrhl.,!\n\xC3\xA9\xF0\x9F\x98\x80\x80\xBF\xE2\x96\x81";
  for (int trial = 0; trial < 200; ++trial) {
    std::string s;
    const int len = static_cast<int>(rng() % 40);
    for (int k = 0; k < len; ++k) {
      s.push_back(trial % 2 == 0 ? alphabet[rng() % alphabet.size()] : static_cast<char>(rng() & 0xFF));
    }
    ASSERT_EQ(t.encode(s, trial % 3 == 0), reference_encode(t, s, trial % 3 == 0)) << "trial " << trial;
  }
}

TEST_F(Tok512, EncodesWholeTinyStoriesFile) {
  const SpmTokenizer& t = *tok_;
  const std::string text = read_text(kTinyStories);
  const std::vector<int> ids = t.encode(text, true);
  // Invariants: compression (stories260K's 512-token vocabulary averages > 2 bytes/token),
  // all ids in range, and a lossless round trip.
  EXPECT_LT(ids.size(), text.size() / 2);
  for (int id : ids) ASSERT_TRUE(id >= 0 && id < 512);
  EXPECT_EQ(t.decode(ids), text);
}

}}  // namespace
}  // namespace kvcompact
