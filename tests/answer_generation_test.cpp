// Greedy answer generation (vs the llama2.c-style generate() at temperature 0), stop strings,
// and teacher-forced answer NLL (vs a plain full forward).
#include <gtest/gtest.h>

#include <cmath>

#include "tasks/answer_generation.h"
#include "heads/head_intervention.h"
#include "metrics/perplexity.h"
#include "core/error.h"
#include "model/generate.h"
#include "loaders/model_loader.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kBin = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin";

TEST(AnswerGeneration, GreedyEqualsGenerateAtTemperatureZeroAndStopsAtStopStrings) {
  Model model = load_model(kBin);
  const std::string prompt = "Once upon a time, there was a little dog";
  const GeneratedAnswer a = generate_answer(model, prompt, 40, {});
  Transformer tr(model.config, model.weights);
  Sampler greedy(model.config.vocab_size, 0.0f, 0.9f, 1);
  const GenerationResult g = generate(tr, *model.tokenizer, prompt, a.prompt_tokens + 40 - 1, greedy);
  ASSERT_EQ(a.tokens.size(), 40u);
  EXPECT_FALSE(a.stopped);
  EXPECT_EQ(a.tokens, g.generated);
  EXPECT_EQ(a.prompt_tokens, static_cast<int>(g.prompt_tokens.size()));
  // cut at the first "." of the free run
  const std::size_t dot = a.text.find('.');
  ASSERT_NE(dot, std::string::npos) << a.text;
  const GeneratedAnswer s = generate_answer(model, prompt, 40, {"!!", "."});
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.text, a.text.substr(0, dot));
  EXPECT_THROW(generate_answer(model, prompt, 0, {}), Error);
}

TEST(AnswerGeneration, AnswerNllEqualsPlainScoringOfTheAnswerTokens) {
  Model model = load_model(kBin);
  const std::string prompt = "Tom had a red ball. He liked his red", answer = "ball very much.";
  const PromptAnswerTokens t = encode_prompt_answer(*model.tokenizer, prompt, answer);
  ASSERT_GT(t.prompt_tokens, 1);
  ASSERT_GT(static_cast<int>(t.ids.size()), t.prompt_tokens + 2);
  EXPECT_EQ(model.tokenizer->decode(t.ids), prompt + " " + answer);
  Transformer tr(model.config, model.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  const std::vector<float> logits = tr.forward(t.ids, cache, o);
  double sum = 0;
  const int V = model.config.vocab_size;
  for (std::size_t i = t.prompt_tokens; i < t.ids.size(); ++i)
    sum += token_nll(std::span<const float>(logits).subspan((i - 1) * V, V), t.ids[i]);
  const double expected = sum / static_cast<double>(t.ids.size() - t.prompt_tokens);
  EXPECT_NEAR(answer_nll(model, prompt, answer), expected, 1e-5);
  HeadIntervention none(model.config, {}, Ablation::Zero);
  EXPECT_EQ(answer_nll(model, prompt, answer, &none), answer_nll(model, prompt, answer));
  HeadIntervention layer4(model.config, parse_head_set("L4", model.config), Ablation::Zero);
  EXPECT_NE(answer_nll(model, prompt, answer, &layer4), answer_nll(model, prompt, answer));
  EXPECT_TRUE(std::isnan(answer_nll(model, prompt, "")));
}

}}  // namespace
}  // namespace kvcompact
