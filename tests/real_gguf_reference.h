// The parts the real-GGUF reference suites share (smollm2_reference_test.cpp,
// gemma3_reference_test.cpp): the model file under KVC_MODELS_DIR, scratch files, WikiText-2
// tokens, and the token-id comparison with llama.cpp on every WikiText-2 test line, the needle
// essays, 3,000 bAbI lines and the edge cases (incl. invalid UTF-8, special tokens in text).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "io/tokenizer.h"
#include "python_ref.h"
#include "tokenizer_cases.h"

namespace kvcompact::testing {

/// One real GGUF file of models/ (scripts/fetch_models.sh) and its scratch-file prefix.
struct RealGguf {
  std::string file;    ///< e.g. "SmolLM2-135M-Instruct.Q4_1.gguf"
  std::string prefix;  ///< e.g. "smollm2"

  /// A per-process scratch path under KVC_TEST_TMP.
  std::string scratch(const std::string& name) const {
    std::filesystem::create_directories(KVC_TEST_TMP);
    return std::string(KVC_TEST_TMP) + "/" + prefix + "_" + std::to_string(::getpid()) + "_" + name;
  }

  /// The model path, or "" with a failure saying how to fetch it.
  std::string model_path() const {
    const std::string p = real_model(file);
    if (p.empty()) ADD_FAILURE() << kModelsDir << "/" << file << " is missing: run `bash scripts/fetch_models.sh`";
    return p;
  }

  /// First `n` tokens of WikiText-2 test as the file's tokenizer encodes it with its specials.
  std::vector<int> wiki_tokens(const Tokenizer& tok, std::size_t n) const {
    std::ifstream in(std::string(KVC_SHARED_DIR) + "/data/wikitext2/wiki.test.raw", std::ios::binary);
    std::string text(std::size_t{64} << 10, '\0');
    in.read(text.data(), static_cast<std::streamsize>(text.size()));
    text.resize(static_cast<std::size_t>(in.gcount()));
    std::vector<int> ids = tok.encode(text, true);
    EXPECT_GE(ids.size(), n);
    ids.resize(std::min(ids.size(), n));
    return ids;
  }
};

/// The file's own tokenizer gives llama.cpp's token ids (llama-cpp-python, vocab only) on every
/// text above, with and without the special tokens; at most 5 mismatches are described.
inline void expect_token_ids_equal_llama_cpp(const RealGguf& m) {
  ASSERT_TRUE(python_ready("llama_cpp"));
  const std::string path = m.model_path();
  ASSERT_FALSE(path.empty());
  const GgufFile file(path);
  const std::unique_ptr<Tokenizer> tokenizer = load_gguf_tokenizer(file);
  std::vector<std::string> texts = lines_of(std::string(KVC_SHARED_DIR) + "/data/wikitext2/wiki.test.raw");
  const std::size_t n_wiki = texts.size();
  std::vector<std::filesystem::path> essays, babi;
  for (const auto& e : std::filesystem::directory_iterator(std::string(KVC_SHARED_DIR) + "/data/needle_haystack/PaulGrahamEssays")) essays.push_back(e.path());
  for (const auto& e : std::filesystem::directory_iterator(std::string(KVC_SHARED_DIR) + "/data/babi/en_test")) babi.push_back(e.path());
  std::sort(essays.begin(), essays.end());
  std::sort(babi.begin(), babi.end());
  for (const auto& p : essays) texts.push_back(slurp(p.string()));
  std::size_t n_babi = 0;
  for (const auto& p : babi) {
    for (auto& l : lines_of(p.string(), 150)) {
      if (n_babi++ < 3000) texts.push_back(std::move(l));
    }
  }
  for (auto& e : edge_cases()) texts.push_back(std::move(e));
  for (auto& e : invalid_utf8_cases()) texts.push_back(std::move(e));
  ASSERT_GE(n_babi, 3000u);

  for (bool add_special : {true, false}) {
    nlohmann::json req = {{"add_special", add_special}, {"texts_hex", nlohmann::json::array()}};
    for (const auto& t : texts) req["texts_hex"].push_back(hex(t));
    const std::string in = m.scratch("tok_in.json"), out = m.scratch("tok_out.json");
    std::ofstream(in) << req.dump();
    ASSERT_EQ(run_python_ref("llama_cpp_tokenize.py", "'" + path + "' '" + in + "'", out), 0) << slurp(out + ".log");
    const nlohmann::json ref = nlohmann::json::parse(slurp(out));
    ASSERT_EQ(ref["ids"].size(), texts.size());
    int mismatches = 0;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const std::vector<int> want = ref["ids"][i].get<std::vector<int>>();
      const std::vector<int> got = tokenizer->encode(texts[i], add_special);
      if (got != want && ++mismatches <= 5) {
        ADD_FAILURE() << "text " << i << (i < n_wiki ? " (WikiText-2 line)" : "") << " add_special=" << add_special
                      << " '" << texts[i].substr(0, 80) << "': kvcompact " << got.size() << " ids, llama.cpp "
                      << want.size();
      }
    }
    EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts";
    std::filesystem::remove(in);
    std::filesystem::remove(out);
    std::filesystem::remove(out + ".log");
  }
}

}  // namespace kvcompact::testing
