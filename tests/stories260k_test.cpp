// End-to-end checks on the real stories260K model against values from outside this code.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "metrics/perplexity.h"
#include "io/text_documents.h"
#include "model/generate.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kGguf = kShared + "/models/stories260K/stories260K.gguf";

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// llama2.c's own test (test_all.py): `run stories260K.bin -z tok512.bin -t 0.0 -n 200`.
TEST(Stories260KReference, GreedyGenerationMatchesLlama2cReference) {
  const std::string expected = read_all(std::string(KVC_SOURCE_DIR) + "/tests/data/llama2c_stories260K_greedy200.txt");
  ASSERT_FALSE(expected.empty());
  for (const std::string& path : {kBin, kGguf}) {
    Model model = load_model(path);
    Transformer transformer(model.config, model.weights);
    Sampler greedy(model.config.vocab_size, 0.0f, 0.9f, 1);
    GenerationResult r = generate(transformer, *model.tokenizer, "", 200, greedy);
    EXPECT_EQ(r.text, expected) << path;
  }
}

// Independent implementation's value (shared/models/SOURCES.md): 1.311 nats/token on the first
// 511 predictions of the TinyStories validation head.
TEST(Stories260KReference, PerplexityOnTinyStoriesHead) {
  Model model = load_model(kBin);
  Transformer transformer(model.config, model.weights);
  std::vector<int> ids = model.tokenizer->encode(
      read_text_file(kShared + "/data/tinystories/tinystories_val_head.txt"), true);
  ASSERT_GT(ids.size(), 512u);
  ids.resize(512);
  NllResult r = score_tokens(transformer, ids);
  EXPECT_EQ(r.tokens, 511);
  EXPECT_NEAR(r.mean_nll(), 1.311, 0.005);
}

TEST(Stories260KReference, BinAndGgufGiveTheSameLogits) {
  Model a = load_model(kBin), b = load_model(kGguf);
  const std::vector<int> ids = a.tokenizer->encode("Once upon a time, a small dog found a red ball.", true);
  ASSERT_EQ(ids, b.tokenizer->encode("Once upon a time, a small dog found a red ball.", true));
  Transformer ta(a.config, a.weights), tb(b.config, b.weights);
  KVCache ca = ta.make_cache(), cb = tb.make_cache();
  ForwardOptions all;
  all.logits = LogitsMode::All;
  std::vector<float> la = ta.forward(ids, ca, all), lb = tb.forward(ids, cb, all);
  ASSERT_EQ(la.size(), lb.size());
  ASSERT_EQ(la.size(), ids.size() * 512);
  double max_diff = 0;
  for (std::size_t i = 0; i < la.size(); ++i) max_diff = std::max(max_diff, double(std::fabs(la[i] - lb[i])));
  EXPECT_LT(max_diff, 1e-5);
}

}}  // namespace
}  // namespace kvcompact
