// RULER task generators (tasks/ruler_tasks.h) on the real essays with the stories260K
// tokenizer: prompt lengths within the requested tokens, context/question split, needle values
// once at the recorded depth, references recomputed independently (the variable chain walked, the
// common and frequent words recounted), reproducible by seed, and one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>

#include "tasks/answer_scoring.h"
#include "tasks/ruler_tasks.h"
#include "tasks/task_generators.h"
#include "tasks/task_suite.h"
#include "cli_runner.h"
#include "core/error.h"
#include "io/hf_tokenizer.h"
#include "loaders/llama2c_checkpoint.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kData = kShared + "/data";
const std::string kTok = kShared + "/models/stories260K/tok512.bin";
const std::string kNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

class RulerTasks : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kTok) || !std::filesystem::is_directory(kData)) GTEST_SKIP() << "shared data missing";
    tok_ = read_llama2c_tokenizer(kTok, 512);
  }
  int tokens(const std::string& text, bool bos) const {
    return text.empty() ? 0 : static_cast<int>(tok_->encode(text, bos).size());
  }
  std::vector<TaskItem> gen(const std::string& task, int n, int context_tokens, uint64_t seed = 1,
                            double depth = -1) const {
    TaskGenOptions o;
    o.n = n;
    o.context_tokens = context_tokens;
    o.seed = seed;
    o.depth = depth;
    return generate_tasks(task, kData, *tok_, o);  // the RULER tasks go through generate_tasks too
  }
  std::unique_ptr<Tokenizer> tok_;
};

std::size_t count_of(const std::string& text, const std::string& s) {
  std::size_t n = 0;
  for (std::size_t p = text.find(s); p != std::string::npos; p = text.find(s, p + 1)) ++n;
  return n;
}

/// The smallest length that the stories260K tokenizer allows each task (cwe's example and its 60
/// entries of wonderwords need more than 1024 of its tokens).
int small_length(const std::string& task) { return task == "ruler_cwe" ? 2048 : 1024; }

TEST_F(RulerTasks, ListedAmongTheFamiliesWithRulersNames) {
  const std::vector<std::string>& names = ruler_task_names();
  ASSERT_EQ(names.size(), 11u);
  for (const std::string& n : names) {
    EXPECT_TRUE(is_ruler_task(n));
    EXPECT_NE(std::find(task_families().begin(), task_families().end(), n), task_families().end()) << n;
    EXPECT_EQ(default_context_tokens(n), 4096);
  }
  EXPECT_FALSE(is_ruler_task("retrieval"));
  EXPECT_FALSE(is_ruler_task("ruler_qa_1"));
}

// Every task at two lengths: tokens (BOS included) <= requested and within one haystack unit of
// it, prompt = context + question, RULER's token limits and recall answers, ids, file round trip.
TEST_F(RulerTasks, PromptsFillTheRequestedTokensAndSplitAtTheQuestion) {
  const std::map<std::string, int> max_new = {{"ruler_vt", 30}, {"ruler_cwe", 120}, {"ruler_fwe", 50}};
  for (const std::string& task : ruler_task_names()) {
    for (const int L : {small_length(task), 2048}) {
      const std::vector<TaskItem> items = gen(task, 3, L);
      ASSERT_EQ(items.size(), 3u) << task;
      for (std::size_t i = 0; i < items.size(); ++i) {
        const TaskItem& it = items[i];
        SCOPED_TRACE(task + " L=" + std::to_string(L) + " item " + std::to_string(i));
        const int n = tokens(it.prompt, true);
        EXPECT_LE(n, L);
        // Short by less than one unit: a noise paragraph is ~40 tokens here, a distractor line of
        // niah_multikey_2/3 (its second line) up to ~100.
        const std::size_t l1 = it.context.find('\n') + 1;
        const int line = tokens(it.context.substr(l1, it.context.find('\n', l1) - l1), false);
        EXPECT_GT(n, L - (task.find("multikey_") != std::string::npos ? std::max(64, line + 2) : 64));
        EXPECT_EQ(it.id, task + "-000" + std::to_string(i));
        EXPECT_EQ(it.family, task);
        EXPECT_EQ(it.answer_type, "recall");
        EXPECT_TRUE(it.stop.empty());
        EXPECT_EQ(it.max_new_tokens, max_new.count(task) ? max_new.at(task) : 128);
        ASSERT_FALSE(it.context.empty());
        ASSERT_LT(it.context.size(), it.prompt.size());
        EXPECT_EQ(it.prompt.substr(0, it.context.size()), it.context);
        const std::string question = it.prompt.substr(it.context.size());
        EXPECT_EQ(question[0], '\n');
        ASSERT_FALSE(it.references.empty());
        std::string joined;
        for (const std::string& r : it.references) joined += (joined.empty() ? "" : ", ") + r;
        EXPECT_EQ(it.reference, joined);
        EXPECT_DOUBLE_EQ(item_score(joined, it), 1.0);  // the references answer the item
      }
      const std::string line = task_item_to_jsonl(items[0]);
      const TaskItem back = parse_task_suite(line, "t.jsonl")[0];
      EXPECT_EQ(back.prompt, items[0].prompt);
      EXPECT_EQ(back.context, items[0].context);
      EXPECT_EQ(back.references, items[0].references);
    }
  }
}

TEST_F(RulerTasks, ReproducibleBySeedAndDifferentAcrossSeeds) {
  for (const std::string& task : ruler_task_names()) {
    const int L = small_length(task);
    const auto a = gen(task, 2, L, 5), b = gen(task, 2, L, 5), c = gen(task, 2, L, 6);
    for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(task_item_to_jsonl(a[i]), task_item_to_jsonl(b[i])) << task;
    EXPECT_NE(a[0].prompt, c[0].prompt) << task;
    EXPECT_NE(a[0].references, c[0].references) << task;
  }
}

/// For a niah item: the needle holding references[0] and the haystack with the needles taken out
/// (all needles, or only the real ones in the distractor-needle haystack: every other line there is
/// a distractor); returns {haystack text before that needle, whole haystack}.
std::pair<std::string, std::string> split_at_needle(const TaskItem& it, const std::string& sep,
                                                     const std::set<std::string>& real_values, bool all_needles) {
  const std::size_t start = it.context.find('\n') + 1;  // after the one-line preamble
  std::string hay = it.context.substr(start);
  std::size_t target = std::string::npos;
  for (std::size_t p = hay.find("One of the special magic "); p != std::string::npos;
       p = hay.find("One of the special magic ", p)) {
    const std::size_t colon = hay.find(": ", p);
    const std::size_t end = hay.find('.', colon) + 1;
    const std::string value = hay.substr(colon + 2, end - 1 - colon - 2);
    if (!all_needles && real_values.count(value) == 0) {
      p = end;
      continue;
    }
    // Remove the needle and one separator next to it.
    std::size_t b = p, e = end;
    if (e + sep.size() <= hay.size() && hay.compare(e, sep.size(), sep) == 0)
      e += sep.size();
    else if (b >= sep.size())
      b -= sep.size();
    if (value == it.references[0]) target = b;
    hay.erase(b, e - b);
    p = b;
  }
  EXPECT_NE(target, std::string::npos);
  std::string before = hay.substr(0, std::min(target, hay.size()));
  if (before.size() >= sep.size() && before.compare(before.size() - sep.size(), sep.size(), sep) == 0)
    before.erase(before.size() - sep.size());
  return {before, hay};
}

TEST_F(RulerTasks, NeedleValuesOnceAtTheRecordedDepth) {
  struct Case {
    std::string task, sep, value_kind;
    bool all_needles;
    std::size_t needles, refs;
  };
  const std::vector<Case> cases = {
      {"ruler_niah_single_1", "\n", "numbers", true, 1, 1},   {"ruler_niah_single_2", " ", "numbers", true, 1, 1},
      {"ruler_niah_single_3", " ", "uuids", true, 1, 1},      {"ruler_niah_multikey_1", " ", "numbers", true, 4, 1},
      {"ruler_niah_multikey_2", "\n", "numbers", false, 1, 1}, {"ruler_niah_multikey_3", "\n", "uuids", false, 1, 1},
      {"ruler_niah_multivalue", " ", "numbers", true, 4, 4},  {"ruler_niah_multiquery", " ", "numbers", true, 4, 4},
  };
  for (const Case& c : cases) {
    const int n = 5;
    const std::vector<TaskItem> items = gen(c.task, n, 2048, 3);
    for (int i = 0; i < n; ++i) {
      const TaskItem& it = items[i];
      SCOPED_TRACE(c.task + " item " + std::to_string(i));
      ASSERT_EQ(it.references.size(), c.refs);
      const std::string question = it.prompt.substr(it.context.size());
      std::set<std::string> values(it.references.begin(), it.references.end());
      for (const std::string& v : it.references) {
        EXPECT_EQ(count_of(it.prompt, v), 1u) << v;  // once, in the context
        EXPECT_EQ(count_of(it.context, ": " + v + "."), 1u) << v;
        if (c.value_kind == "numbers") {
          EXPECT_EQ(v.size(), 7u);
          EXPECT_EQ(v.find_first_not_of("0123456789"), std::string::npos);
        } else {
          ASSERT_EQ(v.size(), 36u);
          EXPECT_EQ(v[14], '4');  // version 4
          EXPECT_NE(std::string("89ab").find(v[19]), std::string::npos);
        }
      }
      // The needle sentences hold the queried keys, which the question names.
      std::size_t real = 0;
      for (std::size_t p = it.context.find("One of the special magic " + c.value_kind + " for ");
           p != std::string::npos; p = it.context.find("One of the special magic ", p + 1)) {
        const std::size_t key_at = p + std::string("One of the special magic " + c.value_kind + " for ").size();
        const std::size_t is = it.context.find(" is: ", key_at);
        const std::string key = it.context.substr(key_at, is - key_at);
        const std::size_t end = it.context.find('.', is);
        const std::string value = it.context.substr(is + 5, end - is - 5);
        if (c.all_needles || values.count(value)) ++real;
        if (values.count(value)) {
          EXPECT_NE(question.find(key), std::string::npos) << key;
        }
      }
      if (c.all_needles) {
        EXPECT_EQ(real, c.needles);
      }
      // Singular template for one asked value, plural otherwise (RULER's replacements).
      const std::string vq = c.refs == 1 ? c.value_kind.substr(0, c.value_kind.size() - 1) : c.value_kind;
      EXPECT_EQ(it.context.rfind(c.refs == 1 ? "A special magic " + vq + " is hidden" : "Some special magic " + vq + " are hidden", 0), 0u);
      EXPECT_NE(question.find(c.refs == 1 ? "\nWhat is the special magic " + vq + " for "
                                          : "\nWhat are all the special magic " + vq + " for "),
                std::string::npos);
      // Depth of the first queried needle, recomputed from the text.
      const auto [before, hay] = split_at_needle(it, c.sep, values, c.all_needles);
      const double depth = static_cast<double>(tokens(before, false)) / tokens(hay, false);
      EXPECT_NEAR(it.depth, depth, 1e-9);
      const double requested = static_cast<double>(i) / (n - 1);
      EXPECT_NEAR(it.depth, requested, 0.1);  // the unit boundary nearest the requested depth
      if (c.task == "ruler_niah_single_1") {
        // Noise haystack: only the noise paragraph, one per line.
        std::string rest = hay;
        std::size_t k = 0;
        for (std::size_t p = 0; p < rest.size(); p += kNoise.size() + 1, ++k) EXPECT_EQ(rest.compare(p, kNoise.size(), kNoise), 0);
        EXPECT_GT(k, 10u);
      }
    }
  }
}

TEST_F(RulerTasks, EssayHaystackIsEssayText) {
  const TaskItem it = gen("ruler_niah_single_2", 1, 1024, 9)[0];
  EXPECT_EQ(it.source.rfind("needle_haystack/PaulGrahamEssays (word ", 0), 0u);
  std::set<std::string> v(it.references.begin(), it.references.end());
  const auto [before, hay] = split_at_needle(it, " ", v, true);
  // A 12-word run from the middle of the haystack occurs in one of the essays (white space collapsed).
  std::stringstream words_in(hay);
  std::vector<std::string> words;
  for (std::string w; words_in >> w;) words.push_back(w);
  ASSERT_GT(words.size(), 100u);
  std::string run;
  for (std::size_t k = words.size() / 2; k < words.size() / 2 + 12; ++k) run += (run.empty() ? "" : " ") + words[k];
  bool found = false;
  for (const auto& f : std::filesystem::directory_iterator(kData + "/needle_haystack/PaulGrahamEssays")) {
    std::ifstream in(f.path());
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text, s = ss.str();
    bool space = false;
    for (char ch : s) {
      if (ch == ' ' || ch == '\n' || ch == '\t' || ch == '\r') {
        space = !text.empty();
      } else {
        if (space) text += ' ';
        space = false;
        text += ch;
      }
    }
    if (text.find(run) != std::string::npos) found = true;
  }
  EXPECT_TRUE(found) << run;
}

TEST_F(RulerTasks, FixedDepthPutsTheNeedleThere) {
  for (const double d : {0.0, 0.25, 1.0}) {
    const TaskItem it = gen("ruler_niah_single_1", 1, 1024, 2, d)[0];
    EXPECT_NEAR(it.depth, d, 0.06) << d;
  }
}

/// Lines "VAR X = ..." of a text, as X -> right-hand side (trimmed).
std::vector<std::pair<std::string, std::string>> assignments(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::stringstream ss(text);
  std::string line;
  while (std::getline(ss, line)) {
    if (line.rfind("VAR ", 0) != 0) continue;
    const std::size_t eq = line.find(" = ");
    std::string rhs = line.substr(eq + 3);
    while (!rhs.empty() && rhs.back() == ' ') rhs.pop_back();
    out.emplace_back(line.substr(4, eq - 4), rhs);
  }
  return out;
}

TEST_F(RulerTasks, VariableTrackingChainResolvedByAWalk) {
  const std::string tmpl = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
  for (const int L : {1024, 2048}) {
    const std::vector<TaskItem> items = gen("ruler_vt", 4, L, 7);
    for (const TaskItem& it : items) {
      // The one-shot example, then the task.
      const std::size_t main_at = it.context.rfind(tmpl);
      ASSERT_NE(main_at, std::string::npos);
      ASSERT_EQ(it.context.find(tmpl), 0u);
      const std::string example = it.context.substr(0, main_at), body = it.context.substr(main_at + tmpl.size());
      EXPECT_LE(tokens(example.substr(0, example.rfind(" they are: ") + 11), false), 500);
      const std::string question = it.prompt.substr(it.context.size());
      const std::size_t vpos = question.find("assigned the value ") + 19;
      const std::string value = question.substr(vpos, question.find(' ', vpos) - vpos);
      EXPECT_NE(question.find(", 5 variables are assigned the value " + value + ", they are: "), std::string::npos);
      // Walk: every variable whose assignments lead to the value, in text order.
      const auto as = assignments(body);
      EXPECT_EQ(as.size(), 5u);
      std::map<std::string, std::string> rhs(as.begin(), as.end());
      std::vector<std::string> resolved;
      for (const auto& [var, r0] : as) {
        std::string r = r0;
        for (int hop = 0; hop < 10 && r.rfind("VAR ", 0) == 0; ++hop) r = rhs[r.substr(4)];
        if (r == value) resolved.push_back(var);
      }
      EXPECT_EQ(resolved, it.references);
      for (const std::string& v : it.references) EXPECT_EQ(v.size(), 5u);
      // The example's chain: 3-letter names, another value, answered after its question.
      const auto ex = assignments(example);
      ASSERT_EQ(ex.size(), 5u);
      EXPECT_EQ(ex[0].first.size(), 3u);
      EXPECT_NE(ex[0].second, value);
      std::string ex_answer;
      for (const auto& a : ex) ex_answer += (ex_answer.empty() ? "" : " ") + a.first;
      EXPECT_NE(example.find("they are:  " + ex_answer + "\n\n"), std::string::npos);
      // Item depth: noise tokens before the first chain line / all noise tokens.
      const std::size_t first = body.find("VAR ");
      std::string before = body.substr(0, first), noise_only;
      if (!before.empty()) before.pop_back();  // the "\n" before the line
      std::stringstream ss(body);
      std::string line;
      while (std::getline(ss, line))
        if (line.rfind("VAR ", 0) != 0) noise_only += (noise_only.empty() ? "" : "\n") + line;
      EXPECT_NEAR(it.depth, static_cast<double>(tokens(before, false)) / tokens(noise_only, false), 1e-9);
    }
  }
}

/// The entries of a "1. w 2. w ..." list (numbering checked).
std::vector<std::string> numbered_entries(const std::string& list) {
  std::vector<std::string> out;
  std::size_t p = 0;
  for (int i = 1;; ++i) {
    const std::string head = std::to_string(i) + ". ";
    EXPECT_EQ(list.compare(p, head.size(), head), 0) << i;
    p += head.size();
    const std::string next = " " + std::to_string(i + 1) + ". ";
    const std::size_t q = list.find(next, p);
    out.push_back(list.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return out;
}

TEST_F(RulerTasks, CommonWordsRecounted) {
  const std::string tmpl =
      "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
      "appear most often.\n";
  // From 4096 tokens on RULER repeats more (30 and 3); stories260K needs over 5000 of its tokens for
  // those 300 entries, so that length is checked with the Qwen3 tokenizer of the shared data.
  const std::string qwen3 = kData + "/tokenizers/qwen3/tokenizer.json";
  for (const int L : {2048, 4096}) {
    const int rep_c = L >= 4096 ? 30 : 6, rep_u = L >= 4096 ? 3 : 1;
    std::unique_ptr<Tokenizer> own;
    if (L >= 4096) {
      if (!std::filesystem::exists(qwen3)) GTEST_SKIP() << qwen3 << " missing";
      own = load_hf_tokenizer(qwen3);
    }
    const Tokenizer& tok = own ? *own : *tok_;
    TaskGenOptions o;
    o.n = 1;
    o.context_tokens = L;
    o.seed = 4;
    const TaskItem it = generate_ruler_tasks("ruler_cwe", kData, tok, o)[0];
    EXPECT_LE(static_cast<int>(tok.encode(it.prompt, true).size()), L);
    EXPECT_GT(static_cast<int>(tok.encode(it.prompt, true).size()), L - 32);
    const std::size_t main_at = it.context.rfind(tmpl);
    ASSERT_NE(main_at, std::string::npos);
    const std::vector<std::string> entries = numbered_entries(it.context.substr(main_at + tmpl.size()));
    std::map<std::string, int> counts;
    for (const std::string& e : entries) ++counts[e];
    std::set<std::string> common, refs(it.references.begin(), it.references.end());
    for (const auto& [w, n] : counts) {
      EXPECT_TRUE(n == rep_c || n == rep_u) << w << " " << n;
      if (n == rep_c) common.insert(w);
    }
    EXPECT_EQ(common, refs);
    EXPECT_EQ(it.references.size(), 10u);
    EXPECT_GT(counts.size(), 20u);
    // The example before it: its own list and its answer, the 10 words repeated most there.
    const std::string ex = it.context.substr(0, main_at);
    ASSERT_EQ(ex.find(tmpl), 0u);
    const std::string marker = "in the list are: ";
    const std::size_t ans = ex.find(marker);
    ASSERT_NE(ans, std::string::npos);
    const std::size_t list_end = ex.find("\nQuestion: ");
    const std::vector<std::string> ex_entries = numbered_entries(ex.substr(tmpl.size(), list_end - tmpl.size()));
    std::map<std::string, int> ex_counts;
    for (const std::string& e : ex_entries) ++ex_counts[e];
    std::string ex_answer = ex.substr(ans + marker.size());
    ASSERT_EQ(ex_answer.back(), '\n');
    ex_answer.pop_back();
    const std::vector<std::string> ex_top = numbered_entries(ex_answer);
    EXPECT_EQ(ex_top.size(), 10u);
    for (const std::string& w : ex_top) {
      EXPECT_EQ(ex_counts[w], L >= 4096 ? 10 : 3) << w;
      EXPECT_EQ(counts.count(w), 0u) << w;  // the example's words are not the item's
    }
    EXPECT_EQ(ex_counts.size(), L >= 4096 ? 40u : 20u);
  }
}

TEST_F(RulerTasks, FrequentWordsRecounted) {
  const std::string tmpl =
      "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
      "appeared coded words. ";
  for (const int L : {1024, 2048}) {
    for (const TaskItem& it : gen("ruler_fwe", 2, L, 8)) {
      ASSERT_EQ(it.context.rfind(tmpl, 0), 0u);
      std::stringstream ss(it.context.substr(tmpl.size()));
      std::map<std::string, int> counts;
      std::string w;
      int total = 0;
      while (ss >> w) ++counts[w], ++total;
      std::vector<std::pair<int, std::string>> by_count;
      for (const auto& [word, n] : counts)
        if (word != "...") {
          EXPECT_EQ(word.size(), 6u);
          by_count.emplace_back(n, word);
        }
      std::sort(by_count.rbegin(), by_count.rend());
      ASSERT_GE(by_count.size(), 4u);
      EXPECT_GT(counts["..."], by_count[0].first);  // the dots are the most frequent
      EXPECT_GT(by_count[2].first, by_count[3].first);
      EXPECT_EQ(it.references, (std::vector<std::string>{by_count[0].second, by_count[1].second, by_count[2].second}));
      EXPECT_GT(by_count[0].first, by_count[1].first);
      EXPECT_GT(total, 100);
    }
  }
}

TEST_F(RulerTasks, BadInputIsAnErrorNamingIt) {
  auto error_of = [&](const std::string& task, TaskGenOptions o, const std::string& data = kData) {
    try {
      generate_ruler_tasks(task, data, *tok_, o);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  TaskGenOptions o;
  o.n = 1;
  o.context_tokens = 1024;
  EXPECT_NE(error_of("ruler_nope", o).find("\"ruler_nope\": unknown RULER task (expected one of: ruler_niah_single_1"),
            std::string::npos);
  EXPECT_THROW(generate_tasks("ruler_nope", kData, *tok_, o), Error);
  o.n = 0;
  EXPECT_NE(error_of("ruler_vt", o).find("--n 0: must be at least 1"), std::string::npos);
  o.n = 1;
  o.context_tokens = 60;
  for (const std::string& t : ruler_task_names())
    EXPECT_NE(error_of(t, o).find(t + ": --context-tokens 60 is too small"), std::string::npos) << t << error_of(t, o);
  o.context_tokens = 1024;
  o.variant = "x";
  EXPECT_NE(error_of("ruler_cwe", o).find("--variant \"x\""), std::string::npos);
  o.variant = "";
  o.max_prompt_tokens = 1100;  // 1024 + 128 answer tokens do not fit
  EXPECT_NE(error_of("ruler_niah_single_1", o).find("exceeds the prompt limit of 1100 tokens"), std::string::npos);
  o.max_prompt_tokens = 0;
  EXPECT_NE(error_of("ruler_niah_single_2", o, "/nonexistent/data").find("/nonexistent/data: data folder not found"),
            std::string::npos);
  const std::string empty = kvcompact::testing::fresh_dir("ruler_empty_data");
  EXPECT_NE(error_of("ruler_niah_single_2", o, empty).find("PaulGrahamEssays: missing essay folder"), std::string::npos);
  EXPECT_EQ(error_of("ruler_niah_single_1", o, empty), "");  // the noise haystack needs no data file
}

TEST_F(RulerTasks, CliWritesAFileAndListsTheTasks) {
  using kvcompact::testing::run_cli;
  const std::string out = std::string(KVC_TEST_TMP) + "/ruler_cli_" + std::to_string(getpid()) + ".jsonl";
  const auto ok = run_cli("tasks --family ruler_niah_single_1 --context-tokens 1024 --n 4 --seed 1 --tokenizer " +
                          kTok + " --data-dir " + kData + " -o " + out);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("4 ruler_niah_single_1 items (seed 1)"), std::string::npos) << ok.out;
  EXPECT_EQ(read_task_suite(out).size(), 4u);
  const auto list = run_cli("tasks --family list");
  ASSERT_EQ(list.status, 0) << list.err;
  for (const std::string& t : ruler_task_names()) EXPECT_NE(list.out.find(t + "\n"), std::string::npos) << t;
  const auto bad = run_cli("tasks --family ruler_nope --tokenizer " + kTok + " -o " + out);
  EXPECT_NE(bad.status, 0);
  EXPECT_NE(bad.err.find("unknown task family"), std::string::npos) << bad.err;
  EXPECT_EQ(std::count(bad.err.begin(), bad.err.end(), '\n'), 1) << bad.err;
  const auto small = run_cli("tasks --family ruler_vt --context-tokens 100 --tokenizer " + kTok + " --data-dir " +
                             kData + " -o " + out);
  EXPECT_NE(small.status, 0);
  EXPECT_NE(small.err.find("ruler_vt: --context-tokens 100 is too small"), std::string::npos) << small.err;
  const auto n0 = run_cli("tasks --family ruler_fwe --n 0 --tokenizer " + kTok + " --data-dir " + kData + " -o " + out);
  EXPECT_NE(n0.status, 0);
  EXPECT_NE(n0.err.find("--n 0: must be at least 1"), std::string::npos) << n0.err;
}

}}  // namespace
}  // namespace kvcompact
