// tokenizer.json pipeline; see hf_tokenizer.h. Behaviour follows the Hugging Face tokenizers
// library (Rust; tokenizers/src/tokenizer/added_vocabulary.rs, normalizer.rs, pre_tokenizers/,
// models/bpe/), the reference the tests compare against (tests/ref/hf_tokenize.py).
#include "io/hf_tokenizer.h"
#include "io/json_number.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "io/bpe_tokenizer.h"
#include "core/error.h"
#include "io/unicode_nfc.h"
#include "io/unicode_regex.h"
#include "core/utf8.h"

namespace kvcompact {
namespace {

using json = nlohmann::json;

const std::string kMetaspace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

json read_json(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", path));
  std::ostringstream ss;
  ss << in.rdbuf();
  try {
    return json::parse(ss.str());
  } catch (const json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
}

/// The string of a tokenizer_config.json token entry: "..." or {"content": "..."}; "" if absent.
std::string config_token(const json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const json& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

bool get_bool(const json& j, const char* key, bool dflt) {
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? dflt : it->get<bool>();
}

std::string get_string(const json& j, const char* key, const std::string& dflt) {
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? dflt : it->get<std::string>();
}

/// The pattern text as a regex that matches it literally (the library's regex::escape for a
/// Split pattern given as a String).
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) out += '\\';
    out += c;
  }
  return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  if (from.empty()) return s;
  std::string out;
  std::size_t pos = 0;
  for (std::size_t f; (f = s.find(from, pos)) != std::string::npos; pos = f + from.size()) {
    out.append(s, pos, f - pos);
    out += to;
  }
  out.append(s, pos);
  return out;
}

/// Byte length of the white space (Unicode White_Space) run at the start of s.
std::size_t leading_space(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    if (!utf8::is_white_space(utf8::next(s, j))) break;
    i = j;
  }
  return i;
}

/// Start of the white space run at the end of s (s.size() when there is none).
std::size_t trailing_space_start(std::string_view s) {
  std::size_t start = 0, i = 0;
  while (i < s.size()) {
    const std::uint32_t c = utf8::next(s, i);
    if (!utf8::is_white_space(c)) start = i;
  }
  return start;
}

/// The code point that ends s / starts s (0xFFFFFFFF for an empty string).
std::uint32_t last_char(std::string_view s) {
  std::size_t i = s.size();
  while (i > 0 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i;
  if (i > 0) --i;
  std::size_t j = i;
  return s.empty() ? 0xFFFFFFFFu : utf8::next(s, j);
}
std::uint32_t first_char(std::string_view s) {
  std::size_t i = 0;
  return s.empty() ? 0xFFFFFFFFu : utf8::next(s, i);
}

struct AddedToken {
  std::string content;
  int id = 0;
  bool special = false, lstrip = false, rstrip = false, normalized = true, single_word = false;
  bool operator==(const AddedToken& o) const {
    return content == o.content && special == o.special && lstrip == o.lstrip && rstrip == o.rstrip &&
           normalized == o.normalized && single_word == o.single_word;
  }
};

/// Leftmost-longest matcher over a set of added-token patterns (the library builds a
/// daachorse Aho-Corasick automaton with MatchKind::LeftmostLongest).
class AddedMatcher {
 public:
  void add(const std::string& pattern, int index) {
    if (pattern.empty()) return;
    by_first_[static_cast<unsigned char>(pattern[0])].push_back({pattern, index});
  }
  void finish() {
    for (auto& v : by_first_) {
      std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    }
  }
  /// The leftmost match at or after `from`, the longest there: {begin, end, index}; index -1 when none.
  std::tuple<std::size_t, std::size_t, int> next(std::string_view text, std::size_t from) const {
    for (std::size_t i = from; i < text.size(); ++i) {
      for (const auto& [c, idx] : by_first_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, c.size(), c) == 0) return {i, i + c.size(), idx};
      }
    }
    return {text.size(), text.size(), -1};
  }

 private:
  std::array<std::vector<std::pair<std::string, int>>, 256> by_first_;
};

/// A slice [begin, end) of a string; `added` is the added token it is, or -1 for plain text.
struct Span {
  std::size_t begin, end;
  int added;
};

/// The library's AddedVocabulary::find_matches: the added tokens found in `sentence` and the text
/// between them, covering it. A `single_word` match next to a word character (\w) on either side
/// is skipped; `lstrip` / `rstrip` make the white space before / after a match part of it (never
/// reaching back into the previous match).
std::vector<Span> find_added(std::string_view sentence, const AddedMatcher& matcher,
                             const std::vector<AddedToken>& added) {
  std::vector<Span> out;
  std::size_t start_offset = 0;
  for (std::size_t from = 0;;) {
    auto [mb, me, idx] = matcher.next(sentence, from);
    if (idx < 0) break;
    from = me;  // the automaton resumes after the match, whatever is done with it
    const AddedToken& t = added[static_cast<std::size_t>(idx)];
    std::size_t start = mb, stop = me;
    if (t.single_word) {
      const bool start_space = start == 0 || !is_word_char(last_char(sentence.substr(0, start)));
      const bool stop_space = stop == sentence.size() || !is_word_char(first_char(sentence.substr(stop)));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) start = std::max(trailing_space_start(sentence.substr(0, start)), start_offset);
    if (t.rstrip) stop += leading_space(sentence.substr(stop));
    start = std::max(start, start_offset);  // only reachable after an rstrip token: no text overlaps
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, idx});
    start_offset = stop;
  }
  if (start_offset < sentence.size()) out.push_back({start_offset, sentence.size(), -1});
  return out;
}

struct NormStep {
  enum Kind { kNfc, kPrepend, kReplaceString, kReplaceRegex } kind;
  std::string a, b;  // prepend text; replace pattern string / content
  std::shared_ptr<UnicodeRegex> regex;
};

/// SplitDelimiterBehavior of the library.
enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

/// A piece of text during pre-tokenization; at_start: it begins at offset 0 of the original text
/// (the library's `offsets_original().0 == 0`, which Metaspace's prepend_scheme "first" tests).
struct Piece {
  std::string text;
  bool at_start = false;
};

/// NormalizedString::split of the library: `matches` (ascending, non-overlapping) and the text
/// between them, with `invert` swapping the two, combined by `behavior`; empty pieces dropped.
void split_piece(const Piece& p, const std::vector<std::pair<std::size_t, std::size_t>>& matches,
                 SplitBehavior behavior, bool invert, std::vector<Piece>& out) {
  struct Seg {
    std::size_t b, e;
    bool match;
  };
  std::vector<Seg> segs;
  std::size_t prev = 0;
  for (auto [b, e] : matches) {
    if (prev != b) segs.push_back({prev, b, invert});
    segs.push_back({b, e, !invert});
    prev = e;
  }
  if (prev != p.text.size()) segs.push_back({prev, p.text.size(), invert});
  std::vector<Seg> kept;  // `match` now means: remove
  switch (behavior) {
    case SplitBehavior::kIsolated:
      for (Seg s : segs) kept.push_back({s.b, s.e, false});
      break;
    case SplitBehavior::kRemoved:
      kept = segs;
      break;
    case SplitBehavior::kContiguous: {
      bool previous = false;
      for (const Seg& s : segs) {
        if (s.match == previous && !kept.empty()) kept.back().e = s.e;
        else kept.push_back({s.b, s.e, false});
        previous = s.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithPrevious: {
      bool previous = false;
      for (const Seg& s : segs) {
        if (s.match && !previous && !kept.empty()) kept.back().e = s.e;
        else kept.push_back({s.b, s.e, false});
        previous = s.match;
      }
      break;
    }
    case SplitBehavior::kMergedWithNext: {
      bool previous = false;
      for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
        if (it->match && !previous && !kept.empty()) kept.back().b = it->b;
        else kept.push_back({it->b, it->e, false});
        previous = it->match;
      }
      std::reverse(kept.begin(), kept.end());
      break;
    }
  }
  for (const Seg& s : kept) {
    if (s.match || s.e <= s.b) continue;
    out.push_back({p.text.substr(s.b, s.e - s.b), p.at_start && s.b == 0});
  }
}

struct PreStep {
  enum Kind { kSplit, kByteLevel, kMetaspace } kind = kSplit;
  std::shared_ptr<UnicodeRegex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;  // Split
  bool invert = false;                                // Split
  bool add_prefix_space = false;                      // ByteLevel
  bool use_regex = true;                              // ByteLevel
  std::string replacement;                            // Metaspace
  std::string prepend_scheme;                         // Metaspace: always / first / never
  bool split = true;                                  // Metaspace
};

/// Metaspace's settings as the library reads them (pre-tokenizer and decoder alike):
/// `replacement` (required, one character), `prepend_scheme` (default "always"), legacy
/// `add_prefix_space` (false requires prepend_scheme "never"), `split` (default true).
void read_metaspace(const json& p, PreStep& st, const std::function<Error(const std::string&)>& fail) {
  if (!p.contains("replacement") || !p["replacement"].is_string()) throw fail("Metaspace: missing field `replacement`");
  st.replacement = p["replacement"].get<std::string>();
  std::size_t i = 0;
  if (st.replacement.empty() || (utf8::next(st.replacement, i), i != st.replacement.size())) {
    throw fail(fmt::format("Metaspace: replacement '{}' is not one character", st.replacement));
  }
  st.prepend_scheme = get_string(p, "prepend_scheme", "always");
  if (st.prepend_scheme != "always" && st.prepend_scheme != "first" && st.prepend_scheme != "never") {
    throw fail(fmt::format("Metaspace: unknown prepend_scheme '{}' (always, first, never)", st.prepend_scheme));
  }
  if (p.contains("add_prefix_space") && p["add_prefix_space"].is_boolean() && !p["add_prefix_space"].get<bool>()) {
    if (st.prepend_scheme != "never") throw fail("Metaspace: add_prefix_space does not match declared prepend_scheme");
  }
  st.split = get_bool(p, "split", true);
}

enum class DecoderKind { kByteLevel, kSentencePiece, kPlain };

}  // namespace

struct HfTokenizer::Impl {
  std::string path;
  std::unique_ptr<BpeModel> model;
  std::vector<std::string> pieces;  // id -> piece
  std::vector<AddedToken> added;    // by index; ids as the library assigns them
  std::unordered_map<std::string, int> added_by_content;  // content -> index in added
  std::unordered_map<int, int> added_by_id;               // id -> index in added
  AddedMatcher raw_matcher, normalized_matcher;
  std::vector<NormStep> norm;
  bool has_normalizer = false;
  std::vector<PreStep> pre;
  // post-processor: single template; an empty item is "$A", else a special token's ids
  std::vector<std::vector<int>> template_single;
  bool has_template = false;
  DecoderKind decoder = DecoderKind::kPlain;
  bool strip_first_space = false;       // Sequence decoder with Strip(' ', 1, 0)
  bool metaspace_drop_first = false;    // Metaspace decoder: prepend_scheme != never
  std::string metaspace_replacement = kMetaspace;
  int bos = -1, eos = -1;
  std::vector<int> bos_prefix;  // what encode(text, true) puts in front

  std::string normalize(std::string s) const {
    for (const NormStep& st : norm) {
      switch (st.kind) {
        case NormStep::kNfc: s = nfc_normalize(s); break;
        case NormStep::kPrepend:
          if (!s.empty()) s = st.a + s;
          break;
        case NormStep::kReplaceString: s = replace_all(std::move(s), st.a, st.b); break;
        case NormStep::kReplaceRegex: {
          std::string out;
          std::size_t pos = 0;
          for (auto [b, e] : st.regex->find_all(s)) {
            out.append(s, pos, b - pos);
            out += st.b;
            pos = e;
          }
          out.append(s, pos);
          s = std::move(out);
          break;
        }
      }
    }
    return s;
  }

  std::vector<Piece> pre_tokenize(Piece piece) const {
    std::vector<Piece> parts{std::move(piece)};
    for (const PreStep& st : pre) {
      std::vector<Piece> next;
      for (Piece& p : parts) {
        switch (st.kind) {
          case PreStep::kSplit:
            split_piece(p, st.regex->find_all(p.text), st.behavior, st.invert, next);
            break;
          case PreStep::kByteLevel: {
            Piece q = p;
            if (st.add_prefix_space && (q.text.empty() || q.text[0] != ' ')) q.text = " " + q.text;
            static const UnicodeRegex gpt2(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel");
            std::vector<Piece> words;
            if (st.use_regex) split_piece(q, gpt2.find_all(q.text), SplitBehavior::kIsolated, false, words);
            else if (!q.text.empty()) words.push_back(q);
            for (Piece& w : words) {
              std::string b;
              append_byte_level(b, w.text);
              next.push_back({std::move(b), w.at_start});
            }
            break;
          }
          case PreStep::kMetaspace: {
            std::string s = replace_all(p.text, " ", st.replacement);
            const bool prepend = st.prepend_scheme == "always" || (st.prepend_scheme == "first" && p.at_start);
            if (prepend && s.compare(0, st.replacement.size(), st.replacement) != 0) s = st.replacement + s;
            Piece q{std::move(s), p.at_start};
            if (!st.split) {
              next.push_back(std::move(q));
              break;
            }
            std::vector<std::pair<std::size_t, std::size_t>> hits;
            for (std::size_t f = 0; (f = q.text.find(st.replacement, f)) != std::string::npos; f += st.replacement.size()) {
              hits.emplace_back(f, f + st.replacement.size());
            }
            split_piece(q, hits, SplitBehavior::kMergedWithNext, false, next);
            break;
          }
        }
      }
      parts = std::move(next);
    }
    return parts;
  }

  std::vector<int> encode_text(std::string_view text_view) const {
    std::vector<int> ids;
    const std::string text = utf8::to_valid(text_view);
    for (const Span& s1 : find_added(text, raw_matcher, added)) {
      if (s1.added >= 0) {
        ids.push_back(added[static_cast<std::size_t>(s1.added)].id);
        continue;
      }
      if (s1.end <= s1.begin) continue;
      const std::string normalized = normalize(text.substr(s1.begin, s1.end - s1.begin));
      for (const Span& s2 : find_added(normalized, normalized_matcher, added)) {
        if (s2.added >= 0) {
          ids.push_back(added[static_cast<std::size_t>(s2.added)].id);
          continue;
        }
        if (s2.end <= s2.begin) continue;
        Piece p{normalized.substr(s2.begin, s2.end - s2.begin), s1.begin == 0 && s2.begin == 0};
        for (const Piece& w : pre_tokenize(std::move(p))) model->encode_word(w.text, ids);
      }
    }
    return ids;
  }

  int token_id(std::string_view t) const {
    auto it = added_by_content.find(std::string(t));
    if (it != added_by_content.end()) return added[static_cast<std::size_t>(it->second)].id;
    return model->token_id(t);
  }
};

HfTokenizer::~HfTokenizer() = default;

HfTokenizer::HfTokenizer(const std::string& path, const std::string& config_path)
    : HfTokenizer(read_json(path), path, config_path) {}

HfTokenizer::HfTokenizer(const nlohmann::json& j, const std::string& path, const std::string& config_path)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  auto fail = [&](const std::string& what) -> Error { return Error(fmt::format("{}: {}", path, what)); };
  try {
    // ---- model ----
    if (!j.contains("model") || !j["model"].is_object()) throw fail("no \"model\" object");
    const json& mj = j["model"];
    const std::string type = get_string(mj, "type", "");
    if (type != "BPE") {
      throw fail(fmt::format("unsupported tokenizer model type '{}' (supported: BPE)", type.empty() ? "(none)" : type));
    }
    if (!mj.contains("vocab") || !mj["vocab"].is_object()) throw fail("model.vocab is not an object");
    if (get_string(mj, "continuing_subword_prefix", "") != "" || get_string(mj, "end_of_word_suffix", "") != "") {
      throw fail("BPE continuing_subword_prefix / end_of_word_suffix are not supported");
    }
    if (mj.contains("dropout") && !mj["dropout"].is_null() && mj["dropout"].get<double>() != 0.0) {
      throw fail("BPE dropout is not supported");
    }
    std::unordered_map<std::string, int> vocab;
    vocab.reserve(mj["vocab"].size() * 2);
    int max_id = -1;
    for (auto it = mj["vocab"].begin(); it != mj["vocab"].end(); ++it) {
      const auto parsed = json_int(it.value());
      if (!parsed) throw fail(fmt::format("model.vocab: id {} for '{}' is not an int32 integer", it.value().dump(), it.key()));
      const int id = *parsed;
      if (id < 0) throw fail(fmt::format("model.vocab: negative id {} for '{}'", id, it.key()));
      vocab.emplace(it.key(), id);
      max_id = std::max(max_id, id);
    }
    std::vector<std::pair<std::string, std::string>> merges;
    if (mj.contains("merges")) {
      const json& mm = mj["merges"];
      merges.reserve(mm.size());
      for (std::size_t r = 0; r < mm.size(); ++r) {
        const json& e = mm[r];
        if (e.is_string()) {
          const std::string s = e.get<std::string>();
          const std::size_t sp = s.find(' ');
          if (sp == std::string::npos) throw fail(fmt::format("model.merges[{}] '{}' has no space", r, s));
          merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
        } else if (e.is_array() && e.size() == 2) {
          merges.emplace_back(e[0].get<std::string>(), e[1].get<std::string>());
        } else {
          throw fail(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", r));
        }
      }
    }
    BpeModel::Options opt;
    opt.byte_fallback = get_bool(mj, "byte_fallback", false);
    opt.fuse_unk = get_bool(mj, "fuse_unk", false);
    opt.ignore_merges = get_bool(mj, "ignore_merges", false);
    opt.unk_token = get_string(mj, "unk_token", "");
    m.pieces.assign(static_cast<std::size_t>(max_id + 1), std::string());
    for (const auto& [tok, id] : vocab) m.pieces[static_cast<std::size_t>(id)] = tok;
    m.model = std::make_unique<BpeModel>(std::move(vocab), merges, opt, path);

    // ---- added tokens ----
    // As the library's AddedVocabulary::add_tokens: in file order; a content already in the
    // model vocabulary (or added before) keeps that id, a new one gets the next id after the
    // model vocabulary; the file's "id" is not used (the library only warns when it differs).
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      int next_id = static_cast<int>(m.model->size());
      for (const json& a : j["added_tokens"]) {
        AddedToken t;
        t.content = a.at("content").get<std::string>();
        t.special = get_bool(a, "special", false);
        t.lstrip = get_bool(a, "lstrip", false);
        t.rstrip = get_bool(a, "rstrip", false);
        t.single_word = get_bool(a, "single_word", false);
        t.normalized = get_bool(a, "normalized", !t.special);
        if (t.content.empty()) continue;
        auto known = m.added_by_content.find(t.content);
        if (known != m.added_by_content.end()) {
          AddedToken& old = m.added[static_cast<std::size_t>(known->second)];
          t.id = old.id;
          old = t;  // same content again: the later flags replace the earlier ones
          continue;
        }
        const int model_id = m.model->token_id(t.content);
        t.id = model_id >= 0 ? model_id : next_id++;
        m.added_by_content.emplace(t.content, static_cast<int>(m.added.size()));
        m.added.push_back(t);
      }
    }

    // ---- normalizer ----
    std::function<void(const json&)> add_norm = [&](const json& n) {
      if (n.is_null()) return;
      const std::string nt = get_string(n, "type", "");
      if (nt == "Sequence") {
        for (const json& s : n.at("normalizers")) add_norm(s);
      } else if (nt == "NFC") {
        m.norm.push_back({NormStep::kNfc, "", "", nullptr});
      } else if (nt == "Prepend") {
        m.norm.push_back({NormStep::kPrepend, n.at("prepend").get<std::string>(), "", nullptr});
      } else if (nt == "Replace") {
        const json& p = n.at("pattern");
        const std::string content = n.at("content").get<std::string>();
        if (p.contains("String")) {
          m.norm.push_back({NormStep::kReplaceString, p["String"].get<std::string>(), content, nullptr});
        } else if (p.contains("Regex")) {
          m.norm.push_back({NormStep::kReplaceRegex, "", content,
                            std::make_shared<UnicodeRegex>(p["Regex"].get<std::string>(), path)});
        } else {
          throw fail("Replace normalizer pattern is neither String nor Regex");
        }
      } else {
        throw fail(fmt::format("unsupported normalizer type '{}' (supported: NFC, Prepend, Replace, Sequence)", nt));
      }
    };
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      m.has_normalizer = true;
      add_norm(j["normalizer"]);
    }

    // ---- pre-tokenizer ----
    std::function<void(const json&)> add_pre = [&](const json& p) {
      if (p.is_null()) return;
      const std::string pt = get_string(p, "type", "");
      if (pt == "Sequence") {
        for (const json& s : p.at("pretokenizers")) add_pre(s);
      } else if (pt == "Split") {
        PreStep st;
        st.kind = PreStep::kSplit;
        const json& pat = p.at("pattern");
        std::string re;
        if (pat.contains("Regex")) {
          re = pat["Regex"].get<std::string>();
        } else if (pat.contains("String")) {
          // Literal string: quote it.
          re = regex_escape(pat["String"].get<std::string>());
        } else {
          throw fail("Split pre-tokenizer pattern is neither String nor Regex");
        }
        st.regex = std::make_shared<UnicodeRegex>(re, path);
        st.invert = get_bool(p, "invert", false);
        const std::string behavior = get_string(p, "behavior", "");
        if (behavior == "Removed") st.behavior = SplitBehavior::kRemoved;
        else if (behavior == "Isolated") st.behavior = SplitBehavior::kIsolated;
        else if (behavior == "MergedWithPrevious") st.behavior = SplitBehavior::kMergedWithPrevious;
        else if (behavior == "MergedWithNext") st.behavior = SplitBehavior::kMergedWithNext;
        else if (behavior == "Contiguous") st.behavior = SplitBehavior::kContiguous;
        else throw fail(fmt::format("unknown Split behavior '{}'", behavior));
        m.pre.push_back(std::move(st));
      } else if (pt == "ByteLevel") {
        PreStep st;
        st.kind = PreStep::kByteLevel;
        st.add_prefix_space = get_bool(p, "add_prefix_space", false);
        st.use_regex = get_bool(p, "use_regex", true);
        m.pre.push_back(std::move(st));
      } else if (pt == "Metaspace") {
        PreStep st;
        st.kind = PreStep::kMetaspace;
        read_metaspace(p, st, fail);
        m.pre.push_back(std::move(st));
      } else {
        throw fail(fmt::format("unsupported pre-tokenizer type '{}' (supported: Split, ByteLevel, Metaspace, Sequence)", pt));
      }
    };
    if (j.contains("pre_tokenizer")) add_pre(j["pre_tokenizer"]);

    // ---- post-processor ----
    std::function<void(const json&)> add_post = [&](const json& p) {
      if (p.is_null()) return;
      const std::string pt = get_string(p, "type", "");
      if (pt == "Sequence") {
        for (const json& s : p.at("processors")) add_post(s);
      } else if (pt == "ByteLevel") {
        // Offsets only; ids unchanged.
      } else if (pt == "TemplateProcessing") {
        if (m.has_template) throw fail("more than one TemplateProcessing post-processor");
        m.has_template = true;
        const json& specials = p.contains("special_tokens") ? p["special_tokens"] : json::object();
        for (const json& item : p.at("single")) {
          if (item.contains("SpecialToken")) {
            // The ids come from the processor's own special_tokens map, as in the library.
            const std::string tok = item["SpecialToken"].at("id").get<std::string>();
            if (!specials.contains(tok)) throw fail(fmt::format("TemplateProcessing: missing SpecialToken '{}'", tok));
            std::vector<int> ids = json_int_list(specials[tok].at("ids"), path, "post_processor special_tokens." + tok + ".ids");
            if (ids.empty()) throw fail(fmt::format("TemplateProcessing: SpecialToken '{}' has no ids", tok));
            m.template_single.push_back(std::move(ids));
          } else if (item.contains("Sequence")) {
            const std::string seq = item["Sequence"].at("id").get<std::string>();
            if (seq != "A") throw fail("TemplateProcessing single template uses sequence " + seq);
            m.template_single.emplace_back();
          }
        }
      } else {
        throw fail(fmt::format("unsupported post-processor type '{}' (supported: TemplateProcessing, ByteLevel, Sequence)", pt));
      }
    };
    if (j.contains("post_processor")) add_post(j["post_processor"]);

    // ---- decoder ----
    if (j.contains("decoder") && !j["decoder"].is_null()) {
      const json& d = j["decoder"];
      const std::string dt = get_string(d, "type", "");
      if (dt == "ByteLevel") {
        m.decoder = DecoderKind::kByteLevel;
      } else if (dt == "Metaspace") {
        m.decoder = DecoderKind::kSentencePiece;
        PreStep st;
        read_metaspace(d, st, fail);
        m.metaspace_replacement = st.replacement;
        m.metaspace_drop_first = st.prepend_scheme != "never";
      } else if (dt == "Sequence") {
        m.decoder = DecoderKind::kSentencePiece;
        for (const json& s : d.at("decoders")) {
          const std::string st = get_string(s, "type", "");
          if (st == "Replace") {
            const json& p = s.at("pattern");
            if (!p.contains("String") || s.at("content").get<std::string>() != " ") {
              throw fail("decoder Replace other than String -> ' ' is not supported");
            }
            m.metaspace_replacement = p["String"].get<std::string>();
          } else if (st == "Strip") {
            const std::string content = get_string(s, "content", " ");
            const int start = s.value("start", 0), stop = s.value("stop", 0);
            if (content != " " || start > 1 || stop != 0) throw fail("decoder Strip other than one leading ' ' is not supported");
            m.strip_first_space = start == 1;
          } else if (st != "ByteFallback" && st != "Fuse") {
            throw fail(fmt::format("unsupported decoder '{}' in Sequence (supported: Replace, ByteFallback, Fuse, Strip)", st));
          }
        }
      } else {
        throw fail(fmt::format("unsupported decoder type '{}' (supported: ByteLevel, Metaspace, Sequence)", dt));
      }
    }
  } catch (const json::exception& e) {
    throw fail(fmt::format("malformed tokenizer.json: {}", e.what()));
  }

  // Added tokens join the vocabulary and the matchers: normalized ones are matched in the
  // normalized text by their normalized form, the others in the raw text.
  for (std::size_t i = 0; i < m.added.size(); ++i) {
    const AddedToken& t = m.added[i];
    if (static_cast<std::size_t>(t.id) >= m.pieces.size()) m.pieces.resize(static_cast<std::size_t>(t.id) + 1);
    m.pieces[static_cast<std::size_t>(t.id)] = t.content;
    m.added_by_id[t.id] = static_cast<int>(i);
    if (t.normalized) {
      m.normalized_matcher.add(m.has_normalizer ? m.normalize(t.content) : t.content, static_cast<int>(i));
    } else {
      m.raw_matcher.add(t.content, static_cast<int>(i));
    }
  }
  m.raw_matcher.finish();
  m.normalized_matcher.finish();
  for (const auto& item : m.template_single) {
    for (int id : item) {
      if (id < 0 || id >= vocab_size()) throw Error(fmt::format("{}: post-processor token id {} is not in the vocabulary", path, id));
    }
  }

  // BOS / EOS: tokenizer_config.json, else the template's leading special token. What
  // encode(text, true) prepends: see the class comment.
  std::vector<int> template_prefix;
  if (m.has_template && !m.template_single.empty() && !m.template_single.front().empty()) {
    template_prefix = m.template_single.front();
  }
  if (!config_path.empty()) {
    const json cfg = read_json(config_path);
    const std::string b = config_token(cfg, "bos_token"), e = config_token(cfg, "eos_token");
    if (!b.empty()) {
      m.bos = token_id(b);
      if (m.bos < 0) throw Error(fmt::format("{}: bos_token '{}' is not in {}", config_path, b, path));
    }
    if (!e.empty()) {
      m.eos = token_id(e);
      if (m.eos < 0) throw Error(fmt::format("{}: eos_token '{}' is not in {}", config_path, e, path));
    }
    // add_bos_token / add_eos_token are not read: transformers 5 drops them when a
    // tokenizer.json is present (tokenization_utils_base.py, _from_pretrained).
  }
  if (m.bos < 0 && template_prefix.size() == 1) m.bos = template_prefix.front();
  m.bos_prefix = template_prefix;
}

std::vector<int> HfTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids = impl_->encode_text(text);
  if (add_bos) ids.insert(ids.begin(), impl_->bos_prefix.begin(), impl_->bos_prefix.end());
  return ids;
}

bool HfTokenizer::adds_bos() const { return !impl_->bos_prefix.empty(); }

std::vector<int> HfTokenizer::encode_hf(std::string_view text, bool add_special_tokens) const {
  std::vector<int> ids = impl_->encode_text(text);
  if (!impl_->has_template) return ids;
  std::vector<int> out;
  out.reserve(ids.size() + impl_->template_single.size());
  for (const auto& item : impl_->template_single) {
    if (item.empty()) out.insert(out.end(), ids.begin(), ids.end());
    else if (add_special_tokens) out.insert(out.end(), item.begin(), item.end());
  }
  return out;
}

std::string HfTokenizer::decode_token(int prev, int token) const {
  const Impl& m = *impl_;
  const std::string& p = piece(token);
  if (m.added_by_id.count(token)) return p;
  switch (m.decoder) {
    case DecoderKind::kByteLevel: {
      std::string out;
      for (std::size_t i = 0; i < p.size();) {
        const std::size_t b = i;
        const std::uint32_t cp = utf8::next(p, i);
        const int byte = unicode_to_byte(cp);
        if (byte >= 0) out += static_cast<char>(byte);
        else out.append(p, b, i - b);
      }
      return out;
    }
    case DecoderKind::kSentencePiece: {
      std::string out;
      if (p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>') {
        const std::string hex = p.substr(3, 2);
        if (std::isxdigit(static_cast<unsigned char>(hex[0])) && std::isxdigit(static_cast<unsigned char>(hex[1]))) {
          out += static_cast<char>(std::stoi(hex, nullptr, 16));
        } else {
          out = p;
        }
      } else {
        const bool first = prev < 0 || (prev == m.bos && m.bos >= 0);
        // The Metaspace decoder drops every replacement character of the first token.
        out = replace_all(p, m.metaspace_replacement, first && m.metaspace_drop_first ? "" : " ");
      }
      const bool first = prev < 0 || (prev == m.bos && m.bos >= 0);
      if (first && m.strip_first_space && !out.empty() && out[0] == ' ') out.erase(0, 1);
      return out;
    }
    case DecoderKind::kPlain: break;
  }
  return p;
}

const std::string& HfTokenizer::piece(int token) const {
  if (token < 0 || token >= vocab_size()) {
    throw Error(fmt::format("{}: token id {} out of range [0, {})", impl_->path, token, vocab_size()));
  }
  return impl_->pieces[static_cast<std::size_t>(token)];
}

int HfTokenizer::vocab_size() const { return static_cast<int>(impl_->pieces.size()); }
int HfTokenizer::bos_id() const { return impl_->bos; }
int HfTokenizer::eos_id() const { return impl_->eos; }
int HfTokenizer::token_id(std::string_view token) const { return impl_->token_id(token); }
bool HfTokenizer::is_special(int token) const {
  auto it = impl_->added_by_id.find(token);
  return it != impl_->added_by_id.end() && impl_->added[static_cast<std::size_t>(it->second)].special;
}
const std::string& HfTokenizer::path() const { return impl_->path; }

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& folder_or_file) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path file = folder_or_file;
  if (fs::is_directory(file, ec)) file /= "tokenizer.json";
  if (!fs::is_regular_file(file, ec)) throw Error(fmt::format("{}: no such tokenizer.json file", file.string()));
  const fs::path cfg = file.parent_path().empty() ? fs::path("tokenizer_config.json")
                                                  : file.parent_path() / "tokenizer_config.json";
  const std::string cfg_path = fs::is_regular_file(cfg, ec) ? cfg.string() : std::string();
  return std::make_unique<HfTokenizer>(file.string(), cfg_path);
}

}  // namespace kvcompact
