// Sampler (llama2.c sample / sample_topp / xorshift RNG) and generate() (llama2.c generate loop).
#include "model/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/generate.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::vector<float> log_probs(const std::vector<double>& p) {
  std::vector<float> l;
  for (double x : p) l.push_back(static_cast<float>(std::log(x)));
  return l;
}

std::vector<double> frequencies(Sampler& s, const std::vector<float>& logits, int draws) {
  std::vector<double> f(logits.size(), 0.0);
  for (int i = 0; i < draws; ++i) f[s.sample(logits)] += 1.0 / draws;
  return f;
}

TEST(Sampler, ArgmaxTakesFirstMaximum) {
  EXPECT_EQ(argmax(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(argmax(std::vector<float>{-5}), 0);
  EXPECT_EQ(argmax(std::vector<float>{-2, -1, -1.5f}), 1);
  EXPECT_THROW(argmax(std::vector<float>{}), Error);
  Sampler greedy(4, 0.0f, 0.9f, 7);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(greedy.sample(std::vector<float>{0, 2, 5, 5}), 2);
}

TEST(Sampler, XorShiftMatchesLlama2cFormula) {
  // Values worked out with Python big integers from llama2.c random_u32 for state 42.
  XorShiftRng rng(42);
  EXPECT_EQ(rng.next_u32(), 1456360119u);
  EXPECT_EQ(rng.next_u32(), 3359763283u);
  EXPECT_FLOAT_EQ(rng.next_f32(), 0.790136992931366f);
  // Seed 0 is remapped (a zero xorshift state would only ever give 0).
  XorShiftRng zero(0);
  EXPECT_NE(zero.next_u32(), 0u);
}

TEST(Sampler, SampleMultAndToppHandWorked) {
  const std::vector<float> p{0.2f, 0.3f, 0.5f};
  EXPECT_EQ(sample_mult(p, 0.1f), 0);
  EXPECT_EQ(sample_mult(p, 0.25f), 1);
  EXPECT_EQ(sample_mult(p, 0.99f), 2);
  // Sorted: id1 (.5), id2 (.3), then .1s. top_p .7 -> nucleus {1, 2} of mass .8.
  const std::vector<float> q{0.1f, 0.5f, 0.3f, 0.1f};
  EXPECT_EQ(sample_topp(q, 0.7f, 0.5f), 1);   // r = .4 < .5
  EXPECT_EQ(sample_topp(q, 0.7f, 0.7f), 2);   // r = .56 in [.5, .8)
  EXPECT_EQ(sample_topp(q, 0.7f, 0.999f), 2); // never reaches the tail
}

TEST(Sampler, PlainSamplingFrequencies) {
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  Sampler s(4, 1.0f, 1.0f, 12345);  // top_p >= 1: plain multinomial
  const auto f = frequencies(s, log_probs(p), 40000);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], p[i], 0.01) << i;
  Sampler s0(4, 1.0f, 0.0f, 99);  // top_p <= 0: plain too
  const auto f0 = frequencies(s0, log_probs(p), 40000);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f0[i], p[i], 0.01) << i;
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
  // softmax(log p / T) is proportional to p^(1/T).
  const std::vector<double> p{0.1, 0.2, 0.3, 0.4};
  Sampler hot(4, 2.0f, 1.0f, 5);
  const auto f = frequencies(hot, log_probs(p), 40000);
  double z = 0;
  for (double x : p) z += std::sqrt(x);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::sqrt(p[i]) / z, 0.01) << i;
  Sampler cold(4, 0.5f, 1.0f, 6);
  const auto g = frequencies(cold, log_probs(p), 40000);
  z = 0;
  for (double x : p) z += x * x;
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(g[i], p[i] * p[i] / z, 0.01) << i;
}

TEST(Sampler, TopPExcludesTheTail) {
  const std::vector<double> p{0.05, 0.5, 0.15, 0.3};
  // top_p .7: sorted .5, .3 (cumulative .8 > .7) -> only ids 1 and 3, renormalised.
  Sampler s(4, 1.0f, 0.7f, 77);
  const auto f = frequencies(s, log_probs(p), 40000);
  EXPECT_EQ(f[0], 0.0);
  EXPECT_EQ(f[2], 0.0);
  EXPECT_NEAR(f[1], 0.5 / 0.8, 0.01);
  EXPECT_NEAR(f[3], 0.3 / 0.8, 0.01);
  // top_p .9: .5 + .3 + .15 = .95 > .9 -> ids 1, 3, 2.
  Sampler s2(4, 1.0f, 0.9f, 78);
  const auto f2 = frequencies(s2, log_probs(p), 40000);
  EXPECT_EQ(f2[0], 0.0);
  EXPECT_NEAR(f2[2], 0.15 / 0.95, 0.01);
}

TEST(Sampler, SameSeedSameDraws) {
  const auto l = log_probs({0.25, 0.25, 0.25, 0.25});
  Sampler a(4, 1.0f, 0.9f, 2024), b(4, 1.0f, 0.9f, 2024), c(4, 1.0f, 0.9f, 2025);
  std::vector<int> da, db, dc;
  for (int i = 0; i < 50; ++i) da.push_back(a.sample(l)), db.push_back(b.sample(l)), dc.push_back(c.sample(l));
  EXPECT_EQ(da, db);
  EXPECT_NE(da, dc);
}

TEST(Sampler, BadInputThrows) {
  EXPECT_THROW(Sampler(0, 1.0f, 0.9f, 1), Error);
  EXPECT_THROW(Sampler(4, -1.0f, 0.9f, 1), Error);
  EXPECT_THROW(Sampler(4, NAN, 0.9f, 1), Error);
  EXPECT_THROW(Sampler(4, 1.0f, NAN, 1), Error);
  Sampler s(4, 1.0f, 0.9f, 1);
  EXPECT_THROW(s.sample(std::vector<float>{1, 2, 3}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{1, NAN, 3, 4}), Error);
  EXPECT_THROW(s.sample(std::vector<float>{1, INFINITY, 3, 4}), Error);
}

// A toy tokenizer over the random model's vocabulary: BOS 1, EOS configurable; each character c
// encodes to 3 + c % (vocab - 3); token t decodes to "<t>".
class ToyTokenizer : public Tokenizer {
 public:
  ToyTokenizer(int vocab, int eos) : vocab_(vocab), eos_(eos) {}
  std::vector<int> encode(std::string_view text, bool add_bos) const override {
    std::vector<int> ids;
    if (add_bos) ids.push_back(1);
    for (unsigned char ch : text) ids.push_back(3 + ch % (vocab_ - 3));
    return ids;
  }
  std::string decode_token(int, int token) const override { return "<" + std::to_string(token) + ">"; }
  const std::string& piece(int) const override { return dummy_; }
  int vocab_size() const override { return vocab_; }
  int bos_id() const override { return 1; }
  int eos_id() const override { return eos_; }

 private:
  int vocab_, eos_;
  std::string dummy_;
};

// llama2.c generate(), literally: one token per forward call.
std::vector<int> llama2c_loop(const Transformer& tf, const std::vector<int>& prompt, int steps,
                              Sampler& sampler, int bos, int eos) {
  KVCache cache = tf.make_cache();
  std::vector<int> out;
  int token = prompt[0];
  for (int pos = 0; pos < steps; ++pos) {
    const auto logits = tf.forward(std::vector<int>{token}, cache, {LogitsMode::Last});
    const int next = pos < static_cast<int>(prompt.size()) - 1 ? prompt[pos + 1] : sampler.sample(logits);
    if (next == bos || next == eos) break;
    out.push_back(next);
    token = next;
  }
  return out;
}

TEST(Generate, MatchesTokenAtATimeLoop) {
  const auto m = testing::make_random_model(testing::small_config(), 21);
  Transformer tf(m.config, m.weights);
  ToyTokenizer tok(m.config.vocab_size, -1);
  for (float temp : {0.0f, 1.0f}) {
    Sampler s1(m.config.vocab_size, temp, 0.9f, 31), s2(m.config.vocab_size, temp, 0.9f, 31);
    std::string streamed;
    const auto res = generate(tf, tok, "hello", 20, s1, [&](std::string_view p) { streamed += p; });
    const auto expect = llama2c_loop(tf, tok.encode("hello", true), 20, s2, 1, -1);
    // One printed token per position: 5 prompt successors + 15 sampled.
    ASSERT_EQ(expect.size(), 20u);
    EXPECT_EQ(res.prompt_tokens, tok.encode("hello", true));
    EXPECT_EQ(res.generated, std::vector<int>(expect.begin() + 5, expect.end()));
    std::string text;
    for (int t : expect) text += tok.decode_token(0, t);
    EXPECT_EQ(res.text, text);
    EXPECT_EQ(streamed, text);
    EXPECT_EQ(res.positions, 20);
    EXPECT_FALSE(res.stopped);
  }
}

TEST(Generate, EmptyPromptStepsCountAndShortSteps) {
  const auto m = testing::make_random_model(testing::small_config(), 22);
  Transformer tf(m.config, m.weights);
  ToyTokenizer tok(m.config.vocab_size, -1);
  Sampler s(m.config.vocab_size, 0.0f, 0.9f, 1);
  // steps N from an empty prompt (just BOS): N positions, each printing one sampled token.
  const auto r = generate(tf, tok, "", 12, s);
  EXPECT_EQ(r.prompt_tokens, std::vector<int>{1});
  EXPECT_EQ(r.generated.size(), 12u);
  // steps shorter than the prompt: only prompt tokens are printed, nothing sampled.
  const auto r2 = generate(tf, tok, "abcdef", 3, s);
  EXPECT_TRUE(r2.generated.empty());
  EXPECT_EQ(r2.text, tok.decode_token(0, r2.prompt_tokens[1]) + tok.decode_token(0, r2.prompt_tokens[2]) +
                         tok.decode_token(0, r2.prompt_tokens[3]));
  EXPECT_THROW(generate(tf, tok, "", 0, s), Error);
  ToyTokenizer other(m.config.vocab_size + 1, -1);
  EXPECT_THROW(generate(tf, other, "", 5, s), Error);
}

TEST(Generate, StopsAtEos) {
  const auto m = testing::make_random_model(testing::small_config(), 23);
  Transformer tf(m.config, m.weights);
  ToyTokenizer tok(m.config.vocab_size, -1);
  Sampler s(m.config.vocab_size, 0.0f, 0.9f, 1);
  const auto free_run = generate(tf, tok, "xy", 30, s);
  ASSERT_GE(free_run.generated.size(), 4u);
  // Declare the 4th generated token EOS (at its first occurrence): generation stops right there.
  const int eos = free_run.generated[3];
  std::size_t first = 0;
  while (free_run.generated[first] != eos) ++first;
  ToyTokenizer tok_eos(m.config.vocab_size, eos);
  const auto r = generate(tf, tok_eos, "xy", 30, s);
  EXPECT_TRUE(r.stopped);
  EXPECT_EQ(r.generated, std::vector<int>(free_run.generated.begin(), free_run.generated.begin() + first));
  EXPECT_EQ(r.positions, static_cast<int>(2 + first + 1));
}

TEST(Generate, Stories260KGreedyMatchesLlama2c) {
  // Golden: llama2.c `run stories260K.bin -z tok512.bin -t 0.0 -n 200` (test_all.py). llama2.c
  // runs positions 0..199 and prints the token each one yields: 200 tokens after BOS.
  const std::string dir = std::string(KVC_SHARED_DIR) + "/models/stories260K/";
  if (!std::filesystem::exists(dir + "stories260K.bin")) GTEST_SKIP() << "no " << dir;
  const std::filesystem::path golden =
      std::filesystem::path(__FILE__).parent_path() / "data" / "llama2c_stories260K_greedy200.txt";
  std::ifstream g(golden, std::ios::binary);
  ASSERT_TRUE(g) << golden;
  std::stringstream ss;
  ss << g.rdbuf();
  for (const std::string file : {"stories260K.bin", "stories260K.gguf"}) {
    SCOPED_TRACE(file);
    const Model model = load_model(dir + file, file.ends_with(".bin") ? dir + "tok512.bin" : "");
    Transformer tf(model.config, model.weights);
    Sampler s(model.config.vocab_size, 0.0f, 0.9f, 1);
    const auto r = generate(tf, *model.tokenizer, "", 200, s);
    EXPECT_EQ(r.generated.size(), 200u);
    EXPECT_EQ(r.text, ss.str());
  }
}

}}  // namespace
}  // namespace kvcompact
