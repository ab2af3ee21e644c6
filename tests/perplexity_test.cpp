// Teacher-forced NLL: hand-worked logits tables, invariants of chunked scoring, and the published
// stories260K number.
#include "metrics/perplexity.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "random_model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(Perplexity, TokenNllHandWorked) {
  // Row [0, ln 3]: probabilities [1/4, 3/4].
  const std::vector<float> row{0.0f, std::log(3.0f)};
  EXPECT_NEAR(token_nll(row, 0), std::log(4.0), 1e-6);
  EXPECT_NEAR(token_nll(row, 1), std::log(4.0 / 3.0), 1e-6);
  // Shifting every logit by 1000 changes nothing (no overflow).
  const std::vector<float> big{1000.0f, 1000.0f + std::log(3.0f)};
  EXPECT_NEAR(token_nll(big, 0), std::log(4.0), 1e-4);
  // Uniform over 5: ln 5.
  EXPECT_NEAR(token_nll(std::vector<float>(5, -7.0f), 3), std::log(5.0), 1e-12);
}

TEST(Perplexity, SequenceNllSumsRows) {
  // Rows: [0, ln3, -inf-ish], [ln2, 0, 0]; targets 1, 0.
  // Row 0: p = [1, 3, e^-50] / (4 + e^-50) -> -ln(3/4) (e^-50 negligible).
  // Row 1: p = [2, 1, 1] / 4 -> -ln(1/2).
  const std::vector<float> logits{0.0f, std::log(3.0f), -50.0f, std::log(2.0f), 0.0f, 0.0f};
  const std::vector<int> targets{1, 0};
  EXPECT_NEAR(sequence_nll(logits, 3, targets), std::log(4.0 / 3.0) + std::log(2.0), 1e-6);
  EXPECT_THROW(sequence_nll(logits, 4, targets), Error);
  EXPECT_THROW(sequence_nll(logits, 3, std::vector<int>{1, 3}), Error);
  EXPECT_THROW(sequence_nll(logits, 3, std::vector<int>{-1, 0}), Error);
  const std::vector<float> nan_row{0.0f, NAN, 1.0f};
  EXPECT_THROW(token_nll(nan_row, 0), Error);
  NllResult r{std::log(8.0), 3};
  EXPECT_NEAR(r.perplexity(), 2.0, 1e-12);
}

TEST(Perplexity, ZeroClassifierGivesLogVocab) {
  // An untied all-zero classifier makes every logit 0: each target costs exactly ln(vocab).
  auto cfg = testing::small_config(48, 80, 2, 6, 2, 61, RopeStyle::Interleaved, false);
  auto m = testing::make_random_model(cfg, 31);
  std::fill(m.weights.classifier.begin(), m.weights.classifier.end(), 0.0f);
  Transformer tf(m.config, m.weights);
  const std::vector<int> ids{1, 5, 9, 33, 2, 60, 7};
  const NllResult r = score_tokens(tf, ids);
  EXPECT_EQ(r.tokens, 6);
  EXPECT_NEAR(r.total_nll, 6 * std::log(61.0), 1e-9);
  EXPECT_NEAR(r.perplexity(), 61.0, 1e-9);
}

TEST(Perplexity, ChunkedScoringEqualsOneForwardAndContinuesCache) {
  const auto m = testing::make_random_model(testing::small_config(), 32);
  Transformer tf(m.config, m.weights);
  std::vector<int> ids(40);
  for (int i = 0; i < 40; ++i) ids[i] = (i * 13 + 3) % 61;
  // Manual: one forward over ids[0:39], NLL of ids[1:40].
  KVCache c = tf.make_cache();
  const auto logits = tf.forward(std::span<const int>(ids).first(39), c, {LogitsMode::All});
  double manual = 0.0;
  for (int i = 0; i < 39; ++i)
    manual += token_nll(std::span<const float>(logits).subspan(i * 61, 61), ids[i + 1]);
  for (int chunk : {0, 1, 7, 39, 100}) {
    KVCache cache = tf.make_cache();
    const NllResult r = score_tokens(tf, cache, ids, chunk);
    EXPECT_EQ(r.tokens, 39);
    EXPECT_NEAR(r.total_nll, manual, 1e-4 * manual) << "chunk " << chunk;
    EXPECT_EQ(cache.next_position, 39);
  }
  // Scoring the tail after a prefilled head equals the tail part of the full score.
  KVCache cache = tf.make_cache();
  tf.forward(std::span<const int>(ids).first(20), cache, {LogitsMode::None});
  const NllResult tail = score_tokens(tf, cache, std::span<const int>(ids).subspan(20), 5);
  double manual_tail = 0.0;
  for (int i = 20; i < 39; ++i)
    manual_tail += token_nll(std::span<const float>(logits).subspan(i * 61, 61), ids[i + 1]);
  EXPECT_NEAR(tail.total_nll, manual_tail, 1e-4 * manual_tail);
  EXPECT_THROW(score_tokens(tf, std::vector<int>{3}), Error);
  EXPECT_THROW(score_tokens(tf, std::vector<int>{3, 61}), Error);
}

TEST(Perplexity, Stories260KTinyStoriesNll) {
  // SOURCES.md: NLL on the first 511 tokens of tinystories_val_head.txt is 1.311 nats/token
  // (an independent numpy forward; Karpathy reports validation loss 1.2968).
  const std::string shared = KVC_SHARED_DIR;
  const std::string model_path = shared + "/models/stories260K/stories260K.bin";
  const std::string text_path = shared + "/data/tinystories/tinystories_val_head.txt";
  if (!std::filesystem::exists(model_path) || !std::filesystem::exists(text_path))
    GTEST_SKIP() << "shared data missing";
  std::ifstream f(text_path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str().substr(0, 4000);
  const Model model = load_model(model_path, shared + "/models/stories260K/tok512.bin");
  std::vector<int> ids = model.tokenizer->encode(text, true);
  ASSERT_GE(ids.size(), 512u);
  ids.resize(512);  // BOS + 511 tokens: 511 targets
  Transformer tf(model.config, model.weights);
  const NllResult r = score_tokens(tf, ids, 100);
  EXPECT_EQ(r.tokens, 511);
  EXPECT_NEAR(r.mean_nll(), 1.311, 0.0015) << r.mean_nll();
}

}}  // namespace
}  // namespace kvcompact
