#include "tasks/ruler_tasks.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <numbers>
#include <optional>
#include <set>
#include <sstream>

#include "tasks/cloze_generator.h"  // SplitMix64
#include "tasks/ruler_words.inc"
#include "tasks/text_words.h"
#include "core/error.h"

namespace kvcompact {

namespace {

using text_words::ends_sentence;
using text_words::fnv1a;
using text_words::is_space;
using text_words::read_essay_words;
using text_words::sentence_starts;
using text_words::shuffle;
using text_words::split_words;
using text_words::starts_upper;


namespace fs = std::filesystem;

constexpr int kMaxRulerAttempts = 100;

// RULER scripts/data/synthetic/constants.py (templates and answer prefixes) and its generators.
constexpr const char* kNoise = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";
constexpr const char* kVtTemplate = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n";
constexpr const char* kCweTemplate =
    "Below is a numbered list of words. In these words, some appear more often than others. Memorize the ones that "
    "appear most often.\n";
constexpr const char* kCweQuestion =
    "\nQuestion: What are the 10 most common words in the above list? Answer: The top 10 words that appear most "
    "often in the list are:";
constexpr const char* kFweTemplate =
    "Read the following coded text and track the frequency of each coded word. Find the three most frequently "
    "appeared coded words. ";
constexpr const char* kFweQuestion =
    "\nQuestion: Do not provide any explanation. Please ignore the dots '....'. What are the three most frequently "
    "appeared words in the above coded text? Answer: According to the coded text above, the three most frequently "
    "appeared words are:";

enum class HayKind { noise, essay, needle };
enum class Kind { words, numbers, uuids };

struct NiahConfig {
  HayKind haystack;
  Kind key, value;
  int num_k, num_v, num_q;
};

/// scripts/synthetic.yaml.
const NiahConfig* niah_config(const std::string& task) {
  static const std::vector<std::pair<std::string, NiahConfig>> configs = {
      {"ruler_niah_single_1", {HayKind::noise, Kind::words, Kind::numbers, 1, 1, 1}},
      {"ruler_niah_single_2", {HayKind::essay, Kind::words, Kind::numbers, 1, 1, 1}},
      {"ruler_niah_single_3", {HayKind::essay, Kind::words, Kind::uuids, 1, 1, 1}},
      {"ruler_niah_multikey_1", {HayKind::essay, Kind::words, Kind::numbers, 4, 1, 1}},
      {"ruler_niah_multikey_2", {HayKind::needle, Kind::words, Kind::numbers, 1, 1, 1}},
      {"ruler_niah_multikey_3", {HayKind::needle, Kind::uuids, Kind::uuids, 1, 1, 1}},
      {"ruler_niah_multivalue", {HayKind::essay, Kind::words, Kind::numbers, 1, 4, 1}},
      {"ruler_niah_multiquery", {HayKind::essay, Kind::words, Kind::numbers, 4, 1, 4}},
  };
  for (const auto& [name, c] : configs)
    if (name == task) return &c;
  return nullptr;
}

/// The lines of a word list, trailing white space removed, empty lines skipped.
std::vector<std::string> word_list(const char* text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && is_space(line.back())) line.pop_back();
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

const std::vector<std::string>& nouns() {
  static const std::vector<std::string> w = word_list(kWonderwordsNouns);
  return w;
}
const std::vector<std::string>& adjectives() {
  static const std::vector<std::string> w = word_list(kWonderwordsAdjectives);
  return w;
}
/// RULER's common_words_extraction pool: sorted(set(nouns + adjs + verbs)).
const std::vector<std::string>& cwe_pool() {
  static const std::vector<std::string> w = [] {
    std::set<std::string> s;
    for (const char* list : {kWonderwordsNouns, kWonderwordsAdjectives, kWonderwordsVerbs})
      for (std::string& x : word_list(list)) s.insert(std::move(x));
    return std::vector<std::string>(s.begin(), s.end());
  }();
  return w;
}

/// A random needle key or value of RULER's kinds: a 7-digit number, "adjective-noun", or a
/// version-4 UUID (lower-case hex, 8-4-4-4-12).
std::string random_of(Kind kind, SplitMix64& rng) {
  switch (kind) {
    case Kind::numbers:
      return std::to_string(1000000 + rng.below(9000000));
    case Kind::words:
      return adjectives()[rng.below(adjectives().size())] + "-" + nouns()[rng.below(nouns().size())];
    case Kind::uuids: {
      uint64_t hi = rng.next(), lo = rng.next();
      hi = (hi & ~0xF000ULL) | 0x4000ULL;                         // version 4
      lo = (lo & ~(0xC000ULL << 48)) | (0x8000ULL << 48);        // variant 10xx (RFC 4122)
      const std::string h = fmt::format("{:016x}{:016x}", hi, lo);
      return h.substr(0, 8) + "-" + h.substr(8, 4) + "-" + h.substr(12, 4) + "-" + h.substr(16, 4) + "-" +
             h.substr(20, 12);
    }
  }
  return {};
}

std::size_t count_occurrences(const std::string& text, const std::string& s) {
  std::size_t n = 0;
  for (std::size_t p = text.find(s); p != std::string::npos; p = text.find(s, p + 1)) ++n;
  return n;
}

std::string join(const std::vector<std::string>& v, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + v[i];
  return out;
}

/// A haystack of units (essay words joined by " ", or lines joined by "\n") into which needles
/// go at unit boundaries.
struct Haystack {
  std::string sep;
  std::function<const std::string&(int)> unit;  ///< unit i (0-based)
  /// Whether boundary b (before unit b; 0 < b < m) may hold a needle (essay: a sentence start).
  std::function<bool(int)> open = [](int) { return true; };

  /// The text of m units with needles (boundary, text; sorted by boundary) between them.
  std::string build(int m, const std::vector<std::pair<int, std::string>>& ins) const {
    std::string out;
    bool first = true;
    auto add = [&](const std::string& piece) {
      if (!first) out += sep;
      out += piece;
      first = false;
    };
    std::size_t k = 0;
    for (int i = 0; i <= m; ++i) {
      while (k < ins.size() && ins[k].first == i) add(ins[k++].second);
      if (i < m) add(unit(i));
    }
    return out;
  }
  /// The boundaries of m units that may hold a needle: 0, the open ones, m.
  std::vector<int> boundaries(int m) const {
    std::vector<int> b = {0};
    for (int i = 1; i < m; ++i)
      if (open(i)) b.push_back(i);
    if (m > 0) b.push_back(m);
    return b;
  }
};

/// State of one generate_ruler_tasks call.
struct Ruler {
  const std::string& task;
  const std::string& data_dir;
  const Tokenizer& tok;
  const TaskGenOptions& opts;
  int L;  ///< prompt token budget
  SplitMix64 rng;

  int prompt_tokens(const std::string& text) const { return static_cast<int>(tok.encode(text, true).size()); }
  int text_tokens(const std::string& text) const {
    return text.empty() ? 0 : static_cast<int>(tok.encode(text, false).size());
  }
  std::string id(int i) const { return fmt::format("{}-{:04d}", task, i); }
  /// Item i: prompt = context + question (the question verbatim after the compactable context),
  /// RULER's answers as references (answer_type recall, also joined by ", " as the reference), no
  /// stop strings, RULER's token limit.
  TaskItem recall_item(int i, std::string context, const std::string& question, std::vector<std::string> refs,
                       int max_new, std::string source) const {
    TaskItem item;
    item.id = id(i);
    item.family = task;
    item.prompt = context + question;
    item.context = std::move(context);
    item.reference = join(refs, ", ");
    item.references = std::move(refs);
    item.answer_type = "recall";
    item.stop = {};
    item.max_new_tokens = max_new;
    item.source = std::move(source);
    return item;
  }
  double depth_of(int i) const {
    if (opts.depth >= 0) return opts.depth;
    return opts.n == 1 ? 0.5 : static_cast<double>(i) / (opts.n - 1);
  }
  [[noreturn]] void too_small(int needed) const {
    throw Error(fmt::format("{}: --context-tokens {} is too small (the instructions, needles and question alone "
                            "take {} tokens)",
                            task, L, needed));
  }
};

/// Largest m in [1, limit] with count(m) <= budget for a count non-decreasing in m, starting from
/// `guess`; 0 when count(1) > budget.
int largest_fitting(int limit, int guess, int budget, const std::function<int(int)>& count) {
  if (limit < 1 || count(1) > budget) return 0;
  int lo = 1, hi = std::clamp(guess, 1, limit);
  while (count(hi) <= budget) {
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

/// Index into `bounds` of the boundary whose prefix (haystack text before it) has the token count
/// nearest `target`.
std::size_t nearest_boundary(const std::vector<int>& bounds, double target, const std::function<int(int)>& prefix) {
  std::size_t lo = 0, hi = bounds.size() - 1;  // largest index with prefix <= target
  if (prefix(bounds[hi]) <= target) return hi;
  while (hi - lo > 1) {
    const std::size_t mid = lo + (hi - lo) / 2;
    (prefix(bounds[mid]) <= target ? lo : hi) = mid;
  }
  return std::abs(prefix(bounds[lo + 1]) - target) < std::abs(prefix(bounds[lo]) - target) ? lo + 1 : lo;
}

struct Essay {
  std::vector<std::string> words;
  std::vector<char> sentence_start;  ///< word i starts a sentence
  std::vector<std::size_t> starts;   ///< indices of sentence starts
};

Essay read_essay(const std::string& data_dir) {
  Essay e{read_essay_words(data_dir), {}, {}};
  if (e.words.size() < 100)
    throw Error(fmt::format("{}/needle_haystack/PaulGrahamEssays: the essays hold only {} words", data_dir,
                            e.words.size()));
  e.starts = sentence_starts(e.words);
  e.sentence_start.assign(e.words.size(), 0);
  for (std::size_t i : e.starts)
    if (i > 0) e.sentence_start[i] = 1;
  return e;
}

/// Fills a prompt around a haystack of m units (largest fitting L) with needles at target depths
/// (in haystack tokens). `make(m, ins)` returns the prompt for m units and the needle insertions.
/// Returns {m, insertions, achieved depths of each needle}.
struct Placed {
  int m = 0;
  std::vector<std::pair<int, std::string>> ins;
  std::vector<double> depths;  ///< per needle, in the order given
};

Placed place_needles(const Ruler& r, const Haystack& h, const std::vector<std::string>& needles,
                     const std::vector<double>& targets, int limit,
                     const std::function<std::string(const std::string&)>& prompt_of) {
  // Insertions for m units: needle j at boundary index nearest targets[j] in units (approx) or in
  // tokens (exact).
  auto sorted_ins = [&](const std::vector<int>& b) {
    std::vector<std::pair<int, std::string>> ins;
    std::vector<std::size_t> order(needles.size());
    for (std::size_t j = 0; j < order.size(); ++j) order[j] = j;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t c) { return b[a] < b[c]; });
    for (std::size_t j : order) ins.emplace_back(b[j], needles[j]);
    return ins;
  };
  auto approx = [&](int m) {
    const std::vector<int> bounds = h.boundaries(m);
    std::vector<int> b;
    for (double t : targets) {
      const double want = t * m;
      int best = bounds[0];
      for (int x : bounds)
        if (std::abs(x - want) < std::abs(best - want)) best = x;
      b.push_back(best);
    }
    return sorted_ins(b);
  };
  std::function<int(int)> count = [&](int m) { return r.prompt_tokens(prompt_of(h.build(m, approx(m)))); };
  const int base = r.prompt_tokens(prompt_of(h.build(0, approx(0))));
  const double per_unit = std::max(1.0, static_cast<double>(r.text_tokens(h.build(20, {}))) / 20.0);
  int m = largest_fitting(limit, std::max(1, static_cast<int>((r.L - base) / per_unit)), r.L, count);
  if (m < 1) r.too_small(base);
  for (; m >= 1; --m) {
    const std::vector<int> bounds = h.boundaries(m);
    std::function<int(int)> prefix = [&](int b) { return r.text_tokens(h.build(b, {})); };
    const double total = prefix(m);
    std::vector<int> b;
    Placed p;
    p.m = m;
    for (double t : targets) {
      const int x = bounds[nearest_boundary(bounds, t * total, prefix)];
      b.push_back(x);
      p.depths.push_back(total > 0 ? prefix(x) / total : 0.0);
    }
    p.ins = sorted_ins(b);
    if (r.prompt_tokens(prompt_of(h.build(m, p.ins))) <= r.L) return p;
  }
  r.too_small(base);
}

// ---------------------------------------------------------------------------------------------
// niah

std::vector<TaskItem> make_niah(Ruler& r, const NiahConfig& c) {
  const int max_new = 128;
  std::optional<Essay> essay;
  if (c.haystack == HayKind::essay) essay = read_essay(r.data_dir);
  const bool single = c.num_q * c.num_v == 1;
  const std::string V = c.value == Kind::numbers ? "numbers" : c.value == Kind::uuids ? "uuids" : "words";
  const std::string Vq = single ? V.substr(0, V.size() - 1) : V;
  const std::string preamble =
      single ? fmt::format("A special magic {} is hidden within the following text. Make sure to memorize it. I will "
                           "quiz you about the {} afterwards.\n",
                           Vq, Vq)
             : fmt::format("Some special magic {} are hidden within the following text. Make sure to memorize it. I "
                           "will quiz you about the {} afterwards.\n",
                           Vq, Vq);
  auto needle_text = [&](const std::string& key, const std::string& value) {
    return fmt::format("One of the special magic {} for {} is: {}.", V, key, value);
  };
  // RULER's 40 depths: round(linspace(0, 100, 40)) percent.
  std::vector<double> grid;
  for (int i = 0; i < 40; ++i) grid.push_back(std::round(100.0 * i / 39.0) / 100.0);

  const int num_k = std::max(c.num_k, c.num_q);
  std::vector<TaskItem> items;
  for (int i = 0; i < r.opts.n; ++i) {
    bool made = false;
    for (int attempt = 0; attempt < kMaxRulerAttempts && !made; ++attempt) {
      // Keys and values, all distinct.
      std::set<std::string> used;
      auto fresh = [&](Kind k) {
        for (;;) {
          std::string s = random_of(k, r.rng);
          if (used.insert(s).second) return s;
        }
      };
      std::vector<std::string> keys;
      std::vector<std::vector<std::string>> values;
      for (int k = 0; k < num_k; ++k) {
        keys.push_back(fresh(c.key));
        values.emplace_back();
        for (int v = 0; v < c.num_v; ++v) values.back().push_back(fresh(c.value));
      }
      // Queried keys: num_q distinct of them; references: their values in that order.
      std::vector<int> kidx(num_k);
      for (int k = 0; k < num_k; ++k) kidx[k] = k;
      shuffle(kidx, r.rng);
      kidx.resize(c.num_q);
      std::vector<std::string> queries, refs;
      for (int k : kidx) {
        queries.push_back(keys[k]);
        for (const std::string& v : values[k]) refs.push_back(v);
      }
      std::string query = queries.back();
      if (queries.size() > 1) {
        std::vector<std::string> head(queries.begin(), queries.end() - 1);
        query = join(head, ", ") + ", and " + queries.back();
      }
      // Needles: the first value of the first queried key at the item's depth, the others at
      // distinct grid depths.
      std::vector<std::string> needles;
      std::vector<double> targets;
      needles.push_back(needle_text(keys[kidx[0]], values[kidx[0]][0]));
      targets.push_back(r.depth_of(i));
      std::vector<double> g = grid;
      shuffle(g, r.rng);
      std::size_t gi = 0;
      for (int k = 0; k < num_k; ++k)
        for (int v = 0; v < c.num_v; ++v) {
          if (k == kidx[0] && v == 0) continue;
          needles.push_back(needle_text(keys[k], values[k][v]));
          targets.push_back(g[gi++]);
        }
      const std::string question =
          single ? fmt::format("\nWhat is the special magic {} for {} mentioned in the provided text? The special "
                               "magic {} for {} mentioned in the provided text is",
                               Vq, query, Vq, query)
                 : fmt::format("\nWhat are all the special magic {} for {} mentioned in the provided text? The "
                               "special magic {} for {} mentioned in the provided text are",
                               Vq, query, Vq, query);

      // Haystack.
      Haystack h;
      std::vector<std::string> distractors;
      SplitMix64 drng(r.rng.next());
      std::size_t start = 0;
      int limit = 1 << 20;
      const std::string noise = kNoise;
      if (c.haystack == HayKind::essay) {
        const Essay& e = *essay;
        start = e.starts[r.rng.below(e.starts.size())];
        h.sep = " ";
        h.unit = [&e, start](int u) -> const std::string& { return e.words[(start + u) % e.words.size()]; };
        h.open = [&e, start](int b) { return e.sentence_start[(start + b) % e.words.size()] != 0; };
        limit = static_cast<int>(e.words.size());
      } else if (c.haystack == HayKind::noise) {
        h.sep = "\n";
        h.unit = [&noise](int) -> const std::string& { return noise; };
      } else {
        h.sep = "\n";
        h.unit = [&](int u) -> const std::string& {
          while (static_cast<int>(distractors.size()) <= u)
            distractors.push_back(needle_text(fresh(c.key), fresh(c.value)));
          return distractors[u];
        };
      }
      const Placed p = place_needles(r, h, needles, targets, limit, [&](const std::string& hay) {
        return preamble + hay + question;
      });
      TaskItem item = r.recall_item(i, preamble + h.build(p.m, p.ins), question, refs, max_new,
                                    c.haystack == HayKind::essay
                                        ? fmt::format("needle_haystack/PaulGrahamEssays (word {})", start)
                                        : fmt::format("RULER {} (synthetic)", r.task.substr(6)));
      // Every value exactly once (a number could also occur in an essay).
      bool ok = true;
      for (const auto& vs : values)
        for (const std::string& v : vs) ok = ok && count_occurrences(item.prompt, v) == 1;
      if (!ok) continue;
      item.depth = std::clamp(p.depths[0], 0.0, 1.0);
      items.push_back(std::move(item));
      made = true;
    }
    if (!made) throw Error(fmt::format("{}: could not make item {} with every needle value once", r.task, i));
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// vt

std::string upper_name(int len, SplitMix64& rng) {
  std::string s;
  for (int i = 0; i < len; ++i) s += static_cast<char>('A' + rng.below(26));
  return s;
}

std::vector<TaskItem> make_vt(Ruler& r) {
  const int max_new = 30, hops = 4, example_budget = 500;
  const std::string noise = kNoise;
  Haystack h;
  h.sep = "\n";
  h.unit = [&noise](int) -> const std::string& { return noise; };

  // One chain: names (distinct, `len` letters), value, lines.
  struct Chain {
    std::vector<std::string> vars, lines;
    std::string value;
  };
  auto make_chain = [&](int len, const std::string& avoid_value) {
    Chain ch;
    std::set<std::string> seen;
    while (static_cast<int>(ch.vars.size()) < hops + 1) {
      std::string v = upper_name(len, r.rng);
      if (seen.insert(v).second) ch.vars.push_back(v);
    }
    do ch.value = std::to_string(10000 + r.rng.below(90000));
    while (ch.value == avoid_value);
    ch.lines.push_back(fmt::format("VAR {} = {}", ch.vars[0], ch.value));
    for (int j = 0; j < hops; ++j) ch.lines.push_back(fmt::format("VAR {} = VAR {} ", ch.vars[j + 1], ch.vars[j]));
    return ch;
  };
  auto question_of = [&](const std::string& value) {
    return fmt::format("\nQuestion: Find all variables that are assigned the value {} in the text above. Answer: "
                       "According to the chain(s) of variable assignment in the text above, {} variables are "
                       "assigned the value {}, they are: ",
                       value, hops + 1, value);
  };
  // Chain lines at sorted distinct random boundaries 0..m: positions as fractions of m.
  auto chain_ins = [&](const Chain& ch, int m, const std::vector<double>& fr) {
    std::vector<std::pair<int, std::string>> ins;
    std::vector<int> pos;
    for (double f : fr) pos.push_back(static_cast<int>(std::floor(f * (m + 1))));
    std::sort(pos.begin(), pos.end());
    for (std::size_t j = 0; j < pos.size(); ++j) ins.emplace_back(std::min(pos[j], m), ch.lines[j]);
    return ins;
  };
  auto random_fractions = [&] {
    std::vector<double> fr;
    for (int j = 0; j <= hops; ++j) fr.push_back(static_cast<double>(r.rng.below(1u << 30)) / (1u << 30));
    std::sort(fr.begin(), fr.end());
    return fr;
  };

  std::vector<TaskItem> items;
  for (int i = 0; i < r.opts.n; ++i) {
    // The one-shot example: 3-letter names, noise up to 500 tokens.
    const Chain ex = make_chain(3, "");
    const std::vector<double> ex_fr = random_fractions();
    auto example_input = [&](int m) {
      return kVtTemplate + h.build(m, chain_ins(ex, m, ex_fr)) + question_of(ex.value);
    };
    const int ex_m = largest_fitting(1 << 16, 20, example_budget, [&](int m) { return r.text_tokens(example_input(m)); });
    const std::string example = example_input(std::max(ex_m, 1)) + " " + join(ex.vars, " ") + "\n";

    const Chain ch = make_chain(5, ex.value);
    const std::vector<double> fr = random_fractions();
    const std::string question = question_of(ch.value);
    auto context_of = [&](int m) { return example + "\n" + kVtTemplate + h.build(m, chain_ins(ch, m, fr)); };
    std::function<int(int)> count = [&](int m) { return r.prompt_tokens(context_of(m) + question); };
    const int base = count(0);
    const int m = largest_fitting(1 << 20, (r.L - base) / 20, r.L, count);
    if (m < 1) r.too_small(base);
    TaskItem item = r.recall_item(i, context_of(m), question, ch.vars, max_new, "RULER vt (synthetic)");
    const int first = chain_ins(ch, m, fr)[0].first;
    const double total = r.text_tokens(h.build(m, {}));
    item.depth = total > 0 ? std::clamp(r.text_tokens(h.build(first, {})) / total, 0.0, 1.0) : 0.0;
    items.push_back(std::move(item));
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// cwe

std::string numbered(const std::vector<std::string>& words) {
  std::string out;
  for (std::size_t i = 0; i < words.size(); ++i) out += fmt::format("{}{}. {}", i ? " " : "", i + 1, words[i]);
  return out;
}

std::vector<TaskItem> make_cwe(Ruler& r) {
  const int max_new = 120, num_cw = 10;
  const bool long_ctx = r.L >= 4096;
  const int rep_c = long_ctx ? 30 : 6, rep_u = long_ctx ? 3 : 1;
  const int ex_words = long_ctx ? 40 : 20, ex_rep_c = long_ctx ? 10 : 3, ex_rep_u = long_ctx ? 3 : 1;
  const std::vector<std::string>& pool_all = cwe_pool();
  const int pool_n = static_cast<int>(pool_all.size());

  // The list of `common` x rc and `uncommon` x ru, shuffled by a generator seeded with `seed`.
  auto word_list_of = [](const std::vector<std::string>& common, const std::vector<std::string>& uncommon, int rc,
                         int ru, uint64_t seed) {
    std::vector<std::string> list;
    for (int k = 0; k < rc; ++k) list.insert(list.end(), common.begin(), common.end());
    for (int k = 0; k < ru; ++k) list.insert(list.end(), uncommon.begin(), uncommon.end());
    SplitMix64 s(seed);
    shuffle(list, s);
    return list;
  };
  std::vector<TaskItem> items;
  for (int i = 0; i < r.opts.n; ++i) {
    std::vector<std::string> pool = pool_all;
    shuffle(pool, r.rng);
    // The example's words from the end of the pool, the item's from the start (never shared).
    const std::vector<std::string> ex_common(pool.end() - ex_words, pool.end() - ex_words + num_cw);
    const std::vector<std::string> ex_uncommon(pool.end() - ex_words + num_cw, pool.end());
    const std::string example = kCweTemplate + numbered(word_list_of(ex_common, ex_uncommon, ex_rep_c, ex_rep_u, r.rng.next())) +
                                kCweQuestion + " " + numbered(ex_common);
    const std::vector<std::string> common(pool.begin(), pool.begin() + num_cw);
    const uint64_t list_seed = r.rng.next();
    auto context_of = [&](int num_words) {
      const std::vector<std::string> uncommon(pool.begin() + num_cw, pool.begin() + num_words);
      return example + "\n" + kCweTemplate + numbered(word_list_of(common, uncommon, rep_c, rep_u, list_seed));
    };
    std::function<int(int)> count = [&](int extra) { return r.prompt_tokens(context_of(num_cw + extra) + kCweQuestion); };
    const int base = count(0);
    if (base > r.L) r.too_small(base);
    const int extra = largest_fitting(pool_n - ex_words - num_cw, 64, r.L, count);
    items.push_back(r.recall_item(i, context_of(num_cw + extra), kCweQuestion, common, max_new,
                                  "RULER cwe (synthetic, wonderwords lists)"));
  }
  return items;
}

// ---------------------------------------------------------------------------------------------
// fwe

std::vector<TaskItem> make_fwe(Ruler& r) {
  const int max_new = 50, word_len = 6;
  const double alpha = 2.0, zeta2 = std::numbers::pi * std::numbers::pi / 6.0;
  const int vocab_size = std::max(5, r.L / 50);
  std::vector<TaskItem> items;
  for (int i = 0; i < r.opts.n; ++i) {
    std::set<std::string> seen;
    std::vector<std::string> vocab;
    while (static_cast<int>(vocab.size()) < vocab_size) {
      std::string w;
      for (int k = 0; k < word_len; ++k) w += static_cast<char>('a' + r.rng.below(26));
      if (seen.insert(w).second) vocab.push_back(w);
    }
    vocab[0] = "...";  // the most frequent "word" is noise
    const uint64_t text_seed = r.rng.next();
    auto counts_of = [&](int num_words) {
      std::vector<int> c;
      for (int k = 1; k <= vocab_size; ++k)
        c.push_back(static_cast<int>(num_words * std::pow(static_cast<double>(k), -alpha) / zeta2));
      return c;
    };
    auto context_of = [&](int num_words) {
      const std::vector<int> c = counts_of(num_words);
      std::vector<std::string> words;
      for (int k = 0; k < vocab_size; ++k) words.insert(words.end(), c[k], vocab[k]);
      SplitMix64 s(text_seed);
      shuffle(words, s);
      return kFweTemplate + join(words, " ");
    };
    std::function<int(int)> count = [&](int num_words) { return r.prompt_tokens(context_of(num_words) + kFweQuestion); };
    // From n_min words on, the 4th word (the 3rd answer) is strictly more frequent than the 5th.
    const int n_min = static_cast<int>(std::ceil(zeta2 / (std::pow(4.0, -alpha) - std::pow(5.0, -alpha))));
    if (count(n_min) > r.L) r.too_small(count(n_min));
    const int num_words = std::max(n_min, largest_fitting(1 << 22, r.L / 2, r.L, count));
    const std::vector<int> c = counts_of(num_words);
    if (c[3] <= c[4]) throw Error(fmt::format("{}: tied word counts for {} words", r.task, num_words));
    items.push_back(r.recall_item(i, context_of(num_words), kFweQuestion, {vocab[1], vocab[2], vocab[3]}, max_new,
                                  "RULER fwe (synthetic)"));
  }
  return items;
}

int max_new_tokens_of(const std::string& task) {
  if (task == "ruler_vt") return 30;
  if (task == "ruler_cwe") return 120;
  if (task == "ruler_fwe") return 50;
  return 128;
}

}  // namespace

const std::vector<std::string>& ruler_task_names() {
  static const std::vector<std::string> names = {
      "ruler_niah_single_1",   "ruler_niah_single_2",   "ruler_niah_single_3", "ruler_niah_multikey_1",
      "ruler_niah_multikey_2", "ruler_niah_multikey_3", "ruler_niah_multivalue", "ruler_niah_multiquery",
      "ruler_vt",              "ruler_cwe",             "ruler_fwe"};
  return names;
}

bool is_ruler_task(const std::string& family) {
  const auto& n = ruler_task_names();
  return std::find(n.begin(), n.end(), family) != n.end();
}

std::vector<TaskItem> generate_ruler_tasks(const std::string& family, const std::string& data_dir,
                                           const Tokenizer& tokenizer, const TaskGenOptions& opts) {
  if (!is_ruler_task(family))
    throw Error(fmt::format("--family \"{}\": unknown RULER task (expected one of: {})", family,
                            fmt::join(ruler_task_names(), ", ")));
  if (opts.n < 1) throw Error(fmt::format("--n {}: must be at least 1", opts.n));
  if (opts.context_tokens < 0) throw Error(fmt::format("--context-tokens {}: must be >= 0", opts.context_tokens));
  if (opts.depth > 1 || std::isnan(opts.depth))
    throw Error(fmt::format("--depth {}: must be in [0, 1] (or negative to spread over items)", opts.depth));
  if (!opts.variant.empty()) throw Error(fmt::format("--variant \"{}\": {} takes no variant", opts.variant, family));
  if (opts.max_prompt_tokens < 0)
    throw Error(fmt::format("--max-prompt-tokens {}: must be >= 0", opts.max_prompt_tokens));
  const int L = opts.context_tokens > 0 ? opts.context_tokens : kRulerDefaultContextTokens;
  const int max_new = max_new_tokens_of(family);
  if (opts.max_prompt_tokens > 0 && L + max_new > opts.max_prompt_tokens)
    throw Error(fmt::format("{}: --context-tokens {} plus {} answer tokens exceeds the prompt limit of {} tokens",
                            family, L, max_new, opts.max_prompt_tokens));
  if (!fs::is_directory(data_dir))
    throw Error(fmt::format("{}: data folder not found (set --data-dir or KVC_SHARED)", data_dir));
  Ruler r{family, data_dir, tokenizer, opts, L, SplitMix64(opts.seed ^ fnv1a(family))};
  if (const NiahConfig* c = niah_config(family)) return make_niah(r, *c);
  if (family == "ruler_vt") return make_vt(r);
  if (family == "ruler_cwe") return make_cwe(r);
  return make_fwe(r);
}

}  // namespace kvcompact
