// tokenizer.json pipeline; see hf_tokenizer.h. Behaviour follows the Hugging Face tokenizers
// library as implemented by @huggingface/tokenizers (the reference the tests compare against).
#include "io/hf_tokenizer.h"

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
#include <unordered_map>

#include "io/bpe_tokenizer.h"
#include "io/error.h"
#include "io/unicode_nfc.h"
#include "io/unicode_regex.h"
#include "io/utf8.h"

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

/// JS String.prototype.trimEnd / trimStart.
std::string trim_end_js(const std::string& s) {
  std::size_t end = 0, i = 0;
  while (i < s.size()) {
    const std::uint32_t c = utf8::next(s, i);
    if (!utf8::is_js_space(c)) end = i;
  }
  return s.substr(0, end);
}
std::string trim_start_js(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t j = i;
    if (!utf8::is_js_space(utf8::next(s, j))) break;
    i = j;
  }
  return s.substr(i);
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

struct AddedToken {
  std::string content;
  int id = 0;
  bool special = false, lstrip = false, rstrip = false, normalized = false;
};

/// Leftmost-longest matcher over a set of added tokens (the reference's DictionarySplitter).
class AddedSplitter {
 public:
  void add(const std::string& content, int index) {
    if (content.empty()) return;
    by_first_[static_cast<unsigned char>(content[0])].push_back({content, index});
  }
  void finish() {
    for (auto& v : by_first_) {
      std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
    }
  }
  bool empty() const {
    return std::all_of(by_first_.begin(), by_first_.end(), [](const auto& v) { return v.empty(); });
  }
  /// Pieces of text: {text, added token index or -1}.
  std::vector<std::pair<std::string, int>> split(const std::string& text) const {
    std::vector<std::pair<std::string, int>> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i < text.size();) {
      int hit = -1;
      std::size_t len = 0;
      for (const auto& [c, idx] : by_first_[static_cast<unsigned char>(text[i])]) {
        if (text.compare(i, c.size(), c) == 0) {
          hit = idx;
          len = c.size();
          break;
        }
      }
      if (hit < 0) {
        ++i;
        continue;
      }
      if (i > start) out.emplace_back(text.substr(start, i - start), -1);
      out.emplace_back(text.substr(i, len), hit);
      i += len;
      start = i;
    }
    if (start < text.size()) out.emplace_back(text.substr(start), -1);
    return out;
  }

 private:
  std::array<std::vector<std::pair<std::string, int>>, 256> by_first_;
};

/// Applies lstrip/rstrip of the added tokens to their neighbours.
void strip_around(std::vector<std::pair<std::string, int>>& parts, const std::vector<AddedToken>& added) {
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (parts[i].second < 0) continue;
    const AddedToken& t = added[static_cast<std::size_t>(parts[i].second)];
    if (t.lstrip && i > 0 && parts[i - 1].second < 0) parts[i - 1].first = trim_end_js(parts[i - 1].first);
    if (t.rstrip && i + 1 < parts.size() && parts[i + 1].second < 0) parts[i + 1].first = trim_start_js(parts[i + 1].first);
  }
}

struct NormStep {
  enum Kind { kNfc, kPrepend, kReplaceString, kReplaceRegex } kind;
  std::string a, b;  // prepend text; replace pattern string / content
  std::shared_ptr<UnicodeRegex> regex;
};

struct PreStep {
  enum Kind { kSplit, kByteLevel, kMetaspace } kind = kSplit;
  std::shared_ptr<UnicodeRegex> regex;
  bool removed = false;           // Split: drop the matches (else isolate them)
  bool invert = false;            // Split: keep only the matches
  bool add_prefix_space = false;  // ByteLevel
  bool use_regex = true;          // ByteLevel
  std::string replacement;        // Metaspace
  std::string prepend_scheme;     // Metaspace: always / first / never
};

enum class DecoderKind { kByteLevel, kSentencePiece, kPlain };

}  // namespace

struct HfTokenizer::Impl {
  std::string path;
  std::unique_ptr<BpeModel> model;
  std::vector<std::string> pieces;  // id -> piece
  std::vector<AddedToken> added;
  std::unordered_map<int, int> added_by_id;  // id -> index in added
  AddedSplitter raw_splitter, normalized_splitter;
  std::vector<NormStep> norm;
  bool has_normalizer = false;
  std::vector<PreStep> pre;
  std::vector<std::string> template_single;  // post-processor: "$A" or a special token string
  bool has_template = false;
  DecoderKind decoder = DecoderKind::kPlain;
  bool strip_first_space = false;
  std::string metaspace_replacement = kMetaspace;
  int bos = -1, eos = -1;

  std::string normalize(std::string s) const {
    for (const NormStep& st : norm) {
      switch (st.kind) {
        case NormStep::kNfc: s = nfc_normalize(s); break;
        case NormStep::kPrepend: s = st.a + s; break;
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

  std::vector<std::string> pre_tokenize(const std::string& text, std::size_t section_index) const {
    std::vector<std::string> parts{text};
    for (const PreStep& st : pre) {
      std::vector<std::string> next;
      for (std::string& p : parts) {
        switch (st.kind) {
          case PreStep::kSplit: {
            std::size_t pos = 0;
            for (auto [b, e] : st.regex->find_all(p)) {
              if (!st.invert && b > pos) next.push_back(p.substr(pos, b - pos));  // the text between matches
              if (!st.removed && e > b) next.push_back(p.substr(b, e - b));
              pos = e;
            }
            if (!st.invert && pos < p.size()) next.push_back(p.substr(pos));
            break;
          }
          case PreStep::kByteLevel: {
            std::string s = p;
            if (st.add_prefix_space && (s.empty() || s[0] != ' ')) s = " " + s;
            static const UnicodeRegex gpt2(
                R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)", "ByteLevel");
            if (st.use_regex) {
              for (auto [b, e] : gpt2.find_all(s)) {
                std::string w;
                append_byte_level(w, std::string_view(s).substr(b, e - b));
                next.push_back(std::move(w));
              }
            } else {
              std::string w;
              append_byte_level(w, s);
              next.push_back(std::move(w));
            }
            break;
          }
          case PreStep::kMetaspace: {
            std::string s = replace_all(p, " ", st.replacement);
            const bool prepend = st.prepend_scheme == "always" || (st.prepend_scheme == "first" && section_index == 0);
            if (prepend && s.compare(0, st.replacement.size(), st.replacement) != 0) s = st.replacement + s;
            next.push_back(std::move(s));
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
    const std::string text(text_view);
    auto sections = raw_splitter.split(text);
    strip_around(sections, added);
    for (std::size_t si = 0; si < sections.size(); ++si) {
      const auto& [sec, idx] = sections[si];
      if (sec.empty()) continue;
      if (idx >= 0) {
        ids.push_back(added[static_cast<std::size_t>(idx)].id);
        continue;
      }
      const std::string normalized = normalize(sec);
      if (normalized.empty()) continue;
      auto subs = normalized_splitter.split(normalized);
      strip_around(subs, added);
      for (const auto& [sub, sidx] : subs) {
        if (sub.empty()) continue;
        if (sidx >= 0) {
          ids.push_back(added[static_cast<std::size_t>(sidx)].id);
          continue;
        }
        for (const std::string& w : pre_tokenize(sub, si)) model->encode_word(w, ids);
      }
    }
    return ids;
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
      const int id = it.value().get<int>();
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
    opt.ignore_merges = get_bool(mj, "ignore_merges", false);
    opt.unk_token = get_string(mj, "unk_token", "");
    m.pieces.assign(static_cast<std::size_t>(max_id + 1), std::string());
    for (const auto& [tok, id] : vocab) m.pieces[static_cast<std::size_t>(id)] = tok;
    m.model = std::make_unique<BpeModel>(std::move(vocab), merges, opt, path);

    // ---- added tokens ----
    if (j.contains("added_tokens") && j["added_tokens"].is_array()) {
      for (const json& a : j["added_tokens"]) {
        AddedToken t;
        t.content = a.at("content").get<std::string>();
        t.id = a.at("id").get<int>();
        if (t.id < 0) throw fail(fmt::format("added token '{}' has negative id {}", t.content, t.id));
        t.special = get_bool(a, "special", false);
        t.lstrip = get_bool(a, "lstrip", false);
        t.rstrip = get_bool(a, "rstrip", false);
        t.normalized = get_bool(a, "normalized", !t.special);
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
          re = "\\Q" + pat["String"].get<std::string>() + "\\E";
        } else {
          throw fail("Split pre-tokenizer pattern is neither String nor Regex");
        }
        st.regex = std::make_shared<UnicodeRegex>(re, path);
        st.invert = get_bool(p, "invert", false);
        const std::string behavior = get_string(p, "behavior", "Isolated");
        if (behavior == "Removed") {
          st.removed = true;
        } else if (behavior != "Isolated") {
          throw fail(fmt::format("unsupported Split behavior '{}' (supported: Isolated, Removed)", behavior));
        }
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
        st.replacement = get_string(p, "replacement", kMetaspace);
        std::string scheme = get_string(p, "prepend_scheme", "");
        if (scheme.empty()) scheme = get_bool(p, "add_prefix_space", true) ? "always" : "never";
        st.prepend_scheme = scheme;
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
        for (const json& item : p.at("single")) {
          if (item.contains("SpecialToken")) {
            const std::string tok = item["SpecialToken"].at("id").get<std::string>();
            m.template_single.push_back(tok);
          } else if (item.contains("Sequence")) {
            const std::string seq = item["Sequence"].at("id").get<std::string>();
            if (seq != "A") throw fail("TemplateProcessing single template uses sequence " + seq);
            m.template_single.push_back("$A");
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
        m.metaspace_replacement = get_string(d, "replacement", kMetaspace);
        std::string scheme = get_string(d, "prepend_scheme", "");
        if (scheme.empty()) scheme = get_bool(d, "add_prefix_space", true) ? "always" : "never";
        m.strip_first_space = scheme != "never";
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

  // Added tokens join the vocabulary and the splitters.
  for (std::size_t i = 0; i < m.added.size(); ++i) {
    const AddedToken& t = m.added[i];
    m.model->add_token(t.content, t.id);
    if (static_cast<std::size_t>(t.id) >= m.pieces.size()) m.pieces.resize(static_cast<std::size_t>(t.id) + 1);
    m.pieces[static_cast<std::size_t>(t.id)] = t.content;
    m.added_by_id[t.id] = static_cast<int>(i);
    if (t.normalized && m.has_normalizer) {
      m.normalized_splitter.add(m.normalize(t.content), static_cast<int>(i));
    } else {
      m.raw_splitter.add(t.content, static_cast<int>(i));
    }
  }
  m.raw_splitter.finish();
  m.normalized_splitter.finish();
  for (const std::string& t : m.template_single) {
    if (t != "$A" && token_id(t) < 0) throw Error(fmt::format("{}: post-processor token '{}' is not in the vocabulary", path, t));
  }

  // BOS / EOS: tokenizer_config.json, else the template's leading special token.
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
  }
  if (m.bos < 0 && !m.template_single.empty() && m.template_single.front() != "$A") m.bos = token_id(m.template_single.front());
}

std::vector<int> HfTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int> ids = impl_->encode_text(text);
  if (add_bos && impl_->bos >= 0) ids.insert(ids.begin(), impl_->bos);
  return ids;
}

std::vector<int> HfTokenizer::encode_hf(std::string_view text, bool add_special_tokens) const {
  std::vector<int> ids = impl_->encode_text(text);
  if (!impl_->has_template) return ids;
  std::vector<int> out;
  out.reserve(ids.size() + impl_->template_single.size());
  for (const std::string& t : impl_->template_single) {
    if (t == "$A") out.insert(out.end(), ids.begin(), ids.end());
    else if (add_special_tokens) out.push_back(token_id(t));
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
        out = replace_all(p, m.metaspace_replacement, " ");
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
int HfTokenizer::token_id(std::string_view token) const { return impl_->model->token_id(token); }
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
