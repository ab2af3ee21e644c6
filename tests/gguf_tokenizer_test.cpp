// GGUF vocabularies (io/gguf_tokenizer.h) against llama.cpp (llama-cpp-python, vocab only) on
// copies of the real stories260K GGUF whose tokenizer flags were changed by gguf-py
// (tests/ref/gguf_variant.py): add_space_prefix, add_bos_token, add_eos_token, and control /
// user-defined tokens written in the text (issue: these used to be ignored). Also the errors
// for unknown tokenizer models and pre-tokenizer names.
#include "io/gguf_tokenizer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "python_ref.h"
#include "test_util.h"
#include "tokenizer_cases.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::python_ready;
using testing::run_python_ref;
using testing::slurp;
using testing::hex;

const std::string kShared = KVC_SHARED_DIR;
const std::string kStories = kShared + "/models/stories260K/stories260K.gguf";

std::string scratch(const std::string& name) {
  fs::create_directories(KVC_TEST_TMP);
  return std::string(KVC_TEST_TMP) + "/gguf_tok_" + std::to_string(::getpid()) + "_" + name;
}

/// Writes the stories260K GGUF with `changes` (tests/ref/gguf_variant.py) and returns its path.
std::string variant(const std::string& name, const json& changes) {
  const std::string ch = scratch(name + ".json"), out = scratch(name + ".gguf");
  std::ofstream(ch) << changes.dump();
  EXPECT_EQ(run_python_ref("gguf_variant.py", "'" + kStories + "' '" + out + "' '" + ch + "'", out + ".txt"), 0)
      << slurp(out + ".txt.log");
  return out;
}

std::vector<std::string> texts() {
  std::vector<std::string> t = testing::lines_of(kShared + "/data/tinystories/tinystories_val_head.txt", 300);
  for (auto& e : testing::edge_cases()) t.push_back(std::move(e));
  for (auto& e : testing::invalid_utf8_cases()) t.push_back(std::move(e));
  for (const char* s : {"a<|x|>b", "<|x|><|x|>", " <|x|> spaced <ctl>", "<ctl>Once upon", "x<s>y</s>z", "<s>",
                        "Tom <|x|>and<ctl> Lily", "<|x|", "<ctl"})
    t.emplace_back(s);
  return t;
}

/// Every text through kvcompact and llama.cpp, with add_special true and false.
void expect_same_as_llama_cpp(const std::string& gguf, const std::string& label) {
  const GgufFile file(gguf);
  const std::unique_ptr<Tokenizer> tok = load_gguf_tokenizer(file);
  const std::vector<std::string> t = texts();
  for (bool add_special : {true, false}) {
    json req = {{"add_special", add_special}, {"texts_hex", json::array()}};
    for (const auto& s : t) req["texts_hex"].push_back(hex(s));
    const std::string in = scratch(label + "_in.json"), out = scratch(label + "_out.json");
    std::ofstream(in) << req.dump();
    ASSERT_EQ(run_python_ref("llama_cpp_tokenize.py", "'" + gguf + "' '" + in + "'", out), 0) << slurp(out + ".log");
    const json ref = json::parse(slurp(out));
    int bad = 0;
    for (std::size_t i = 0; i < t.size(); ++i) {
      const auto want = ref["ids"][i].get<std::vector<int>>();
      const auto got = tok->encode(t[i], add_special);
      if (got != want && ++bad <= 3)
        ADD_FAILURE() << label << " add_special=" << add_special << " text '" << t[i].substr(0, 60) << "': "
                      << ::testing::PrintToString(got) << " vs llama.cpp " << ::testing::PrintToString(want);
    }
    EXPECT_EQ(bad, 0) << label << ": " << bad << " of " << t.size() << " texts differ";
  }
}

TEST(GgufTokenizerReference, Stories260KAsIsEqualsLlamaCpp) {
  ASSERT_TRUE(python_ready("llama_cpp gguf"));
  expect_same_as_llama_cpp(kStories, "asis");
}

TEST(GgufTokenizerReference, NoSpacePrefixEqualsLlamaCpp) {
  ASSERT_TRUE(python_ready("llama_cpp gguf"));
  expect_same_as_llama_cpp(variant("nospace", {{"bool", {{"tokenizer.ggml.add_space_prefix", false}}}}), "nospace");
}

TEST(GgufTokenizerReference, BosOffEosOnEqualsLlamaCpp) {
  ASSERT_TRUE(python_ready("llama_cpp gguf"));
  const std::string p = variant(
      "boseos", {{"bool", {{"tokenizer.ggml.add_bos_token", false}, {"tokenizer.ggml.add_eos_token", true}}}});
  expect_same_as_llama_cpp(p, "boseos");
  const GgufFile f(p);
  EXPECT_FALSE(load_gguf_tokenizer(f)->adds_bos());
}

TEST(GgufTokenizerReference, ControlAndUserDefinedTokensInTextEqualLlamaCpp) {
  ASSERT_TRUE(python_ready("llama_cpp gguf"));
  const std::string p = variant("special", {{"append_tokens", {{"<|x|>", 4, 0.0}, {"<ctl>", 3, 0.0}}}});
  expect_same_as_llama_cpp(p, "special");
  const GgufFile f(p);
  const auto tok = load_gguf_tokenizer(f);
  EXPECT_EQ(tok->encode("<|x|>", false), std::vector<int>{512});  // one token, not its pieces
}

TEST(GgufTokenizer, UnknownModelAndPreTokenizerAreErrors) {
  ASSERT_TRUE(python_ready("gguf"));
  const std::string p = variant("bert", {{"string", {{"tokenizer.ggml.model", "bert"}}}});
  const GgufFile f(p);
  testing::expect_error([&] { load_gguf_tokenizer(f); }, {p, "tokenizer.ggml.model", "bert"});
  testing::expect_error([&] { gguf_pre_tokenizer("my-new-pre", "model.gguf"); },
                        {"model.gguf", "tokenizer.ggml.pre", "my-new-pre"});
  EXPECT_EQ(gguf_pre_tokenizer("smollm", "x").regexes.size(), 2u);
  EXPECT_TRUE(gguf_pre_tokenizer("llama-bpe", "x").ignore_merges);
}

}}  // namespace
}  // namespace kvcompact
