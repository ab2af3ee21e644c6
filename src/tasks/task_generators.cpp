#include "tasks/task_generators.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_map>

#include "tasks/cloze_generator.h"  // SplitMix64
#include "tasks/ruler_tasks.h"
#include "tasks/text_words.h"
#include "core/error.h"

namespace kvcompact {

namespace {

using text_words::ends_sentence;
using text_words::fnv1a;
using text_words::is_space;
using text_words::read_data_file;
using text_words::read_essay_words;
using text_words::sentence_starts;
using text_words::shuffle;
using text_words::split_words;
using text_words::starts_upper;


namespace fs = std::filesystem;

constexpr int kMaxAttemptsPerItem = 1000;

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    pos = end + 1;
  }
  return lines;
}

std::string trim(const std::string& s) {
  std::size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

/// words[begin, begin + count) joined by single spaces, indices taken modulo words.size().
std::string join_words(const std::vector<std::string>& words, std::size_t begin, std::size_t count) {
  std::string out;
  for (std::size_t k = 0; k < count; ++k) {
    if (k) out += ' ';
    out += words[(begin + k) % words.size()];
  }
  return out;
}

/// `k` distinct indices in [0, n) other than `exclude` (k <= n - 1).
std::vector<std::size_t> draw_distinct(std::size_t n, std::size_t k, std::size_t exclude, SplitMix64& rng) {
  std::vector<std::size_t> out;
  while (out.size() < k) {
    const std::size_t i = rng.below(n);
    if (i != exclude && std::find(out.begin(), out.end(), i) == out.end()) out.push_back(i);
  }
  return out;
}

/// Shared state of one generate_tasks call.
struct Gen {
  const std::string& family;
  const std::string& data_dir;
  const Tokenizer& tok;
  const TaskGenOptions& opts;
  SplitMix64 rng;

  std::string path(const std::string& rel) const { return (fs::path(data_dir) / rel).string(); }
  /// Prompt tokens as the model sees them (BOS included).
  int prompt_tokens(const std::string& text) const { return static_cast<int>(tok.encode(text, true).size()); }
  /// Tokens of a piece of text (no BOS).
  int text_tokens(const std::string& text) const {
    return text.empty() ? 0 : static_cast<int>(tok.encode(text, false).size());
  }
  bool fits(const std::string& prompt, int max_new_tokens) const {
    return opts.max_prompt_tokens <= 0 || prompt_tokens(prompt) + max_new_tokens <= opts.max_prompt_tokens;
  }
  std::string id(int i) const { return fmt::format("{}-{:04d}", family, i); }

  /// Largest m in [0, limit] with count(m) <= budget, for a count non-decreasing in m; `guess` is
  /// a starting point. Returns -1 when even count(0) > budget.
  int largest_fitting(int limit, int guess, int budget, const std::function<int(int)>& count) const {
    if (count(0) > budget) return -1;
    int lo = 0, hi = std::clamp(guess, 1, std::max(1, limit));  // count(lo) <= budget
    if (limit <= 0) return 0;
    while (count(hi) <= budget) {  // grow until over the budget or at the limit
      lo = hi;
      if (hi == limit) return limit;
      hi = std::min(limit, hi * 2);
    }
    while (hi - lo > 1) {  // count(lo) <= budget < count(hi)
      const int mid = lo + (hi - lo) / 2;
      (count(mid) <= budget ? lo : hi) = mid;
    }
    return lo;
  }
};

// ---------------------------------------------------------------------------------------------
// Data readers.

struct CapitalPair {
  std::string country, capital;
  int line;
};

std::vector<CapitalPair> read_capitals(const std::string& path) {
  const std::vector<std::string> lines = split_lines(read_data_file(path));
  std::vector<CapitalPair> pairs;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::size_t tab = lines[i].find('\t');
    if (tab == std::string::npos)
      throw Error(fmt::format("{}:{}: expected \"country<TAB>capital\"", path, i + 1));
    CapitalPair p{trim(lines[i].substr(0, tab)), trim(lines[i].substr(tab + 1)), static_cast<int>(i + 1)};
    if (p.country.empty() || p.capital.empty())
      throw Error(fmt::format("{}:{}: empty country or capital", path, i + 1));
    pairs.push_back(std::move(p));
  }
  if (pairs.size() < 2) throw Error(fmt::format("{}: need at least 2 country/capital pairs", path));
  return pairs;
}

struct GsmItem {
  std::string question, answer;  ///< answer = the final number (commas removed)
  int line;
};

std::vector<GsmItem> read_gsm8k(const std::string& path) {
  const std::vector<std::string> lines = split_lines(read_data_file(path));
  std::vector<GsmItem> items;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (trim(lines[i]).empty()) continue;
    const std::string where = fmt::format("{}:{}", path, i + 1);
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(lines[i]);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number beyond double
      throw Error(fmt::format("{}: invalid JSON ({})", where, e.what()));
    }
    if (!j.is_object() || !j.contains("question") || !j["question"].is_string() || !j.contains("answer") ||
        !j["answer"].is_string())
      throw Error(fmt::format("{}: expected string fields \"question\" and \"answer\"", where));
    const std::string answer = j["answer"].get<std::string>();
    const std::size_t hash = answer.rfind("####");
    if (hash == std::string::npos) throw Error(fmt::format("{}: answer has no \"####\" final number", where));
    std::string final_number;
    for (char c : trim(answer.substr(hash + 4)))
      if (c != ',') final_number += c;
    if (final_number.empty()) throw Error(fmt::format("{}: empty final number after \"####\"", where));
    items.push_back({trim(j["question"].get<std::string>()), final_number, static_cast<int>(i + 1)});
  }
  if (items.size() < 2) throw Error(fmt::format("{}: need at least 2 GSM8K problems", path));
  return items;
}

struct BabiExample {
  std::vector<std::string> statements;  ///< the story so far
  std::string question, answer;
  int line;  ///< 1-based line of the question
  int story;  ///< story number within the file
};

struct BabiTask {
  std::string rel;  ///< file relative to data_dir
  std::vector<BabiExample> examples;  ///< usable ones (single-word answers)
};

BabiTask read_babi(const std::string& data_dir, const std::string& rel) {
  const std::string path = (fs::path(data_dir) / rel).string();
  const std::vector<std::string> lines = split_lines(read_data_file(path));
  BabiTask task{rel, {}};
  std::vector<std::string> story;
  int story_no = -1;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string line = lines[i];
    if (trim(line).empty()) continue;
    const std::string where = fmt::format("{}:{}", path, i + 1);
    std::size_t sp = 0;
    while (sp < line.size() && line[sp] >= '0' && line[sp] <= '9') ++sp;
    if (sp == 0 || sp >= line.size() || line[sp] != ' ')
      throw Error(fmt::format("{}: expected \"ID text\" (bAbI format)", where));
    const int id = std::stoi(line.substr(0, sp));
    if (id == 1) {
      story.clear();
      ++story_no;
    }
    const std::string rest = line.substr(sp + 1);
    const std::size_t tab = rest.find('\t');
    if (tab == std::string::npos) {
      story.push_back(trim(rest));
      continue;
    }
    const std::size_t tab2 = rest.find('\t', tab + 1);
    if (tab2 == std::string::npos)
      throw Error(fmt::format("{}: expected \"ID question<TAB>answer<TAB>support\" (bAbI format)", where));
    BabiExample ex{story, trim(rest.substr(0, tab)), trim(rest.substr(tab + 1, tab2 - tab - 1)),
                   static_cast<int>(i + 1), story_no};
    if (ex.answer.empty()) throw Error(fmt::format("{}: empty answer", where));
    if (ex.answer.find(',') == std::string::npos && !ex.statements.empty()) task.examples.push_back(std::move(ex));
  }
  return task;
}

// ---------------------------------------------------------------------------------------------
// Families.

int context_tokens_or_default(const Gen& g) {
  return g.opts.context_tokens > 0 ? g.opts.context_tokens : default_context_tokens(g.family);
}

void check_context_fits(const Gen& g, int context_tokens, int max_new_tokens) {
  if (g.opts.max_prompt_tokens > 0 && context_tokens + max_new_tokens > g.opts.max_prompt_tokens)
    throw Error(fmt::format("--context-tokens {} plus {} answer tokens exceeds the prompt limit of {} tokens",
                            context_tokens, max_new_tokens, g.opts.max_prompt_tokens));
}

std::vector<TaskItem> make_retrieval(Gen& g) {
  const std::string& v = g.opts.variant;
  if (!(v.empty() || v == "passkey" || v == "fact" || v == "mixed"))
    throw Error(fmt::format("--variant \"{}\": retrieval takes passkey, fact or mixed", v));
  const int L = context_tokens_or_default(g);
  const int max_new = 8;
  check_context_fits(g, L, max_new);

  // Haystack: all essays in file-name order, white space collapsed.
  const std::vector<std::string> words = read_essay_words(g.data_dir);
  const std::vector<std::size_t> starts = sentence_starts(words);

  std::vector<CapitalPair> cities;
  if (v == "fact" || v == "mixed") {
    for (CapitalPair& p : read_capitals(g.path("factual/country_capital_pairs.tsv")))
      if (p.capital.find(' ') == std::string::npos) cities.push_back(std::move(p));
  }

  // Mean tokens per word on a sample, for the first guess of the haystack length.
  const std::string sample = join_words(words, 0, std::min<std::size_t>(words.size(), 400));
  const double tokens_per_word =
      std::max(1.0, static_cast<double>(g.text_tokens(sample)) / std::min<std::size_t>(words.size(), 400));

  std::vector<TaskItem> items;
  for (int i = 0; i < g.opts.n; ++i) {
    const bool fact = v == "fact" || (v == "mixed" && i % 2 == 1);
    TaskItem item;
    item.id = g.id(i);
    item.family = "retrieval";
    item.max_new_tokens = max_new;
    item.stop = {"\n"};
    std::string needle, question;
    if (fact) {
      const CapitalPair& c = cities[g.rng.below(cities.size())];
      needle = fmt::format("The secret city is {}.", c.capital);
      question = "What is the secret city? The secret city is";
      item.reference = c.capital;
      item.answer_type = "word";
      item.source = fmt::format("factual/country_capital_pairs.tsv:{}", c.line);
    } else {
      const uint64_t key = 10000 + g.rng.below(90000);
      needle = fmt::format("The pass key is {}. Remember it.", key);
      question = "What is the pass key? The pass key is";
      item.reference = std::to_string(key);
      item.answer_type = "number";
    }
    const double depth = g.opts.depth >= 0 ? g.opts.depth : (g.opts.n == 1 ? 0.5 : static_cast<double>(i) / (g.opts.n - 1));
    item.depth = depth;
    const std::size_t start = starts[g.rng.below(starts.size())];
    if (item.source.empty()) item.source = fmt::format("needle_haystack/PaulGrahamEssays (word {})", start);

    // Needle position for a haystack of m words: the k whose prefix token count is nearest depth x
    // the haystack's token count.
    auto needle_position = [&](int m) {
      const double target = depth * g.text_tokens(join_words(words, start, m));
      std::function<int(int)> prefix = [&](int k) { return g.text_tokens(join_words(words, start, k)); };
      int k = g.largest_fitting(m, static_cast<int>(depth * m), static_cast<int>(std::floor(target)), prefix);
      if (k < 0) k = 0;
      if (k < m && std::abs(prefix(k + 1) - target) < std::abs(prefix(k) - target)) ++k;
      return k;
    };
    auto build = [&](int m, int k) {
      const std::string before = join_words(words, start, k);
      const std::string after = join_words(words, start + k, m - k);
      return before + (before.empty() ? "" : " ") + needle + (after.empty() ? "" : " ") + after + "\n" + question;
    };
    // Longest haystack within L tokens (needle placed proportionally while searching, exactly after).
    std::function<int(int)> count = [&](int m) { return g.prompt_tokens(build(m, static_cast<int>(depth * m))); };
    const int limit = static_cast<int>(std::min<std::size_t>(words.size(), 1u << 30));
    const int guess = static_cast<int>((L - g.prompt_tokens(build(0, 0))) / tokens_per_word);
    int m = g.largest_fitting(limit, std::max(1, guess), L, count);
    if (m < 1)
      throw Error(fmt::format("--context-tokens {} is too small for the retrieval prompt (needle and question "
                              "alone take {} tokens)",
                              L, g.prompt_tokens(build(0, 0))));
    int k = needle_position(m);
    while (m > 1 && g.prompt_tokens(build(m, k)) > L) k = needle_position(--m);
    item.prompt = build(m, k);
    items.push_back(std::move(item));
  }
  return items;
}

/// Sentences of a story: a terminator . ! ? (then closing quotes) followed by white space.
std::vector<std::string> split_sentences(const std::string& t) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < t.size()) {
    while (i < t.size() && is_space(t[i])) ++i;
    if (i >= t.size()) break;
    const std::size_t start = i;
    while (i < t.size()) {
      const char c = t[i++];
      if (c == '.' || c == '!' || c == '?') {
        while (i < t.size() && (t[i] == '"' || t[i] == '\'')) ++i;
        if (i >= t.size() || is_space(t[i])) break;
      }
    }
    out.push_back(trim(t.substr(start, i - start)));
  }
  return out;
}

std::vector<std::string> read_stories(const std::string& path) {
  const std::string text = read_data_file(path);
  std::vector<std::string> stories;
  std::string cur;
  for (const std::string& line : split_lines(text)) {
    if (trim(line).empty()) {
      if (!trim(cur).empty()) stories.push_back(trim(cur));
      cur.clear();
    } else {
      cur += (cur.empty() ? "" : "\n") + line;
    }
  }
  if (!trim(cur).empty()) stories.push_back(trim(cur));
  if (stories.size() < 2) throw Error(fmt::format("{}: need at least 2 stories (separated by blank lines)", path));
  return stories;
}

std::vector<TaskItem> make_copy(Gen& g) {
  if (!g.opts.variant.empty()) throw Error(fmt::format("--variant \"{}\": copy takes no variant", g.opts.variant));
  const int L = context_tokens_or_default(g);
  const int max_new = 24, prefix_words = 4, min_rest_words = 3;
  check_context_fits(g, L, max_new);
  const std::string rel = "tinystories/tinystories_val_head.txt";
  const std::vector<std::string> stories = read_stories(g.path(rel));

  std::vector<TaskItem> items;
  for (int i = 0; i < g.opts.n; ++i) {
    bool made = false;
    for (int attempt = 0; attempt < kMaxAttemptsPerItem && !made; ++attempt) {
      const std::size_t a = g.rng.below(stories.size());
      const std::vector<std::string> sentences = split_sentences(stories[a]);
      if (sentences.size() < 2) continue;
      const std::size_t s = 1 + g.rng.below(sentences.size() - 1);
      const std::vector<std::string> w = split_words(sentences[s]);
      if (static_cast<int>(w.size()) < prefix_words + min_rest_words) continue;
      const std::string prefix = join_words(w, 0, prefix_words);
      // Reference: the rest of the sentence, cut to max_new - 4 tokens (counted as the tokens it
      // adds after the prefix).
      int rest = static_cast<int>(w.size()) - prefix_words;
      const int prefix_tokens = g.text_tokens(prefix);
      while (rest >= min_rest_words &&
             g.text_tokens(join_words(w, 0, prefix_words + rest)) - prefix_tokens > max_new - 4)
        --rest;
      if (rest < min_rest_words) continue;
      const std::string reference = join_words(w, prefix_words, rest);
      const std::string passage = prefix + " " + reference;
      // Filler: consecutive documents from a random place at least 8 documents away from `a` (a
      // story's paragraphs are separate documents), as one run of words.
      const std::size_t far = std::min<std::size_t>(8, (stories.size() - 1) / 2);
      const std::size_t f = a + far + 1 + g.rng.below(stories.size() - 2 * far - 1);
      std::vector<std::string> filler_words;
      for (std::size_t b = 0; b < stories.size() && filler_words.size() < static_cast<std::size_t>(4 * L + 64); ++b) {
        const std::size_t d = (f + b) % stories.size();
        if (d == a) continue;
        std::vector<std::string> fw = split_words(stories[d]);
        filler_words.insert(filler_words.end(), fw.begin(), fw.end());
      }
      auto build = [&](int m) { return passage + "\n\n" + join_words(filler_words, 0, m) + "\n\n" + prefix; };
      std::function<int(int)> count = [&](int m) { return g.prompt_tokens(build(m)); };
      const int m = g.largest_fitting(static_cast<int>(filler_words.size()), L / 2, L, count);
      if (m < 1) {
        if (g.prompt_tokens(build(0)) > L)
          throw Error(fmt::format("--context-tokens {} is too small for the copy prompt", L));
        continue;
      }
      const std::string filler = join_words(filler_words, 0, m);
      if (filler.find(prefix) != std::string::npos) continue;  // the prefix must point at the passage only
      TaskItem item;
      item.id = g.id(i);
      item.family = "copy";
      item.prompt = build(m);
      item.reference = reference;
      item.answer_type = "text";
      item.stop = {"\n"};
      item.max_new_tokens = max_new;
      item.source = fmt::format("{} (document {}, sentence {})", rel, a + 1, s + 1);
      items.push_back(std::move(item));
      made = true;
    }
    if (!made) throw Error(fmt::format("copy: could not make item {} from {}", i, g.path(rel)));
  }
  return items;
}

/// Runs `make` until it returns an item that fits max_prompt_tokens (or throws).
TaskItem draw_fitting(Gen& g, int i, const std::function<TaskItem()>& make) {
  for (int attempt = 0; attempt < kMaxAttemptsPerItem; ++attempt) {
    TaskItem item = make();
    if (g.fits(item.prompt, item.max_new_tokens)) {
      item.id = g.id(i);
      item.family = g.family;
      return item;
    }
  }
  throw Error(fmt::format("{}: no prompt with {} shots fits --max-prompt-tokens {} after {} tries: use fewer --shots",
                          g.family, g.opts.shots, g.opts.max_prompt_tokens, kMaxAttemptsPerItem));
}

std::vector<TaskItem> make_knowledge(Gen& g) {
  if (!g.opts.variant.empty())
    throw Error(fmt::format("--variant \"{}\": knowledge takes no variant", g.opts.variant));
  const std::string rel = "factual/country_capital_pairs.tsv";
  const std::vector<CapitalPair> pairs = read_capitals(g.path(rel));
  if (static_cast<std::size_t>(g.opts.shots) >= pairs.size())
    throw Error(fmt::format("--shots {}: {} has only {} pairs", g.opts.shots, g.path(rel), pairs.size()));
  std::vector<std::size_t> order;
  std::size_t next = 0;
  std::vector<TaskItem> items;
  for (int i = 0; i < g.opts.n; ++i) {
    items.push_back(draw_fitting(g, i, [&] {
      if (next == order.size()) {
        order.resize(pairs.size());
        for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
        shuffle(order, g.rng);
        next = 0;
      }
      const std::size_t q = order[next++];
      TaskItem item;
      for (std::size_t s : draw_distinct(pairs.size(), g.opts.shots, q, g.rng))
        item.prompt += fmt::format("The capital of {} is {}.\n", pairs[s].country, pairs[s].capital);
      item.prompt += fmt::format("The capital of {} is", pairs[q].country);
      item.reference = pairs[q].capital;
      item.answer_type = "word";
      item.stop = {"\n"};
      item.max_new_tokens = 8;
      item.source = fmt::format("{}:{}", rel, pairs[q].line);
      return item;
    }));
  }
  return items;
}

std::vector<TaskItem> make_math(Gen& g) {
  const std::string v = g.opts.variant.empty() ? "mixed" : g.opts.variant;
  if (v != "mixed" && v != "arithmetic" && v != "gsm8k")
    throw Error(fmt::format("--variant \"{}\": math takes mixed, arithmetic or gsm8k", v));
  const std::string rel = "gsm8k/test.jsonl";
  std::vector<GsmItem> gsm;
  if (v != "arithmetic") gsm = read_gsm8k(g.path(rel));
  if (v != "arithmetic" && static_cast<std::size_t>(g.opts.shots) >= gsm.size())
    throw Error(fmt::format("--shots {}: {} has only {} problems", g.opts.shots, g.path(rel), gsm.size()));
  auto arithmetic_line = [&](bool with_answer, std::string* answer) {
    int a = static_cast<int>(g.rng.below(21)), b = static_cast<int>(g.rng.below(21));
    const bool minus = g.rng.below(2) == 1;
    if (minus && a < b) std::swap(a, b);
    const int r = minus ? a - b : a + b;
    if (answer) *answer = std::to_string(r);
    return with_answer ? fmt::format("{} {} {} = {}\n", a, minus ? '-' : '+', b, r)
                       : fmt::format("{} {} {} =", a, minus ? '-' : '+', b);
  };
  std::vector<TaskItem> items;
  for (int i = 0; i < g.opts.n; ++i) {
    const bool use_gsm = v == "gsm8k" || (v == "mixed" && i % 2 == 1);
    items.push_back(draw_fitting(g, i, [&] {
      TaskItem item;
      item.answer_type = "number";
      item.stop = {"\n"};
      if (use_gsm) {
        const std::size_t q = g.rng.below(gsm.size());
        for (std::size_t s : draw_distinct(gsm.size(), g.opts.shots, q, g.rng))
          item.prompt += fmt::format("Question: {}\nAnswer: {}\n\n", gsm[s].question, gsm[s].answer);
        item.prompt += fmt::format("Question: {}\nAnswer:", gsm[q].question);
        item.reference = gsm[q].answer;
        item.max_new_tokens = 12;
        item.source = fmt::format("{}:{}", rel, gsm[q].line);
      } else {
        for (int s = 0; s < g.opts.shots; ++s) item.prompt += arithmetic_line(true, nullptr);
        item.prompt += arithmetic_line(false, &item.reference);
        item.max_new_tokens = 6;
      }
      return item;
    }));
  }
  return items;
}

std::vector<TaskItem> make_inference(Gen& g) {
  // Task files by number.
  const fs::path dir = fs::path(g.data_dir) / "babi" / "en_test";
  std::map<int, std::string> by_number;  // N -> file name
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.rfind("qa", 0) != 0 || name.size() < 4 || it->path().extension() != ".txt") continue;
    std::size_t k = 2;
    while (k < name.size() && name[k] >= '0' && name[k] <= '9') ++k;
    if (k > 2) by_number[std::stoi(name.substr(2, k - 2))] = name;
  }
  if (ec || by_number.empty())
    throw Error(fmt::format("{}: missing bAbI folder or no qaN_*.txt files in it (set --data-dir)", dir.string()));
  std::vector<int> wanted;
  if (g.opts.variant.empty()) {
    for (const auto& [n, name] : by_number) wanted.push_back(n);
  } else {
    std::stringstream ss(g.opts.variant);
    std::string part;
    while (std::getline(ss, part, ',')) {
      part = trim(part);
      if (part.rfind("qa", 0) == 0) part = part.substr(2);
      if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos || part.size() > 3)
        throw Error(fmt::format("--variant \"{}\": inference takes bAbI task numbers like 1,2 or qa1,qa2",
                                g.opts.variant));
      const int n = std::stoi(part);
      if (!by_number.count(n)) throw Error(fmt::format("--variant: no bAbI task {} in {}", n, dir.string()));
      wanted.push_back(n);
    }
  }
  std::vector<BabiTask> tasks;
  for (int n : wanted) {
    BabiTask t = read_babi(g.data_dir, "babi/en_test/" + by_number[n]);
    std::set<int> stories;
    for (const auto& ex : t.examples) stories.insert(ex.story);
    if (!t.examples.empty() && static_cast<int>(stories.size()) > g.opts.shots) tasks.push_back(std::move(t));
  }
  if (tasks.empty())
    throw Error(fmt::format("{}: no bAbI task with single-word answers and more than {} stories", dir.string(),
                            g.opts.shots));
  auto format_example = [](const BabiExample& ex) {
    std::string s;
    for (const std::string& st : ex.statements) s += st + "\n";
    return s + "Question: " + ex.question + "\nAnswer:";
  };
  std::vector<TaskItem> items;
  for (int i = 0; i < g.opts.n; ++i) {
    items.push_back(draw_fitting(g, i, [&] {
      const BabiTask& t = tasks[g.rng.below(tasks.size())];
      const std::size_t q = g.rng.below(t.examples.size());
      TaskItem item;
      std::vector<int> used_stories = {t.examples[q].story};
      for (int s = 0; s < g.opts.shots;) {
        const BabiExample& ex = t.examples[g.rng.below(t.examples.size())];
        if (std::find(used_stories.begin(), used_stories.end(), ex.story) != used_stories.end()) continue;
        used_stories.push_back(ex.story);
        item.prompt += format_example(ex) + " " + ex.answer + "\n\n";
        ++s;
      }
      item.prompt += format_example(t.examples[q]);
      item.reference = t.examples[q].answer;
      item.answer_type = "word";
      item.stop = {"\n"};
      item.max_new_tokens = 6;
      item.source = fmt::format("{}:{}", t.rel, t.examples[q].line);
      return item;
    }));
  }
  return items;
}

}  // namespace

int default_context_tokens(const std::string& family) {
  if (is_ruler_task(family)) return kRulerDefaultContextTokens;
  return (family == "retrieval" || family == "copy") ? 256 : 0;
}

std::vector<TaskItem> generate_tasks(const std::string& family, const std::string& data_dir,
                                     const Tokenizer& tokenizer, const TaskGenOptions& opts) {
  const auto& fams = task_families();
  if (std::find(fams.begin(), fams.end(), family) == fams.end())
    throw Error(fmt::format("--family \"{}\": unknown task family (expected one of: {})", family, fmt::join(fams, ", ")));
  if (is_ruler_task(family)) return generate_ruler_tasks(family, data_dir, tokenizer, opts);
  if (opts.n < 1) throw Error(fmt::format("--n {}: must be at least 1", opts.n));
  if (opts.shots < 0) throw Error(fmt::format("--shots {}: must be >= 0", opts.shots));
  if (opts.context_tokens < 0) throw Error(fmt::format("--context-tokens {}: must be >= 0", opts.context_tokens));
  if (opts.depth > 1 || std::isnan(opts.depth))
    throw Error(fmt::format("--depth {}: must be in [0, 1] (or negative to spread over items)", opts.depth));
  if (opts.max_prompt_tokens < 0)
    throw Error(fmt::format("--max-prompt-tokens {}: must be >= 0", opts.max_prompt_tokens));
  if (!fs::is_directory(data_dir))
    throw Error(fmt::format("{}: data folder not found (set --data-dir or KVC_SHARED)", data_dir));
  Gen g{family, data_dir, tokenizer, opts, SplitMix64(opts.seed ^ fnv1a(family))};
  if (family == "retrieval") return make_retrieval(g);
  if (family == "copy") return make_copy(g);
  if (family == "knowledge") return make_knowledge(g);
  if (family == "math") return make_math(g);
  return make_inference(g);
}

}  // namespace kvcompact
