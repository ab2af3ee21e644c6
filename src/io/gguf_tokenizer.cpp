// load_gguf_tokenizer: GGUF `llama` (SPM) and `gpt2` (byte-level BPE) vocabularies, tokenized as
// llama.cpp's llama-vocab.cpp does (special-token partition, then the SPM session or the
// pre-tokenizer regexes + BPE merges). The byte-level BPE path converts the metadata into the
// equivalent tokenizer.json pipeline and runs it on HfTokenizer.
#include "io/gguf_tokenizer.h"

#include <algorithm>
#include <cstdint>
#include <string_view>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "io/hf_tokenizer.h"
#include "io/spm_session.h"
#include "io/spm_tokenizer.h"

namespace kvcompact {

namespace {

using json = nlohmann::json;

// Regexes of llama.cpp's llm_tokenizer_bpe constructor (llama-vocab.cpp), by pre-tokenizer type.
const char* const kGpt2 = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)";
const char* const kLlama3 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kQwen2 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* const kChatGlm4 =
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

bool one_of(const std::string& s, std::initializer_list<std::string_view> names) {
  return std::find(names.begin(), names.end(), s) != names.end();
}

/// Special tokens of a vocabulary (types Control, UserDefined, Unknown), longest first as in
/// llama.cpp's cache_special_tokens, and the partition of a text around them.
struct SpecialTokens {
  std::vector<std::pair<std::string, int>> tokens;  // (text, id), longest text first

  void build(const std::vector<std::string>& texts, const std::vector<std::int64_t>& types) {
    for (std::size_t i = 0; i < texts.size() && i < types.size(); ++i) {
      const auto t = static_cast<GgufTokenType>(types[i]);
      if ((t == GgufTokenType::Control || t == GgufTokenType::UserDefined || t == GgufTokenType::Unknown) &&
          !texts[i].empty())
        tokens.emplace_back(texts[i], static_cast<int>(i));
    }
    std::stable_sort(tokens.begin(), tokens.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  }

  /// A fragment is raw text (id < 0) or a special token (its id).
  struct Fragment {
    std::string_view text;
    int id;
  };
  /// llama.cpp tokenizer_st_partition: for each special token (longest first), every occurrence
  /// in every remaining raw-text fragment is cut out.
  std::vector<Fragment> partition(std::string_view text) const {
    std::vector<Fragment> frags{{text, -1}};
    for (const auto& [tok, id] : tokens) {
      std::vector<Fragment> next;
      next.reserve(frags.size());
      for (const Fragment& f : frags) {
        if (f.id >= 0) {
          next.push_back(f);
          continue;
        }
        std::string_view rest = f.text;
        for (std::size_t at; (at = rest.find(tok)) != std::string_view::npos;) {
          if (at > 0) next.push_back({rest.substr(0, at), -1});
          next.push_back({std::string_view(), id});
          rest.remove_prefix(at + tok.size());
        }
        if (!rest.empty()) next.push_back({rest, -1});
      }
      frags.swap(next);
    }
    return frags;
  }
};

/// GGUF `llama` vocabulary: llama.cpp's SPM tokenize (special partition, dummy prefix at the start
/// and after each special token when add_space_prefix, the SPM session on each fragment).
/// Decoding: pieces with ' ' for "▁", byte tokens as their byte; the leading space after BOS is
/// dropped only when add_space_prefix (llama.cpp's detokenize remove_space).
class GgufSpmTokenizer final : public Tokenizer {
 public:
  GgufSpmTokenizer(std::unique_ptr<SpmTokenizer> spm, SpmSession session, SpecialTokens specials,
                   bool add_space_prefix, bool add_bos, bool add_eos)
      : spm_(std::move(spm)), session_(std::move(session)), specials_(std::move(specials)),
        add_space_prefix_(add_space_prefix), add_bos_(add_bos), add_eos_(add_eos) {}

  std::vector<int> encode(std::string_view text, bool add_special) const override {
    std::vector<int> out;
    if (add_special && add_bos_) out.push_back(spm_->bos_id());
    bool prev_special = true;
    for (const auto& f : specials_.partition(text)) {
      if (f.id >= 0) {
        out.push_back(f.id);
        prev_special = true;
        continue;
      }
      const std::vector<int> ids =
          session_.tokenize(add_space_prefix_ && prev_special ? " " + std::string(f.text) : std::string(f.text));
      out.insert(out.end(), ids.begin(), ids.end());
      prev_special = false;
    }
    if (add_special && add_eos_) out.push_back(spm_->eos_id());
    return out;
  }
  std::string decode_token(int prev, int token) const override {
    return spm_->decode_token(add_space_prefix_ ? prev : -1, token);
  }
  const std::string& piece(int token) const override { return spm_->piece(token); }
  int vocab_size() const override { return spm_->vocab_size(); }
  int bos_id() const override { return spm_->bos_id(); }
  int eos_id() const override { return spm_->eos_id(); }
  bool adds_bos() const override { return add_bos_; }

 private:
  std::unique_ptr<SpmTokenizer> spm_;
  SpmSession session_;
  SpecialTokens specials_;
  bool add_space_prefix_, add_bos_, add_eos_;
};

/// llama.cpp's reading of text as code points (unicode.cpp unicode_cpts_from_utf8), written back
/// as UTF-8: a lead byte followed by enough continuation bytes is one code point (overlong forms
/// and surrogates included, as llama.cpp does not check them); any other byte becomes U+FFFD.
std::string llama_cpp_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto put = [&out](std::uint32_t c) {
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
    } else if (c < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (c >> 6)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else if (c < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (c >> 12)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (c >> 18)));
      out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
    }
  };
  auto cont = [&s](std::size_t i) { return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80; };
  for (std::size_t i = 0; i < s.size();) {
    const auto b = static_cast<unsigned char>(s[i]);
    auto at = [&s](std::size_t k) { return static_cast<std::uint32_t>(static_cast<unsigned char>(s[k]) & 0x3F); };
    if (b < 0x80) {
      out.push_back(static_cast<char>(b));
      i += 1;
    } else if ((b & 0xE0) == 0xC0 && cont(i + 1)) {
      put(((b & 0x1Fu) << 6) | at(i + 1));
      i += 2;
    } else if ((b & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      put(((b & 0x0Fu) << 12) | (at(i + 1) << 6) | at(i + 2));
      i += 3;
    } else if ((b & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      put(((b & 0x07u) << 18) | (at(i + 1) << 12) | (at(i + 2) << 6) | at(i + 3));
      i += 4;
    } else {
      put(0xFFFD);
      i += 1;
    }
  }
  return out;
}

/// GGUF `gpt2` vocabulary: the converted tokenizer.json pipeline (added tokens = the special
/// tokens, Split regexes, ByteLevel without its own regex, BPE) plus the file's BOS/EOS rules.
class GgufBpeTokenizer final : public Tokenizer {
 public:
  GgufBpeTokenizer(std::unique_ptr<HfTokenizer> hf, int bos, int eos, bool add_bos, bool add_eos)
      : hf_(std::move(hf)), bos_(bos), eos_(eos), add_bos_(add_bos), add_eos_(add_eos) {}

  std::vector<int> encode(std::string_view text, bool add_special) const override {
    std::vector<int> out;
    if (add_special && add_bos_ && bos_ >= 0) out.push_back(bos_);
    const std::vector<int> ids = hf_->encode(llama_cpp_utf8(text), false);
    out.insert(out.end(), ids.begin(), ids.end());
    if (add_special && add_eos_ && eos_ >= 0) out.push_back(eos_);
    return out;
  }
  std::string decode_token(int prev, int token) const override { return hf_->decode_token(prev, token); }
  const std::string& piece(int token) const override { return hf_->piece(token); }
  int vocab_size() const override { return hf_->vocab_size(); }
  int bos_id() const override { return bos_; }
  int eos_id() const override { return eos_; }
  bool adds_bos() const override { return add_bos_ && bos_ >= 0; }

 private:
  std::unique_ptr<HfTokenizer> hf_;
  int bos_, eos_;
  bool add_bos_, add_eos_;
};

/// An optional bool key; `fallback` when absent.
bool bool_or(const GgufFile& f, const std::string& key, bool fallback) {
  return f.has(key) ? f.get_bool(key) : fallback;
}

/// An optional token id key that must name a token; -1 when absent.
int token_id_or_none(const GgufFile& f, const std::string& key, std::size_t n) {
  if (!f.has(key)) return -1;
  const std::int64_t v = f.get_int(key);
  if (v < 0 || static_cast<std::uint64_t>(v) >= n)
    throw Error(fmt::format("{}: {} = {} is out of range for {} tokens", f.path(), key, v, n));
  return static_cast<int>(v);
}

std::vector<std::int64_t> token_types(const GgufFile& f, std::size_t n) {
  if (!f.has("tokenizer.ggml.token_type")) return std::vector<std::int64_t>(n, static_cast<int>(GgufTokenType::Normal));
  std::vector<std::int64_t> types = f.get_int_array("tokenizer.ggml.token_type");
  if (types.size() != n)
    throw Error(fmt::format("{}: tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}", f.path(),
                            types.size(), n));
  return types;
}

std::unique_ptr<Tokenizer> load_spm(const GgufFile& f) {
  std::vector<std::string> pieces = f.get_string_array("tokenizer.ggml.tokens");
  const std::size_t n = pieces.size();
  if (n == 0) throw Error(fmt::format("{}: tokenizer.ggml.tokens is empty", f.path()));
  std::vector<float> scores = f.has("tokenizer.ggml.scores") ? f.get_float_array("tokenizer.ggml.scores")
                                                             : std::vector<float>(n, 0.0f);
  if (scores.size() != n)
    throw Error(fmt::format("{}: tokenizer.ggml.scores has {} entries, tokenizer.ggml.tokens {}", f.path(),
                            scores.size(), n));
  const std::vector<std::int64_t> types = token_types(f, n);
  int bos = token_id_or_none(f, "tokenizer.ggml.bos_token_id", n);
  int eos = token_id_or_none(f, "tokenizer.ggml.eos_token_id", n);
  if (bos < 0) bos = n > 1 ? 1 : 0;  // llama.cpp's SPM defaults
  if (eos < 0) eos = n > 2 ? 2 : 0;
  SpecialTokens specials;
  specials.build(pieces, types);
  SpmSession session(pieces, scores, f.path());
  // Decoded pieces: U+2581 -> ' '. A BOS "<s>" and an EOS "</s>" decode as llama2.c's tokenizer
  // export writes them, so the vocabulary equals the llama2.c tokenizer.bin of the same model.
  static const std::string kSpace = "\xE2\x96\x81";
  for (std::size_t i = 0; i < n; ++i) {
    std::string& p = pieces[i];
    if (static_cast<int>(i) == bos && p == "<s>") {
      p = "\n<s>\n";
    } else if (static_cast<int>(i) == eos && p == "</s>") {
      p = "\n</s>\n";
    }
    std::string out;
    out.reserve(p.size());
    for (std::size_t k = 0; k < p.size();) {
      if (p.compare(k, kSpace.size(), kSpace) == 0) {
        out.push_back(' ');
        k += kSpace.size();
      } else {
        out.push_back(p[k++]);
      }
    }
    p.swap(out);
  }
  auto spm = std::make_unique<SpmTokenizer>(std::move(pieces), std::move(scores), bos, eos, f.path());
  return std::make_unique<GgufSpmTokenizer>(std::move(spm), std::move(session), std::move(specials),
                                            bool_or(f, "tokenizer.ggml.add_space_prefix", true),
                                            bool_or(f, "tokenizer.ggml.add_bos_token", true),
                                            bool_or(f, "tokenizer.ggml.add_eos_token", false));
}

std::unique_ptr<Tokenizer> load_bpe(const GgufFile& f) {
  const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
  const std::size_t n = tokens.size();
  if (n == 0) throw Error(fmt::format("{}: tokenizer.ggml.tokens is empty", f.path()));
  if (!f.has("tokenizer.ggml.merges")) throw Error(fmt::format("{}: tokenizer.ggml.merges is missing", f.path()));
  const std::vector<std::string> merges = f.get_string_array("tokenizer.ggml.merges");
  const std::vector<std::int64_t> types = token_types(f, n);
  const std::string pre_name = f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : std::string();
  const GgufPreTokenizer pre = gguf_pre_tokenizer(pre_name, f.path());

  json vocab = json::object();
  for (std::size_t i = 0; i < n; ++i) {
    if (!vocab.contains(tokens[i])) vocab[tokens[i]] = static_cast<int>(i);  // first id of a duplicate
  }
  json jm = json::array();
  for (std::size_t r = 0; r < merges.size(); ++r) {
    if (merges[r].find(' ') == std::string::npos)
      throw Error(fmt::format("{}: tokenizer.ggml.merges[{}] '{}' has no space", f.path(), r, merges[r]));
    jm.push_back(merges[r]);
  }
  json added = json::array();
  for (std::size_t i = 0; i < n; ++i) {
    const auto t = static_cast<GgufTokenType>(types[i]);
    if ((t == GgufTokenType::Control || t == GgufTokenType::UserDefined || t == GgufTokenType::Unknown) &&
        !tokens[i].empty())
      added.push_back({{"id", static_cast<int>(i)}, {"content", tokens[i]}, {"single_word", false},
                       {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                       {"special", t != GgufTokenType::UserDefined}});
  }
  json pretok = json::array();
  for (const std::string& re : pre.regexes)
    pretok.push_back({{"type", "Split"}, {"pattern", {{"Regex", re}}}, {"behavior", "Isolated"}, {"invert", false}});
  pretok.push_back({{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}});
  const json tj = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "Sequence"}, {"pretokenizers", pretok}}},
      {"post_processor", nullptr},
      {"decoder", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}},
      {"model",
       {{"type", "BPE"}, {"vocab", vocab}, {"merges", jm}, {"byte_fallback", false},
        {"ignore_merges", pre.ignore_merges}, {"fuse_unk", false}, {"unk_token", nullptr}}},
  };
  auto hf = std::make_unique<HfTokenizer>(tj, f.path(), std::string());
  const int bos = token_id_or_none(f, "tokenizer.ggml.bos_token_id", n);
  const int eos = token_id_or_none(f, "tokenizer.ggml.eos_token_id", n);
  return std::make_unique<GgufBpeTokenizer>(std::move(hf), bos, eos,
                                            bool_or(f, "tokenizer.ggml.add_bos_token", pre.add_bos_default),
                                            bool_or(f, "tokenizer.ggml.add_eos_token", false));
}

}  // namespace

GgufPreTokenizer gguf_pre_tokenizer(const std::string& name, const std::string& source) {
  GgufPreTokenizer p;
  if (name.empty() || name == "default") {
    p.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|]+", kGpt2, "\\p{N}+", "[0-9][0-9][0-9]"};
  } else if (one_of(name, {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2"})) {
    p.regexes = {kLlama3};
    p.ignore_merges = true;
    p.add_bos_default = true;
  } else if (one_of(name, {"dbrx", "smaug-bpe"})) {
    p.regexes = {kLlama3};
  } else if (one_of(name, {"qwen2", "deepseek-r1-qwen", "megrez", "stablelm2", "hunyuan"})) {
    p.regexes = {kQwen2};
  } else if (one_of(name, {"smollm", "starcoder", "refact", "command-r", "codeshell", "exaone", "minerva-7b"})) {
    p.regexes = {"\\p{N}", kGpt2};
  } else if (one_of(name, {"gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "mpt",
                           "olmo", "jais", "exaone4", "trillion", "granite-docling"})) {
    p.regexes = {kGpt2};
  } else if (name == "falcon") {
    p.regexes = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", kGpt2, "[0-9][0-9][0-9]"};
  } else if (one_of(name, {"chatglm-bpe"})) {
    p.regexes = {kChatGlm4};
  } else if (one_of(name, {"poro-chat", "bloom", "gpt3-finnish"})) {
    p.regexes = {" ?[^(\\s|.,!?…。，、।۔،)]+"};
  } else if (name == "viking") {
    p.regexes = {" ?[^(\\s|.,!?…。，、।۔،)]+", "\\p{N}"};
  } else {
    throw Error(fmt::format(
        "{}: tokenizer.ggml.pre '{}' is a pre-tokenizer kvcompact does not know (known: default, llama3/llama-bpe, "
        "qwen2, smollm, starcoder, gpt-2, falcon, dbrx, stablelm2, chatglm-bpe, bloom, viking and their aliases)",
        source, name));
  }
  return p;
}

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f) {
  if (!f.has("tokenizer.ggml.model")) throw Error(fmt::format("{}: tokenizer.ggml.model is missing", f.path()));
  const std::string& kind = f.get_string("tokenizer.ggml.model");
  if (kind == "llama") return load_spm(f);
  if (kind == "gpt2") return load_bpe(f);
  throw Error(fmt::format("{}: tokenizer.ggml.model '{}' is not supported (supported: llama, gpt2)", f.path(), kind));
}

}  // namespace kvcompact
