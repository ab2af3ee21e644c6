// HfTokenizer (tokenizer.json): hand-worked BPE merges, the GPT-2 byte map, NFC, errors, and
// token ids identical to the Rust Hugging Face tokenizers library (PyPI `tokenizers`, the one
// transformers uses; tests/ref/hf_tokenize.py) for
//  - the real Qwen3 and Llama 3 tokenizers on every line of WikiText-2 test, the Paul Graham
//    essays, bAbI (first 150 lines of each of the 20 en_test files) and hand-made edge cases
//    (digit and white-space runs, emoji, special tokens inside text, invalid UTF-8);
//  - small synthetic tokenizer.json files, one per feature: Metaspace split on/off and every
//    prepend scheme, BPE fuse_unk / byte_fallback / unk, added tokens with every combination of
//    single_word, lstrip, rstrip, normalized and special, every Split behavior with and without
//    invert, TemplateProcessing, the library's added-token id assignment;
//  - SentencePiece-style BPE tokenizer.json files (byte_fallback; legacy Prepend/Replace
//    normalizer and Metaspace) derived from stories260K's tok512.bin (tests/js/spm_tokenizer_json.mjs).
// Also encode(text, true) against transformers' AutoTokenizer.encode(text) (the BOS rule), and
// decode(encode(x)) == x (NFC(x) for Qwen3) on the real data.
#include "io/hf_tokenizer.h"

#include "tokenizer_cases.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "io/bpe_tokenizer.h"
#include "core/error.h"
#include "loaders/llama2c_checkpoint.h"
#include "io/unicode_nfc.h"
#include "io/unicode_regex.h"
#include "core/utf8.h"
#include "python_ref.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
using json = nlohmann::json;
using kvcompact::testing::python_ready;
using kvcompact::testing::run_python_ref;

const std::string kShared = KVC_SHARED_DIR;
const std::string kJsDir = std::string(KVC_SOURCE_DIR) + "/tests/js";
const std::string kQwen3 = kShared + "/data/tokenizers/qwen3";
const std::string kLlama3 = kShared + "/data/tokenizers/llama3";
const std::string kMeta = "\xE2\x96\x81";  // U+2581

// Per process: ctest runs each test of this file in its own process, in parallel.
fs::path tmp_dir() {
  fs::path d = fs::path(KVC_TEST_TMP) / ("hf_tokenizer_" + std::to_string(static_cast<long>(getpid())));
  fs::create_directories(d);
  return d;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const fs::path& path, const std::string& s) {
  std::ofstream out(path, std::ios::binary);
  out << s;
}

using testing::lines_of;

std::string base64(const std::string& s) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    const unsigned v = (static_cast<unsigned char>(s[i]) << 16) | (static_cast<unsigned char>(s[i + 1]) << 8) |
                       static_cast<unsigned char>(s[i + 2]);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == s.size()) {
    const unsigned v = static_cast<unsigned char>(s[i]) << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    const unsigned v = (static_cast<unsigned char>(s[i]) << 16) | (static_cast<unsigned char>(s[i + 1]) << 8);
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

json b64_list(const std::vector<std::string>& texts) {
  json a = json::array();
  for (const auto& t : texts) a.push_back(base64(t));
  return a;
}

/// Hand-made edge cases (UTF-8, some deliberately invalid).
std::vector<std::string> edge_cases() {
  return {
      "", " ", "  ", "\n", "\n\n\n", "\t", "   leading spaces", "trailing spaces   ", "a  b   c    d     e",
      "Hey   friend!", "tabs\tand\t\tmore", "line\r\nwindows\r\n", " \n \n  \n", "Hello, world!", "Hello world",
      "I'm here, you're there, it's 'quoted', we'll see, they've, he'd", "DON'T SHOUT'S 'LL 'VE",
      "1234567890123456789012345", "3.14159 and 1,000,000 and 2024-01-01", "x=12345;y=678", "0", "00000000000",
      "\xD9\xA1\xD9\xA2\xD9\xA3 \xE0\xA5\xA7\xE0\xA5\xA8 \xEF\xBC\x91\xEF\xBC\x92 \xC2\xB2\xC2\xBD \xE2\x85\xA0",
      "emoji \xF0\x9F\x99\x82 \xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD family "
      "\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xE2\x80\x8D\xF0\x9F\x91\xA7",
      "flags \xF0\x9F\x87\xBA\xF0\x9F\x87\xB8\xF0\x9F\x87\xA9\xF0\x9F\x87\xAA",
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81 "
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88\xE3\x80\x82 "
      "\xED\x95\x9C\xEA\xB5\xAD\xEC\x96\xB4",
      "combining: e\xCC\x81 vs \xC3\xA9, A\xCC\x8A, \xE2\x84\xAB, q\xCC\x87\xCC\xA3",
      "jamo \xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8 and \xE0\xA5\x98 excluded",
      "\xD9\x85\xD8\xB1\xD8\xAD\xD8\xA8\xD8\xA7 \xD7\xA9\xD7\x9C\xD7\x95\xD7\x9D \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8"
      "\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87",
      "nbsp a\xC2\xA0" "b, ideographic\xE3\x80\x80space, bom\xEF\xBB\xBFx, nel\xC2\x85y, mvs\xE1\xA0\x8Ez",
      "spaces \xC2\xA0\xC2\xA0 x \xE2\x80\x83\xE2\x80\x83y \xE2\x80\xA8z \xE3\x80\x80\xE3\x80\x80w",
      "long s \xC5\xBF's and Kelvin \xE2\x84\xAA",
      "<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n",
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>",
      "a<|endoftext|>b<|end_of_text|>c", "<|im_start|><|im_start|>", "partial <|im_sta and <|eot_i",
      "  <|im_end|>  spaced  <|eot_id|>  ", "<s>in text</s> <unk>", "<think>\nreasoning\n</think>\n\nanswer",
      std::string(300, 'a'), std::string(120, '='), std::string(50, ' ') + "x", std::string(40, '\n') + "y",
      "def f(x):\n    return x**2  # comment\n\n\tpass\n",
      "Mixed CASE words AND acronyms like NASA, URLs http://example.com/a?b=c&d=e",
      // Invalid UTF-8: a stray byte, truncated sequences, a surrogate, an overlong form, > U+10FFFF.
      "abc\xFF" "def", "\xC3(", "x\xE2\x82", "\xF0\x9F\x98 y", "\xED\xA0\x80z", "\xC0\xAF", "\xF4\x90\x80\x80",
      "\x80\x80\x80", "ok \xE2\x82\xAC then \xE2\x82 broken \xF0\x9F\x99\x82",
  };
}

/// Runs a shell command; returns its exit status (-1 when it could not run).
int run_shell(const std::string& cmd) {
  const int rc = std::system(cmd.c_str());
  if (rc == -1) return -1;
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

/// Fails (not skips) when Node.js is missing (it writes the SentencePiece-style tokenizer.json).
::testing::AssertionResult node_ready() {
  if (run_shell("node --version > /dev/null 2>&1") != 0) {
    return ::testing::AssertionFailure() << "node (Node.js) is not on PATH: tests/js/spm_tokenizer_json.mjs cannot run; "
                                            "install nodejs (scripts/setup.sh does)";
  }
  return ::testing::AssertionSuccess();
}

/// Runs tests/ref/hf_tokenize.py on `input` (written to tmp_dir()/<name>.in.json); returns its
/// parsed output, or null after a failure saying what Python printed.
json rust_reference(const std::string& name, const json& input) {
  const fs::path in = tmp_dir() / (name + ".in.json"), out = tmp_dir() / (name + ".out.json");
  write_text(in, input.dump());
  fs::remove(out);
  const int rc = run_python_ref("hf_tokenize.py", "'" + in.string() + "'", out.string());
  if (rc != 0) {
    ADD_FAILURE() << "tests/ref/hf_tokenize.py failed (" << rc << "): " << read_text(out.string() + ".log");
    return json();
  }
  return json::parse(read_text(out.string()));
}

/// Byte-exact concatenation of decode_token over all ids (added tokens included).
std::string decode_all(const Tokenizer& tok, const std::vector<int>& ids) {
  std::string s;
  int prev = -1;
  for (int id : ids) {
    s += tok.decode_token(prev, id);
    prev = id;
  }
  return s;
}

std::string ids_str(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size() && i < 40; ++i) {
    if (i) s += ' ';
    s += std::to_string(v[i]);
  }
  if (v.size() > 40) s += " ...";
  return s;
}

/// Compares encode_hf(texts[i], false) with ref_ids[i] for every text; returns the number of
/// mismatches and reports the first few (text index, text, both id lists).
int compare_ids(const std::string& what, const HfTokenizer& tok, const std::vector<std::string>& texts,
                const json& ref_ids, bool add_special, std::size_t* tokens = nullptr) {
  EXPECT_EQ(ref_ids.size(), texts.size()) << what;
  int failures = 0;
  for (std::size_t i = 0; i < texts.size() && i < ref_ids.size(); ++i) {
    const std::vector<int> ids = tok.encode_hf(texts[i], add_special);
    const std::vector<int> want = ref_ids[i].get<std::vector<int>>();
    if (tokens) *tokens += ids.size();
    if (ids != want && failures++ < 3) {
      ADD_FAILURE() << what << ": text " << i << " " << json(utf8::to_valid(texts[i])).dump()
                    << (add_special ? " (add_special_tokens)" : "") << "\n ours: " << ids_str(ids)
                    << "\n Rust: " << ids_str(want);
    }
  }
  return failures;
}

// ---------------------------------------------------------------------------------------------
// Real tokenizers against the Rust library.

class HfTokenizerReference : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    texts_ = lines_of(kShared + "/data/wikitext2/wiki.test.raw");
    std::vector<fs::path> essays, babi;
    for (const auto& e : fs::directory_iterator(kShared + "/data/needle_haystack/PaulGrahamEssays")) essays.push_back(e.path());
    for (const auto& e : fs::directory_iterator(kShared + "/data/babi/en_test")) babi.push_back(e.path());
    std::sort(essays.begin(), essays.end());
    std::sort(babi.begin(), babi.end());
    for (const auto& p : essays) for (auto& l : lines_of(p.string())) texts_.push_back(std::move(l));
    for (const auto& p : babi) for (auto& l : lines_of(p.string(), 150)) texts_.push_back(std::move(l));
    for (auto& e : edge_cases()) texts_.push_back(std::move(e));
    special_ = {"Hello world", "", "<|im_start|>user\nHi<|im_end|>", "  spaced  ", "e\xCC\x81", "<|begin_of_text|>x"};
  }

  /// The library's ids for `name` (qwen3 / llama3), computed once per process.
  static const json& reference(const std::string& name) {
    static std::map<std::string, json> cache;
    auto it = cache.find(name);
    if (it != cache.end()) return it->second;
    json input{{"tokenizers", json::array({{{"name", name}, {"file", kShared + "/data/tokenizers/" + name + "/tokenizer.json"}}})},
               {"texts_b64", b64_list(texts_)},
               {"special_b64", b64_list(special_)},
               {"want_text", true}};
    return cache[name] = rust_reference("ref_" + name, input);
  }

  static void compare(const std::string& name, bool nfc) {
    ASSERT_TRUE(python_ready("tokenizers"));
    const json& ref = reference(name);
    ASSERT_TRUE(ref.is_object());
    ASSERT_FALSE(ref["results"][name].contains("error")) << ref["results"][name]["error"];
    auto tok_ptr = load_hf_tokenizer(kShared + "/data/tokenizers/" + name);
    const auto& tok = dynamic_cast<const HfTokenizer&>(*tok_ptr);
    std::size_t tokens = 0;
    int failures = compare_ids(name, tok, texts_, ref["results"][name]["ids"], false, &tokens);
    failures += compare_ids(name, tok, special_, ref["results"][name]["special_ids"], true);
    for (std::size_t i = 0; i < texts_.size(); ++i) {
      const std::string want = ref[nfc ? "nfc" : "valid"][i].get<std::string>();
      const std::string back = decode_all(tok, tok.encode_hf(texts_[i], false));
      if (back != want && failures++ < 5) {
        ADD_FAILURE() << name << " text " << i << ": decode(encode(x)) = " << json(back).dump() << " != " << json(want).dump();
      }
    }
    EXPECT_EQ(failures, 0) << name << ": mismatches over " << texts_.size() << " texts (tokenizers "
                           << ref["tokenizers_version"] << ")";
    EXPECT_GT(tokens, 400000u);  // the real data really went through
  }

  static std::vector<std::string> texts_, special_;
};
std::vector<std::string> HfTokenizerReference::texts_, HfTokenizerReference::special_;

TEST_F(HfTokenizerReference, Qwen3MatchesRustTokenizersAndRoundTrips) { compare("qwen3", true); }
TEST_F(HfTokenizerReference, Llama3MatchesRustTokenizersAndRoundTrips) { compare("llama3", false); }

// Invalid UTF-8 becomes U+FFFD exactly as Python decodes it; NFC as the library's NFC normalizer.
TEST_F(HfTokenizerReference, ReplacementAndNfcMatchTheLibrary) {
  ASSERT_TRUE(python_ready("tokenizers"));
  const json& ref = reference("qwen3");
  ASSERT_TRUE(ref.is_object());
  ASSERT_EQ(ref["valid"].size(), texts_.size());
  int bad = 0;
  for (std::size_t i = 0; i < texts_.size(); ++i) {
    const std::string valid = utf8::to_valid(texts_[i]);
    if (valid != ref["valid"][i].get<std::string>() && bad++ < 5) {
      ADD_FAILURE() << "U+FFFD replacement differs for text " << i << " " << json(valid).dump() << " vs "
                    << ref["valid"][i].dump();
    }
    if (nfc_normalize(valid) != ref["nfc"][i].get<std::string>() && bad++ < 5) {
      ADD_FAILURE() << "NFC differs for text " << i << " " << json(valid).dump();
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---------------------------------------------------------------------------------------------
// Synthetic tokenizer.json files, one feature each, against the Rust library.

json added_token(int id, const std::string& content, bool special, bool normalized, bool lstrip = false,
                 bool rstrip = false, bool single_word = false) {
  return {{"id", id}, {"content", content}, {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

json tokenizer_json(const json& model, const json& pre, const json& normalizer = nullptr,
                    const json& added = json::array(), const json& post = nullptr, const json& decoder = nullptr) {
  return {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", added},
          {"normalizer", normalizer}, {"pre_tokenizer", pre}, {"post_processor", post}, {"decoder", decoder},
          {"model", model}};
}

json bpe(const json& vocab, const json& merges, const json& extra = json::object()) {
  json m{{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"continuing_subword_prefix", nullptr},
         {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"ignore_merges", false},
         {"vocab", vocab}, {"merges", merges}};
  for (auto it = extra.begin(); it != extra.end(); ++it) m[it.key()] = it.value();
  return m;
}

/// Byte-level vocabulary: the 256 byte symbols (ids 0..255), then at, cat, Ġcat, ĠĠ, 12.
json byte_level_vocab() {
  json v = json::object();
  std::vector<std::pair<std::uint32_t, int>> cps;
  for (int b = 0; b < 256; ++b) cps.emplace_back(byte_to_unicode(static_cast<unsigned char>(b)), 0);
  std::sort(cps.begin(), cps.end());
  int id = 0;
  for (auto& [cp, unused] : cps) v[utf8::encode(cp)] = id++;
  for (const char* t : {"at", "cat", "\xC4\xA0" "cat", "\xC4\xA0\xC4\xA0", "12"}) v[t] = id++;
  return v;
}
json byte_level_merges() {
  return json::array({"a t", "c at", "\xC4\xA0 cat", "\xC4\xA0 \xC4\xA0", "1 2"});
}
json byte_level_pre(bool add_prefix_space = false, bool use_regex = true) {
  return {{"type", "ByteLevel"}, {"add_prefix_space", add_prefix_space}, {"trim_offsets", true}, {"use_regex", use_regex}};
}

/// A character vocabulary for Metaspace tokenizers: printable ASCII but ' ', U+2581, then
/// ▁▁, ▁H, ey, ▁Hey, <unk>.
json metaspace_vocab() {
  json v = json::object();
  int id = 0;
  v["<unk>"] = id++;
  for (int c = 0x21; c < 0x7F; ++c) v[std::string(1, static_cast<char>(c))] = id++;
  v["\n"] = id++;
  v[kMeta] = id++;
  for (std::string t : {kMeta + kMeta, kMeta + "H", std::string("ey"), kMeta + "Hey"}) v[t] = id++;
  return v;
}
json metaspace_merges() { return json::array({kMeta + " " + kMeta, kMeta + " H", "e y", kMeta + "H ey"}); }

json metaspace_pre(const json& fields) {
  json p{{"type", "Metaspace"}};
  for (auto it = fields.begin(); it != fields.end(); ++it) p[it.key()] = it.value();
  return p;
}

std::string fmt_flags(int f) {
  std::string n = "added";
  if (f & 1) n += "_single_word";
  if (f & 2) n += "_lstrip";
  if (f & 4) n += "_rstrip";
  if (f & 8) n += "_normalized";
  if (f & 16) n += "_special";
  return f == 0 ? "added_plain" : n;
}

struct SyntheticCase {
  std::string name;
  json tokenizer;
};

std::vector<SyntheticCase> synthetic_cases() {
  std::vector<SyntheticCase> cases;
  const json sep = json::array({added_token(0, "<s>", true, false)});  // id as the library gives it below
  // Metaspace: split x prepend scheme, legacy add_prefix_space, default split, after an added token.
  for (bool split : {true, false}) {
    for (const char* scheme : {"always", "first", "never"}) {
      const std::string n = std::string("metaspace_") + scheme + (split ? "_split" : "_nosplit");
      cases.push_back({n, tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                         metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}}))});
      cases.push_back({n + "_added", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                    metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", scheme}, {"split", split}}),
                                                    nullptr, sep)});
    }
  }
  cases.push_back({"metaspace_default_split", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                             metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", "first"}}))});
  cases.push_back({"metaspace_legacy_add_prefix_space", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                                       metaspace_pre({{"replacement", kMeta}, {"add_prefix_space", true}}))});
  cases.push_back({"metaspace_legacy_no_prefix", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                                metaspace_pre({{"replacement", kMeta}, {"add_prefix_space", false}, {"prepend_scheme", "never"}}))});
  cases.push_back({"metaspace_after_split_first",
                   tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                  {{"type", "Sequence"},
                                   {"pretokenizers", json::array({{{"type", "Split"}, {"pattern", {{"String", ","}}}, {"behavior", "Isolated"}, {"invert", false}},
                                                                  metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", "first"}, {"split", true}})})}})});
  cases.push_back({"metaspace_unk_fused", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges(), {{"unk_token", "<unk>"}, {"fuse_unk", true}}),
                                                         metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", "always"}, {"split", true}}))});
  // Refused by the library (and so by us): no replacement; add_prefix_space false with "always".
  cases.push_back({"refused_metaspace_no_replacement", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                                      metaspace_pre({{"prepend_scheme", "always"}}))});
  cases.push_back({"refused_metaspace_prefix_mismatch", tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()),
                                                                       metaspace_pre({{"replacement", kMeta}, {"add_prefix_space", false}}))});

  // BPE unknown characters: fuse_unk on/off without byte fallback; byte fallback with some
  // <0xNN> tokens missing; merges that involve <unk> and byte tokens; no unk token.
  {
    json v{{"<unk>", 0}, {"a", 1}, {"b", 2}, {"c", 3}, {"ab", 4}, {"<unk>a", 5}, {"<0xC3>", 6}, {"<0xA9>", 7},
           {"<0xC3><0xA9>", 8}, {"b<unk>", 9}};
    const json merges = json::array({"a b", "<unk> a", "<0xC3> <0xA9>", "b <unk>"});
    const json split_space{{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}, {"invert", false}};
    for (bool fuse : {false, true}) {
      for (bool fallback : {false, true}) {
        cases.push_back({std::string("bpe_unk") + (fuse ? "_fused" : "_unfused") + (fallback ? "_bytefallback" : ""),
                         tokenizer_json(bpe(v, merges, {{"unk_token", "<unk>"}, {"fuse_unk", fuse}, {"byte_fallback", fallback}}), split_space)});
      }
    }
    cases.push_back({"bpe_no_unk", tokenizer_json(bpe(v, merges, {{"fuse_unk", true}}), split_space)});
    json bad = bpe(v, merges, {{"unk_token", "<missing>"}});
    cases.push_back({"refused_bpe_unk_not_in_vocab", tokenizer_json(bad, split_space)});
  }

  // Added tokens: every combination of the five flags, on a byte-level tokenizer whose normalizer
  // changes text (NFC, then C -> c), for "cat" (also in the model vocabulary) and "<m>".
  const json norm{{"type", "Sequence"},
                  {"normalizers", json::array({{{"type", "NFC"}},
                                               {{"type", "Replace"}, {"pattern", {{"String", "C"}}}, {"content", "c"}}})}};
  for (int f = 0; f < 32; ++f) {
    const bool single_word = f & 1, lstrip = f & 2, rstrip = f & 4, normalized = f & 8, special = f & 16;
    const json added = json::array({added_token(261, "cat", special, normalized, lstrip, rstrip, single_word),
                                     added_token(262, "<m>", special, normalized, lstrip, rstrip, single_word)});
    cases.push_back({fmt_flags(f), tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), norm, added)});
  }
  // Mixed flags in one vocabulary (raw and normalized matches interleaved), overlapping contents.
  cases.push_back({"added_mixed",
                   tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), norm,
                                  json::array({added_token(261, "<m>", true, false, true, false, false),
                                               added_token(262, "cat", false, true, false, true, true),
                                               added_token(263, "<m>cat", false, true, false, false, false),
                                               added_token(264, "at<", true, false, false, false, false),
                                               added_token(265, " ", false, false, false, false, false)}))});
  // The library's id rule: file ids ignored, a repeated content keeps its first id, empty ignored.
  cases.push_back({"added_ids",
                   tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), nullptr,
                                  json::array({added_token(999, "<z>", true, false), added_token(5, "<y>", true, false),
                                               added_token(300, "", true, false), added_token(7, "<z>", false, true, true, true),
                                               added_token(3, "at", true, false)}))});

  // Split: every behavior, with and without invert; \s is Unicode White_Space.
  for (const char* behavior : {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"}) {
    for (bool invert : {false, true}) {
      json split{{"type", "Split"}, {"pattern", {{"Regex", "\\s|[0-9]"}}}, {"behavior", behavior}, {"invert", invert}};
      cases.push_back({std::string("split_") + behavior + (invert ? "_invert" : ""),
                       tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()),
                                      {{"type", "Sequence"}, {"pretokenizers", json::array({split, byte_level_pre(false, false)})}})});
    }
  }
  cases.push_back({"bytelevel_prefix_space", tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(true))});
  cases.push_back({"bytelevel_ignore_merges", tokenizer_json(bpe(byte_level_vocab(), json::array({"a t"}), {{"ignore_merges", true}}),
                                                             byte_level_pre())});
  // TemplateProcessing: ids from its special_tokens map (two for one token), inside a Sequence.
  {
    const json tpl{{"type", "TemplateProcessing"},
                   {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                           {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                           {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                   {"pair", json::array({{{"Sequence", {{"id", "A"}, {"type_id", 0}}}}, {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}})},
                   {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {261, 40}}, {"tokens", {"<s>", "I"}}}},
                                       {"</s>", {{"id", "</s>"}, {"ids", {262}}, {"tokens", {"</s>"}}}}}}};
    cases.push_back({"template", tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), nullptr,
                                                json::array({added_token(261, "<s>", true, false), added_token(262, "</s>", true, false)}),
                                                {{"type", "Sequence"}, {"processors", json::array({{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", true}}, tpl})}})});
  }
  // Prepend only on non-empty text; Replace may empty it first.
  cases.push_back({"prepend_after_replace",
                   tokenizer_json(bpe(metaspace_vocab(), metaspace_merges()), nullptr,
                                  {{"type", "Sequence"},
                                   {"normalizers", json::array({{{"type", "Replace"}, {"pattern", {{"String", "x"}}}, {"content", ""}},
                                                                {{"type", "Prepend"}, {"prepend", kMeta}},
                                                                {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kMeta}}})}},
                                  json::array({added_token(0, "<s>", true, false), added_token(0, "</s>", false, true)}))});
  return cases;
}


/// Texts for the synthetic tokenizers: each feature's own cases plus the general edge cases.
std::vector<std::string> synthetic_texts() {
  std::vector<std::string> t = {
      // Metaspace
      "Hey   friend!", "Hey friend", " Hey", "  Hey", "Hey ", kMeta + "Hey", kMeta + kMeta + " x", "a,b, c ,d",
      "<s>Hey", "Hey<s> friend", " <s> Hey", "<s><s>", "x <s>", "H\n e y",
      // unknown characters
      "abxyzab", "xxa", "axxxb", "xa xb bx", "\xC3\xA9\xC3\xA9", "a \xC3\xA9 b", "x\xC3\xA9x", "\xC3\xA8\xC3\xA9x", "bx", "bxa",
      // added tokens
      "cat", " cat ", "concatenate", "the cat sat", "cat<m>cat", "  <m>  x", "<m><m>", "\xC2\xA0" "cat\xE3\x80\x80", "Cat",
      "CAT", "catcat", "_cat_", "cat1", "1cat", "\xC2\xB2" "cat\xC2\xB2", "e\xCC\x81" "cat", "cat\xCC\x81", "a <m> b",
      "a\t<m>\n b", "\xC2\x85<m>\xC2\x85", "\xEF\xBB\xBF<m>\xEF\xBB\xBF", "<m>cat<m>", "x<m>y", "<mcat>", "<<m>>",
      "cat cat  cat   cat", "<m>Cat", "at<m>", "\xE2\x85\xA0" "cat", "cat\xE2\x80\x8D", "<z><y>at", "<z> <y> at",
      // split
      "a1b22c 3 d\t\te", "  x  ", "12 12 123", "\xE1\xA0\x8E" "a\xC2\x85" "b\xEF\xBB\xBF" "c",
      // prepend / replace
      "xxx", "axb", "x a", "x",
  };
  for (auto& e : edge_cases()) t.push_back(std::move(e));
  return t;
}

TEST(HfTokenizerSynthetic, EveryFeatureMatchesRustTokenizers) {
  ASSERT_TRUE(python_ready("tokenizers"));
  const std::vector<SyntheticCase> cases = synthetic_cases();
  const std::vector<std::string> texts = synthetic_texts();
  const std::vector<std::string> special = {"cat", "", "a<s>b", "<m> x"};
  json input{{"tokenizers", json::array()}, {"texts_b64", b64_list(texts)}, {"special_b64", b64_list(special)}};
  for (const auto& c : cases) {
    const fs::path f = tmp_dir() / ("syn_" + c.name + ".json");
    write_text(f, c.tokenizer.dump());
    input["tokenizers"].push_back({{"name", c.name}, {"file", f.string()}});
  }
  const json ref = rust_reference("synthetic", input);
  ASSERT_TRUE(ref.is_object());
  int refused = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const json& r = ref["results"][c.name];
    const std::string f = (tmp_dir() / ("syn_" + c.name + ".json")).string();
    if (r.contains("error")) {
      // The library refuses the file (or an encode): so must we, with an Error.
      ++refused;
      EXPECT_EQ(c.name.rfind("refused_", 0), 0u) << "the library refused " << c.name << ": " << r["error"];
      EXPECT_THROW(
          {
            HfTokenizer tok(f, "");
            for (const auto& t : texts) tok.encode_hf(t, false);
          },
          Error)
          << "the library says: " << r["error"];
      continue;
    }
    EXPECT_NE(c.name.rfind("refused_", 0), 0u) << "the library accepted " << c.name;
    HfTokenizer tok(f, "");
    EXPECT_EQ(compare_ids(c.name, tok, texts, r["ids"], false), 0);
    EXPECT_EQ(compare_ids(c.name, tok, special, r["special_ids"], true), 0);
  }
  EXPECT_EQ(refused, 3);
}

// The hand-worked heart of issue 8 (Metaspace split), 9 (fuse_unk) and 11 (single_word), so that a
// regression names the feature even without the reference.
TEST(HfTokenizerSynthetic, HandWorkedMetaspaceFuseUnkSingleWord) {
  auto load = [](const std::string& name, const json& j) {
    const fs::path f = tmp_dir() / (name + ".json");
    write_text(f, j.dump());
    return std::make_unique<HfTokenizer>(f.string(), "");
  };
  const json v = metaspace_vocab();
  auto split = load("hw_split", tokenizer_json(bpe(v, metaspace_merges()), metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", "always"}})));
  auto nosplit = load("hw_nosplit", tokenizer_json(bpe(v, metaspace_merges()),
                                                   metaspace_pre({{"replacement", kMeta}, {"prepend_scheme", "always"}, {"split", false}})));
  const int m = v[kMeta].get<int>(), mm = v[kMeta + kMeta].get<int>(), hey = v[kMeta + "Hey"].get<int>();
  // "Hey   friend": split gives ▁Hey ▁ ▁ ▁friend (three lone ▁); without split ▁▁ merges first.
  const std::vector<int> a = split->encode_hf("Hey   f", false), b = nosplit->encode_hf("Hey   f", false);
  EXPECT_EQ(a, (std::vector<int>{hey, m, m, m, v["f"].get<int>()}));
  EXPECT_EQ(b, (std::vector<int>{hey, mm, m, v["f"].get<int>()}));

  json uv{{"<unk>", 0}, {"a", 1}};
  auto fused = load("hw_fused", tokenizer_json(bpe(uv, json::array(), {{"unk_token", "<unk>"}, {"fuse_unk", true}}), nullptr));
  auto unfused = load("hw_unfused", tokenizer_json(bpe(uv, json::array(), {{"unk_token", "<unk>"}}), nullptr));
  EXPECT_EQ(fused->encode_hf("axyza", false), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(unfused->encode_hf("axyza", false), (std::vector<int>{1, 0, 0, 0, 1}));

  auto sw = load("hw_single_word", tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), nullptr,
                                                  json::array({added_token(0, "dog", false, false, false, false, true)})));
  const int dog = sw->token_id("dog");
  EXPECT_EQ(dog, 261);  // the next id after the 261-entry model vocabulary
  const std::vector<int> in_word = sw->encode_hf("hotdogs", false), alone = sw->encode_hf("a dog.", false);
  EXPECT_EQ(std::count(in_word.begin(), in_word.end(), dog), 0);
  EXPECT_EQ(std::count(alone.begin(), alone.end(), dog), 1);
}

// encode(text, true) against transformers' AutoTokenizer.encode(text) (add_special_tokens=True):
// the BOS rule of hf_tokenizer.h on synthetic folders, and the real Qwen3 / Llama 3 folders.
TEST(HfTokenizerSynthetic, BosRuleMatchesTransformers) {
  ASSERT_TRUE(python_ready("tokenizers transformers"));
  const json added = json::array({added_token(261, "<s>", true, false), added_token(262, "</s>", true, false)});
  auto tpl = [](bool bos, bool eos) {
    json single = json::array();
    json specials = json::object();
    if (bos) {
      single.push_back({{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}});
      specials["<s>"] = {{"id", "<s>"}, {"ids", {261}}, {"tokens", {"<s>"}}};
    }
    single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
    if (eos) {
      single.push_back({{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}});
      specials["</s>"] = {{"id", "</s>"}, {"ids", {262}}, {"tokens", {"</s>"}}};
    }
    return json{{"type", "TemplateProcessing"}, {"single", single}, {"pair", single}, {"special_tokens", specials}};
  };
  const json base{{"tokenizer_class", "PreTrainedTokenizerFast"}, {"bos_token", "<s>"}, {"eos_token", "</s>"}};
  struct Folder {
    std::string name;
    json post, config;
    bool trailing_eos;  // the template appends </s>, which encode() leaves out
  };
  auto with = [&](const json& extra) {
    json c = base;
    for (auto it = extra.begin(); it != extra.end(); ++it) c[it.key()] = it.value();
    return c;
  };
  const std::vector<Folder> folders = {
      {"bos_template", tpl(true, false), base, false},
      {"bos_template_add_bos_false", tpl(true, false), with({{"add_bos_token", false}}), false},
      {"plain_template_add_bos_true", tpl(false, false), with({{"add_bos_token", true}}), false},
      {"plain_template", tpl(false, false), base, false},
      {"no_post_processor", nullptr, base, false},
      {"no_post_processor_add_bos_true", nullptr, with({{"add_bos_token", true}, {"add_eos_token", true}}), false},
      {"bos_eos_template", tpl(true, true), base, true},
      {"bos_template_no_bos_token", tpl(true, false), json{{"tokenizer_class", "PreTrainedTokenizerFast"}}, false},
  };
  const std::vector<std::string> texts = {"cat", "", "a cat sat", "<s>x", " leading"};
  json input{{"texts_b64", b64_list(texts)}, {"transformers", json::array()}};
  for (const auto& f : folders) {
    const fs::path d = tmp_dir() / ("bos_" + f.name);
    fs::create_directories(d);
    write_text(d / "tokenizer.json",
               tokenizer_json(bpe(byte_level_vocab(), byte_level_merges()), byte_level_pre(), nullptr, added, f.post).dump());
    write_text(d / "tokenizer_config.json", f.config.dump());
    input["transformers"].push_back({{"name", f.name}, {"folder", d.string()}});
  }
  std::vector<std::string> real_texts = lines_of(kShared + "/data/wikitext2/wiki.test.raw", 200);
  const json ref = rust_reference("bos_rule", input);
  ASSERT_TRUE(ref.is_object());
  for (const auto& f : folders) {
    SCOPED_TRACE(f.name);
    const json& r = ref["transformers"][f.name];
    ASSERT_FALSE(r.contains("error")) << r["error"];
    auto tok = load_hf_tokenizer((tmp_dir() / ("bos_" + f.name)).string());
    for (std::size_t i = 0; i < texts.size(); ++i) {
      std::vector<int> want = r["ids"][i].get<std::vector<int>>();
      if (f.trailing_eos) {
        ASSERT_FALSE(want.empty());
        EXPECT_EQ(want.back(), 262);
        want.pop_back();
      }
      EXPECT_EQ(tok->encode(texts[i], true), want) << "text " << json(texts[i]).dump();
    }
  }
  json real_input{{"texts_b64", b64_list(real_texts)}, {"transformers", json::array()}};
  for (const char* real : {"qwen3", "llama3"}) real_input["transformers"].push_back({{"name", real}, {"folder", kShared + "/data/tokenizers/" + real}});
  const json real_ref = rust_reference("bos_rule_real", real_input);
  ASSERT_TRUE(real_ref.is_object());
  for (const char* real : {"qwen3", "llama3"}) {
    const json& r = real_ref["transformers"][real];
    ASSERT_FALSE(r.contains("error")) << real << ": " << r["error"];
    auto tok = load_hf_tokenizer(kShared + "/data/tokenizers/" + real);
    int bad = 0;
    for (std::size_t i = 0; i < real_texts.size(); ++i) {
      if (tok->encode(real_texts[i], true) != r["ids"][i].get<std::vector<int>>() && bad++ < 3) {
        ADD_FAILURE() << real << " line " << i << " " << json(real_texts[i]).dump() << "\n ours: "
                      << ids_str(tok->encode(real_texts[i], true)) << "\n   HF: " << ids_str(r["ids"][i].get<std::vector<int>>());
      }
    }
    EXPECT_EQ(bad, 0) << real;
  }
}

TEST(HfTokenizer, RealTokenizersMetadata) {
  auto q = load_hf_tokenizer(kQwen3 + "/tokenizer.json");
  EXPECT_EQ(q->vocab_size(), 151669);  // 151,643 BPE entries + 26 added tokens
  EXPECT_EQ(q->bos_id(), -1);          // Qwen3 has no BOS token
  EXPECT_EQ(q->eos_id(), 151645);      // <|im_end|> (tokenizer_config.json eos_token)
  EXPECT_EQ(q->encode("Hello", true), q->encode("Hello", false));
  auto l = load_hf_tokenizer(kLlama3);
  EXPECT_EQ(l->vocab_size(), 128256);
  EXPECT_EQ(l->bos_id(), 128000);  // <|begin_of_text|>
  EXPECT_EQ(l->eos_id(), 128001);  // <|end_of_text|>
  // This tokenizer.json's post-processor is ByteLevel alone (no BOS template), so, as
  // transformers 5's AutoTokenizer.encode, encode(text, true) adds no <|begin_of_text|>.
  EXPECT_FALSE(l->adds_bos());
  const std::vector<int> ids = l->encode("Hello world", true);
  EXPECT_EQ(ids, (std::vector<int>{9906, 1917}));
  EXPECT_EQ(l->piece(ids[1]), "\xC4\xA0world");  // "Ġworld"
  EXPECT_EQ(l->decode(ids), "Hello world");
  EXPECT_THROW(l->piece(128256), Error);
}

TEST(HfTokenizer, ByteToUnicodeMap) {
  EXPECT_EQ(byte_to_unicode(' '), 0x120u);   // 'Ġ'
  EXPECT_EQ(byte_to_unicode('\n'), 0x10Au);  // 'Ċ'
  EXPECT_EQ(byte_to_unicode(0), 0x100u);
  EXPECT_EQ(byte_to_unicode('A'), static_cast<std::uint32_t>('A'));
  EXPECT_EQ(byte_to_unicode(0x7F), 0x121u);  // 33 bytes 0x00..0x20 come first
  EXPECT_EQ(byte_to_unicode(0xAD), 0x143u);  // the last unprintable byte
  EXPECT_EQ(byte_to_unicode(0xFF), 0xFFu);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(unicode_to_byte(byte_to_unicode(static_cast<unsigned char>(b))), b);
  EXPECT_EQ(unicode_to_byte(0x144), -1);
}

TEST(HfTokenizer, NfcHandWorked) {
  EXPECT_EQ(nfc_normalize("e\xCC\x81"), "\xC3\xA9");                        // e + acute -> é
  EXPECT_EQ(nfc_normalize("\xE2\x84\xAB"), "\xC3\x85");                     // Angstrom sign -> Å
  EXPECT_EQ(nfc_normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // jamo -> 각
  EXPECT_EQ(nfc_normalize("\xEA\xB0\x81"), "\xEA\xB0\x81");
  EXPECT_EQ(nfc_normalize("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");      // reordered by class
  EXPECT_EQ(nfc_normalize("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");     // excluded composite
  EXPECT_EQ(nfc_normalize("a\xFF" "e\xCC\x81"), "a\xFF\xC3\xA9");            // invalid byte kept
  EXPECT_EQ(nfc_normalize("plain ascii"), "plain ascii");
}

TEST(HfTokenizer, WhiteSpaceRewriteAndWordCharacters) {
  UnicodeRegex re(R"(\s+)", "test");
  // \s is Unicode White_Space as in Oniguruma: U+0085 yes; U+FEFF and U+180E (PCRE2's own \s) no.
  const std::string s = "a\xEF\xBB\xBF" "b\xC2\x85" "c\xE1\xA0\x8E" "d";
  const auto m = re.find_all(s);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(m[0], (std::pair<std::size_t, std::size_t>{5, 7}));
  EXPECT_EQ(white_space_pattern("[^\\s\\p{L}]\\S"), "[^\\p{White_Space}\\p{L}]\\P{White_Space}");
  // Rust regex's \w: letters (also Nl), marks, decimal digits, connectors, ZWJ; not No or symbols.
  for (std::uint32_t c : {0x61u, 0x5Fu, 0x39u, 0x301u, 0x2160u, 0x200Du, 0x661u}) EXPECT_TRUE(is_word_char(c)) << c;
  for (std::uint32_t c : {0x20u, 0xB2u, 0x2Du, 0x1F642u, 0xA0u}) EXPECT_FALSE(is_word_char(c)) << c;
  // U+FFFD replacement: maximal subparts.
  EXPECT_EQ(utf8::to_valid("a\xE2\x82" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(utf8::to_valid("\xF0\x9F\x98"), "\xEF\xBF\xBD");
  EXPECT_EQ(utf8::to_valid("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::to_valid("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8::to_valid("ok \xE2\x82\xAC"), "ok \xE2\x82\xAC");
}

/// A tiny tokenizer.json, hand-worked: vocab a b c ab bc abc, Split on ' ' (Removed).
json tiny_tokenizer(const json& merges) {
  return json{{"version", "1.0"},
              {"added_tokens", json::array({{{"id", 6}, {"content", "<X>"}, {"special", true}, {"normalized", false}}})},
              {"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "Split"}, {"pattern", {{"String", " "}}}, {"behavior", "Removed"}, {"invert", false}}},
              {"post_processor", nullptr},
              {"decoder", nullptr},
              {"model",
               {{"type", "BPE"},
                {"vocab", {{"a", 0}, {"b", 1}, {"c", 2}, {"ab", 3}, {"bc", 4}, {"abc", 5}}},
                {"merges", merges}}}};
}

TEST(HfTokenizer, HandWorkedMergesBothMergeForms) {
  const fs::path p1 = tmp_dir() / "tiny_str.json", p2 = tmp_dir() / "tiny_arr.json", p3 = tmp_dir() / "tiny_bc.json";
  write_text(p1, tiny_tokenizer(json::array({"a b", "b c", "ab c"})).dump());
  write_text(p2, tiny_tokenizer(json::array({json::array({"a", "b"}), json::array({"b", "c"}), json::array({"ab", "c"})})).dump());
  // "b c" first: abc -> a|bc, and there is no (a, bc) merge, so it stays two tokens.
  write_text(p3, tiny_tokenizer(json::array({"b c", "a b", "ab c"})).dump());
  HfTokenizer t1(p1.string(), ""), t2(p2.string(), ""), t3(p3.string(), "");
  // "abc": (a,b) rank 0 -> [ab][c]; (ab,c) rank 2 -> [abc]. "cab": c|ab. "<X>" is an added token.
  const std::vector<int> want{5, 2, 3, 6, 1};
  EXPECT_EQ(t1.encode_hf("abc cab<X>b", true), want);
  EXPECT_EQ(t2.encode_hf("abc cab<X>b", true), want);
  EXPECT_EQ(t3.encode_hf("abc", false), (std::vector<int>{0, 4}));
  EXPECT_EQ(t3.encode_hf("bcab", false), (std::vector<int>{4, 3}));
  EXPECT_EQ(t1.vocab_size(), 7);
  EXPECT_EQ(t1.bos_id(), -1);
  EXPECT_TRUE(t1.is_special(6));
  EXPECT_FALSE(t1.is_special(5));
}

TEST(HfTokenizer, UnsupportedAndBadFilesThrow) {
  for (const char* type : {"WordPiece", "Unigram"}) {
    json j = tiny_tokenizer(json::array());
    j["model"]["type"] = type;
    const fs::path p = tmp_dir() / (std::string("bad_") + type + ".json");
    write_text(p, j.dump());
    try {
      load_hf_tokenizer(p.string());
      ADD_FAILURE() << "no error for " << type;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p.string()), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(type), std::string::npos) << e.what();
    }
  }
  json j = tiny_tokenizer(json::array({"a x"}));
  const fs::path bad_merge = tmp_dir() / "bad_merge.json";
  write_text(bad_merge, j.dump());
  EXPECT_THROW(load_hf_tokenizer(bad_merge.string()), Error);
  const fs::path not_json = tmp_dir() / "not_json.json";
  write_text(not_json, "{\"model\": ");
  EXPECT_THROW(load_hf_tokenizer(not_json.string()), Error);
  EXPECT_THROW(load_hf_tokenizer(tmp_dir().string() + "/missing/tokenizer.json"), Error);
  json pre = tiny_tokenizer(json::array());
  pre["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  const fs::path bad_pre = tmp_dir() / "bad_pre.json";
  write_text(bad_pre, pre.dump());
  EXPECT_THROW(load_hf_tokenizer(bad_pre.string()), Error);
}

/// SentencePiece-style BPE (byte_fallback) tokenizer.json files derived from tok512.bin by
/// tests/js/spm_tokenizer_json.mjs (Node), against the Rust library.
TEST(HfTokenizer, SentencePieceStyleMatchesRustTokenizers) {
  ASSERT_TRUE(node_ready());
  ASSERT_TRUE(python_ready("tokenizers"));
  std::vector<std::string> texts = lines_of(kShared + "/data/tinystories/tinystories_val_head.txt", 400);
  for (auto& e : edge_cases()) texts.push_back(std::move(e));
  const std::vector<std::string> special{"Lily saw a cat.", "", " leading", "<s>x"};
  std::string cmd;
  json input{{"tokenizers", json::array()}, {"texts_b64", b64_list(texts)}, {"special_b64", b64_list(special)}};
  for (const char* variant : {"legacy", "metaspace"}) {
    const std::string tj = (tmp_dir() / (std::string("spm_") + variant + ".json")).string();
    fs::remove(tj);
    cmd += "node '" + kJsDir + "/spm_tokenizer_json.mjs' '" + kShared + "/models/stories260K/tok512.bin' 512 " + variant +
           " '" + tj + "' > '" + tj + ".log' 2>&1 & ";
    input["tokenizers"].push_back({{"name", variant}, {"file", tj}});
  }
  run_shell("( " + cmd + "wait )");
  for (const char* variant : {"legacy", "metaspace"}) {
    const std::string tj = (tmp_dir() / (std::string("spm_") + variant + ".json")).string();
    ASSERT_TRUE(fs::exists(tj)) << variant << ": node said: " << read_text(tj + ".log");
  }
  const json all = rust_reference("spm", input);
  ASSERT_TRUE(all.is_object());
  auto spm = read_llama2c_tokenizer(kShared + "/models/stories260K/tok512.bin", 512);
  for (const char* variant : {"legacy", "metaspace"}) {
    const std::string tj = (tmp_dir() / (std::string("spm_") + variant + ".json")).string();
    const json& ref = all["results"][variant];
    ASSERT_FALSE(ref.contains("error")) << variant << ": " << ref["error"];
    HfTokenizer tok(tj, "");
    EXPECT_EQ(tok.bos_id(), 1);
    int failures = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int> ids = tok.encode_hf(texts[i], false);
      if (ids != ref["ids"][i].get<std::vector<int>>() && failures++ < 5) {
        ADD_FAILURE() << variant << " text " << i << " " << json(utf8::to_valid(texts[i])).dump() << "\n ours: " << ids_str(ids)
                      << "\n Rust: " << ids_str(ref["ids"][i].get<std::vector<int>>());
      }
      // Byte fallback makes text round-trip, except where HF's pipeline itself is lossy: a space
      // after an added token (the normalizer prepends U+2581 to every section) and, for
      // Metaspace (prepend_scheme "first"), a leading space (the decoder strips one).
      const bool lossy = texts[i].find("<s>") != std::string::npos || texts[i].find("</s>") != std::string::npos ||
                         texts[i].find("<unk>") != std::string::npos ||
                         (std::string(variant) == "metaspace" && !texts[i].empty() && texts[i][0] == ' ');
      if (!lossy && decode_all(tok, ids) != utf8::to_valid(texts[i]) && failures++ < 5) {
        ADD_FAILURE() << variant << " text " << i << ": decode(encode(x)) = " << json(decode_all(tok, ids)).dump();
      }
    }
    EXPECT_EQ(failures, 0) << variant;
    for (std::size_t i = 0; i < special.size(); ++i) {
      EXPECT_EQ(tok.encode_hf(special[i], true), ref["special_ids"][i].get<std::vector<int>>()) << variant << " " << special[i];
    }
    // Same vocabulary and merge order as llama2.c's score-greedy SPM encoder: same ids on plain
    // English text (TinyStories lines).
    if (std::string(variant) == "legacy") {
      for (std::size_t i = 0; i < 400 && i < texts.size(); ++i) {
        if (texts[i].empty()) continue;
        EXPECT_EQ(tok.encode(texts[i], true), spm->encode(texts[i], true)) << "TinyStories line " << i;
      }
    }
  }
}

}}  // namespace
}  // namespace kvcompact
