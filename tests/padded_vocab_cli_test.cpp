// A model whose vocabulary is padded beyond its tokenizer's (as Qwen3: 151936 embedding rows,
// 151669 tokens): `logits`, `generate` and the library's generate() mask the padded rows out
// instead of stopping with "token id ... out of range"; and the max_seq_len warning of `logits`
// and `compact` (as `generate` and `ppl` give it).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_runner.h"
#include "hf_test_util.h"
#include "model/generate.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using json = nlohmann::json;
using namespace kvcompact::testing;

constexpr int kTokens = 60, kRows = 80;  // tokenizer ids 0..59, embedding / classifier rows 0..79

/// A character tokenizer.json: ids 0..59 = <s>, </s>, then the 58 characters 'A'..'z' (no
/// pre-tokenizer, no merges).
json char_tokenizer() {
  json vocab = json::object();
  vocab["<s>"] = 0;
  vocab["</s>"] = 1;
  for (int i = 2; i < kTokens; ++i) vocab[std::string(1, static_cast<char>('A' + i - 2))] = i;
  return {{"version", "1.0"},
          {"added_tokens", json::array({{{"id", 0}, {"content", "<s>"}, {"special", true}, {"normalized", false}},
                                        {{"id", 1}, {"content", "</s>"}, {"special", true}, {"normalized", false}}})},
          {"normalizer", nullptr},
          {"pre_tokenizer", nullptr},
          {"post_processor", nullptr},
          {"decoder", nullptr},
          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}}};
}

/// Random Llama checkpoint with kRows rows whose classifier rows kTokens.. are +-30x copies of real
/// rows, so that without masking the argmax is (almost surely) a padded row.
std::string padded_checkpoint(const std::string& name, int max_positions) {
  HfSpec s;
  s.vocab = kRows;
  const std::string dir = hf_tmp_dir(name);
  json cfg = hf_config_json(s);
  cfg["max_position_embeddings"] = max_positions;
  cfg["bos_token_id"] = 0;
  cfg["eos_token_id"] = 1;
  write_text(dir + "/config.json", cfg.dump(2));
  std::vector<HfTensor> ts = random_hf_tensors(s, 11);
  for (auto& t : ts) {
    if (t.name != "lm_head.weight") continue;
    const std::size_t D = static_cast<std::size_t>(s.hidden);
    for (int r = kTokens; r < kRows; ++r) {
      const int src = (r - kTokens) % 10 + 2;
      const float sign = r - kTokens < 10 ? 30.0f : -30.0f;
      for (std::size_t k = 0; k < D; ++k) t.values[r * D + k] = sign * t.values[src * D + k];
    }
  }
  write_hf_tensors(dir + "/model.safetensors", ts, "F32");
  write_text(dir + "/tokenizer.json", char_tokenizer().dump());
  return dir;
}

int unmasked_argmax(const std::vector<float>& logits) {
  return static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

TEST(PaddedVocabulary, GenerateNeverDrawsAPaddedRow) {
  const std::string dir = padded_checkpoint("padded_lib", 4096);
  const Model m = load_model(dir);
  ASSERT_EQ(m.config.vocab_size, kRows);
  ASSERT_EQ(m.tokenizer->vocab_size(), kTokens);
  Transformer tf(m.config, m.weights);
  KVCache cache = tf.make_cache();
  const std::vector<int> prompt = m.tokenizer->encode("ab", true);
  const std::vector<float> logits = tf.forward(prompt, cache);
  ASSERT_GE(unmasked_argmax(logits), kTokens);  // without masking the test would fail
  for (float temperature : {0.0f, 1.0f}) {
    Sampler s(m.tokenizer->vocab_size(), temperature, 0.9f, 5);
    const GenerationResult r = generate(tf, *m.tokenizer, "ab", 24, s);
    for (int id : r.generated) EXPECT_LT(id, kTokens) << "temperature " << temperature;
  }
  // A sampler over the padded rows could draw ids without a token: refused.
  Sampler wide(kRows, 0.0f, 0.9f, 5);
  EXPECT_THROW(generate(tf, *m.tokenizer, "ab", 5, wide), Error);
}

TEST(PaddedVocabulary, LogitsAndGenerateCommandsMaskPaddedRows) {
  const std::string dir = padded_checkpoint("padded_cli", 4096);
  const CliRun r = run_cli("logits --model " + dir + " --prompt ab --top 100 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const json j = json::parse(r.out);
  ASSERT_EQ(j["top"].size(), static_cast<std::size_t>(kTokens));  // only the tokenizer's ids
  double mass = 0;
  for (const auto& t : j["top"]) {
    EXPECT_LT(t["id"].get<int>(), kTokens);
    mass += std::exp(t["logprob"].get<double>());
  }
  EXPECT_NEAR(mass, 1.0, 1e-4);  // the softmax is over the tokens, the padded rows masked out
  const CliRun g = run_cli("generate --model " + dir + " --prompt ab --temperature 0 --steps 12 --json");
  ASSERT_EQ(g.status, 0) << g.err;
  const json gj = json::parse(g.out);  // a named object: a range-for over parse(...)[k] dangles
  for (int id : gj["generated"]) EXPECT_LT(id, kTokens);
}

TEST(PaddedVocabulary, LogitsAndCompactWarnPastMaxSeqLen) {
  const std::string dir = padded_checkpoint("short_context", 8);
  const std::string warning = "warning: positions up to";
  const CliRun shortp = run_cli("logits --model " + dir + " --prompt abc --top 3");
  ASSERT_EQ(shortp.status, 0) << shortp.err;
  EXPECT_EQ(shortp.err.find(warning), std::string::npos) << shortp.err;
  const CliRun longp = run_cli("logits --model " + dir + " --prompt abcdefghijkl --top 3");
  ASSERT_EQ(longp.status, 0) << longp.err;
  EXPECT_NE(longp.err.find(warning + " 12 run past the model's max_seq_len 8"), std::string::npos) << longp.err;
  const std::string ctx = write_tmp("long_context.txt", "abcdefghijklmnop");
  const std::string out = write_tmp("long_context.kvc", "");
  const CliRun c = run_cli("compact --model " + dir + " --context " + ctx + " --ratio 0.5 --method recent -o " + out);
  ASSERT_EQ(c.status, 0) << c.err;
  EXPECT_NE(c.err.find(warning + " 16 run past the model's max_seq_len 8"), std::string::npos) << c.err;
}

}}  // namespace
}  // namespace kvcompact
