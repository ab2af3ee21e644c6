// Task generators (tasks/task_generators.h) on the real shared data with the stories260K
// tokenizer: reproducible by seed, needle depth and context length in tokens, references that
// match the data files line by line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tasks/task_generators.h"
#include "core/error.h"
#include "loaders/llama2c_checkpoint.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kData = kShared + "/data";
const std::string kTok = kShared + "/models/stories260K/tok512.bin";

class TaskGenerators : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTok) || !std::filesystem::is_directory(kData)) GTEST_SKIP() << "shared data missing";
    tok_ = read_llama2c_tokenizer(kTok, 512);
  }
  int tokens(const std::string& text, bool bos) const { return static_cast<int>(tok_->encode(text, bos).size()); }
  std::vector<TaskItem> gen(const std::string& family, TaskGenOptions o) const {
    return generate_tasks(family, kData, *tok_, o);
  }
  std::unique_ptr<Tokenizer> tok_;
};

std::string file_line(const std::string& path, int line_no) {
  std::ifstream in(path);
  std::string line;
  for (int i = 0; i < line_no && std::getline(in, line); ++i) {
  }
  return line;
}

/// (file relative to the data folder, line) of an item's "FILE:LINE" source.
std::pair<std::string, int> source_of(const TaskItem& item) {
  const std::size_t colon = item.source.rfind(':');
  EXPECT_NE(colon, std::string::npos) << item.source;
  return {item.source.substr(0, colon), std::stoi(item.source.substr(colon + 1))};
}

std::string fmt_id(const std::string& family, std::size_t i) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s-%04zu", family.c_str(), i);
  return buf;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  std::string l;
  while (std::getline(ss, l)) out.push_back(l);
  return out;
}

TEST_F(TaskGenerators, ReproducibleBySeedAndDifferentAcrossSeeds) {
  for (const std::string family : {"retrieval", "copy", "knowledge", "math", "inference"}) {
    TaskGenOptions o;
    o.n = 4;
    o.seed = 11;
    o.max_prompt_tokens = 512;
    const auto a = gen(family, o), b = gen(family, o);
    o.seed = 12;
    const auto c = gen(family, o);
    ASSERT_EQ(a.size(), 4u) << family;
    ASSERT_EQ(b.size(), 4u);
    bool any_differs = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(task_item_to_jsonl(a[i]), task_item_to_jsonl(b[i])) << family;
      EXPECT_EQ(a[i].id, fmt_id(family, i));
      EXPECT_EQ(a[i].family, family);
      any_differs = any_differs || a[i].prompt != c[i].prompt;
    }
    EXPECT_TRUE(any_differs) << family << ": seeds 11 and 12 gave the same prompts";
  }
}

TEST_F(TaskGenerators, RetrievalNeedleAtTheRequestedDepthInTokens) {
  for (const int L : {128, 256, 480}) {
    for (const double depth : {0.0, 0.25, 0.5, 0.75, 1.0}) {
      TaskGenOptions o;
      o.n = 2;
      o.seed = 3;
      o.context_tokens = L;
      o.depth = depth;
      for (const TaskItem& item : gen("retrieval", o)) {
        // Prompt length within a few tokens below the requested context length.
        const int n = tokens(item.prompt, true);
        EXPECT_LE(n, L);
        EXPECT_GE(n, L - 12) << "L " << L;
        EXPECT_DOUBLE_EQ(item.depth, depth);
        EXPECT_EQ(item.answer_type, "number");
        // Needle with the reference in it; question at the end.
        const std::string needle = "The pass key is " + item.reference + ". Remember it.";
        const std::size_t at = item.prompt.find(needle);
        ASSERT_NE(at, std::string::npos) << item.prompt;
        EXPECT_EQ(item.prompt.find(needle, at + 1), std::string::npos);
        const std::string question = "\nWhat is the pass key? The pass key is";
        ASSERT_GE(item.prompt.size(), question.size());
        EXPECT_EQ(item.prompt.substr(item.prompt.size() - question.size()), question);
        EXPECT_EQ(item.reference.size(), 5u);
        // Depth measured independently: haystack tokens before / (before + after) the needle.
        const std::string before = item.prompt.substr(0, at);
        const std::string after = item.prompt.substr(at + needle.size(), item.prompt.size() - question.size() - at - needle.size());
        const double tb = tokens(before, false), ta = tokens(after, false);
        ASSERT_GT(tb + ta, 0);
        EXPECT_NEAR(tb / (tb + ta), depth, 0.05) << "L " << L << " before " << tb << " after " << ta;
      }
    }
  }
}

TEST_F(TaskGenerators, RetrievalSpreadsDepthsAndFactVariantUsesCapitals) {
  TaskGenOptions o;
  o.n = 5;
  const auto items = gen("retrieval", o);
  for (int i = 0; i < 5; ++i) EXPECT_DOUBLE_EQ(items[i].depth, i / 4.0);
  o.variant = "fact";
  for (const TaskItem& item : gen("retrieval", o)) {
    EXPECT_EQ(item.answer_type, "word");
    EXPECT_NE(item.prompt.find("The secret city is " + item.reference + "."), std::string::npos);
    const auto [file, line] = source_of(item);
    EXPECT_EQ(file_line(kData + "/" + file, line).substr(file_line(kData + "/" + file, line).find('\t') + 1),
              item.reference);
  }
}

TEST_F(TaskGenerators, CopyPassageThenOtherTextThenItsFirstWords) {
  TaskGenOptions o;
  o.n = 6;
  o.seed = 5;
  o.context_tokens = 200;
  for (const TaskItem& item : gen("copy", o)) {
    EXPECT_EQ(item.answer_type, "text");
    const int n = tokens(item.prompt, true);
    EXPECT_LE(n, 200);
    EXPECT_GE(n, 200 - 12);
    // The prompt ends with "\n\n" + the first words; the passage (first words + reference) opens it.
    const std::size_t cut = item.prompt.rfind("\n\n");
    ASSERT_NE(cut, std::string::npos);
    const std::string prefix = item.prompt.substr(cut + 2);
    EXPECT_EQ(std::count(prefix.begin(), prefix.end(), ' '), 3) << prefix;  // 4 words
    // The answer takes at most max_new_tokens - 4 tokens after the prefix.
    EXPECT_LE(tokens(item.prompt + " " + item.reference, true) - tokens(item.prompt, true), item.max_new_tokens - 4);
    EXPECT_EQ(item.prompt.rfind(prefix + " " + item.reference + "\n\n", 0), 0u) << item.prompt.substr(0, 80);
    // The first words occur only at the passage and at the end.
    EXPECT_EQ(item.prompt.find(prefix, 1), cut + 2);
    EXPECT_GE(std::count(item.reference.begin(), item.reference.end(), ' '), 2);  // >= 3 words
  }
}

TEST_F(TaskGenerators, KnowledgeFewShotFromTheCapitalPairs) {
  TaskGenOptions o;
  o.n = 10;
  o.shots = 3;
  for (const TaskItem& item : gen("knowledge", o)) {
    const std::vector<std::string> lines = lines_of(item.prompt);
    ASSERT_EQ(lines.size(), 4u);
    const auto [file, line] = source_of(item);
    const std::string row = file_line(kData + "/" + file, line);
    const std::string country = row.substr(0, row.find('\t')), capital = row.substr(row.find('\t') + 1);
    EXPECT_EQ(item.reference, capital);
    EXPECT_EQ(lines.back(), "The capital of " + country + " is");
    for (int s = 0; s < 3; ++s) {
      EXPECT_EQ(lines[s].rfind("The capital of ", 0), 0u);
      EXPECT_EQ(lines[s].find(country + " is"), std::string::npos);  // the query is not among the shots
    }
  }
}

TEST_F(TaskGenerators, ArithmeticShotsAndReferenceAreCorrectSums) {
  TaskGenOptions o;
  o.n = 20;
  o.shots = 4;
  o.variant = "arithmetic";
  for (const TaskItem& item : gen("math", o)) {
    const std::vector<std::string> lines = lines_of(item.prompt);
    ASSERT_EQ(lines.size(), 5u);
    for (std::size_t k = 0; k < lines.size(); ++k) {
      int a = -1, b = -1, r = -1;
      char op = 0;
      const std::string text = k + 1 < lines.size() ? lines[k] : lines[k] + " " + item.reference;
      ASSERT_EQ(std::sscanf(text.c_str(), "%d %c %d = %d", &a, &op, &b, &r), 4) << text;
      EXPECT_TRUE(op == '+' || op == '-');
      EXPECT_EQ(r, op == '+' ? a + b : a - b) << text;
      EXPECT_GE(r, 0);
      EXPECT_LE(a, 20);
      EXPECT_LE(b, 20);
    }
  }
}

TEST_F(TaskGenerators, Gsm8kReferenceIsTheFinalNumberOfItsLine) {
  TaskGenOptions o;
  o.n = 8;
  o.shots = 2;
  o.variant = "gsm8k";
  for (const TaskItem& item : gen("math", o)) {
    const auto [file, line] = source_of(item);
    EXPECT_EQ(file, "gsm8k/test.jsonl");
    const nlohmann::json j = nlohmann::json::parse(file_line(kData + "/" + file, line));
    const std::string answer = j["answer"];
    std::string final_number = answer.substr(answer.rfind("####") + 4);
    final_number.erase(std::remove(final_number.begin(), final_number.end(), ','), final_number.end());
    final_number.erase(std::remove(final_number.begin(), final_number.end(), ' '), final_number.end());
    EXPECT_EQ(item.reference, final_number);
    const std::string tail = "Question: " + j["question"].get<std::string>() + "\nAnswer:";
    ASSERT_GE(item.prompt.size(), tail.size());
    EXPECT_EQ(item.prompt.substr(item.prompt.size() - tail.size()), tail);
    // Two solved shots before it.
    std::size_t shots = 0;
    for (std::size_t p = item.prompt.find("Question: "); p != std::string::npos; p = item.prompt.find("Question: ", p + 1))
      ++shots;
    EXPECT_EQ(shots, 3u);
  }
}

TEST_F(TaskGenerators, MixedMathAlternatesArithmeticAndGsm8k) {
  TaskGenOptions o;
  o.n = 4;
  o.shots = 1;
  const auto items = gen("math", o);
  EXPECT_EQ(items[0].source, "");
  EXPECT_EQ(items[1].source.rfind("gsm8k/test.jsonl:", 0), 0u);
  EXPECT_EQ(items[2].source, "");
  EXPECT_EQ(items[3].source.rfind("gsm8k/test.jsonl:", 0), 0u);
}

TEST_F(TaskGenerators, BabiAnswerMatchesTheFileAndPromptsFit) {
  TaskGenOptions o;
  o.n = 12;
  o.shots = 2;
  o.max_prompt_tokens = 512;
  for (const TaskItem& item : gen("inference", o)) {
    EXPECT_LE(tokens(item.prompt, true) + item.max_new_tokens, 512);
    const auto [file, line] = source_of(item);
    const std::string row = file_line(kData + "/" + file, line);
    const std::size_t tab = row.find('\t');
    ASSERT_NE(tab, std::string::npos) << row;
    const std::string answer = row.substr(tab + 1, row.find('\t', tab + 1) - tab - 1);
    EXPECT_EQ(item.reference, answer);
    std::string question = row.substr(row.find(' ') + 1, tab - row.find(' ') - 1);
    while (!question.empty() && question.back() == ' ') question.pop_back();
    const std::string tail = "Question: " + question + "\nAnswer:";
    EXPECT_EQ(item.prompt.substr(item.prompt.size() - tail.size()), tail);
    // The statement right before the question is the file's previous non-question line.
    int prev = line - 1;
    while (prev > 0 && file_line(kData + "/" + file, prev).find('\t') != std::string::npos) --prev;
    const std::string stmt = file_line(kData + "/" + file, prev);
    const std::string last_stmt = stmt.substr(stmt.find(' ') + 1);
    const std::string before = item.prompt.substr(0, item.prompt.size() - tail.size());
    EXPECT_EQ(before.substr(before.size() - last_stmt.size() - 1), last_stmt + "\n");
    EXPECT_EQ(std::count(item.prompt.begin(), item.prompt.end(), '?') >= 3, true);  // 2 shots + the query
  }
  o.variant = "qa1";
  for (const TaskItem& item : gen("inference", o)) EXPECT_NE(item.source.find("qa1_single-supporting-fact"), std::string::npos);
}

TEST_F(TaskGenerators, BadOptionsAreErrors) {
  auto message = [&](const std::string& family, TaskGenOptions o, const std::string& dir = kData) {
    try {
      generate_tasks(family, dir, *tok_, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TaskGenOptions o;
  EXPECT_NE(message("poetry", o).find("unknown task family"), std::string::npos);
  o.n = 0;
  EXPECT_NE(message("math", o).find("--n 0"), std::string::npos);
  o = {};
  o.shots = -1;
  EXPECT_NE(message("knowledge", o).find("--shots -1"), std::string::npos);
  o = {};
  o.variant = "geometry";
  EXPECT_NE(message("math", o).find("--variant"), std::string::npos);
  o = {};
  o.context_tokens = 10;
  EXPECT_NE(message("retrieval", o).find("--context-tokens 10 is too small"), std::string::npos);
  o = {};
  o.context_tokens = 1000;
  o.max_prompt_tokens = 512;
  EXPECT_NE(message("copy", o).find("exceeds the prompt limit"), std::string::npos);
  o = {};
  EXPECT_NE(message("math", o, "/nonexistent/data").find("/nonexistent/data"), std::string::npos);
  // A data folder without the family's files names the missing file.
  const std::string empty = std::string(KVC_TEST_TMP) + "/empty_data";
  std::filesystem::create_directories(empty);
  EXPECT_NE(message("knowledge", o, empty).find("country_capital_pairs.tsv"), std::string::npos);
  EXPECT_NE(message("inference", o, empty).find("babi"), std::string::npos);
  o.variant = "gsm8k";
  EXPECT_NE(message("math", o, empty).find("gsm8k/test.jsonl"), std::string::npos);
}

}}  // namespace
}  // namespace kvcompact
