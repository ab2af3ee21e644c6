// Greedy answer generation for task evaluation: stop strings, a token limit, and an optional
// ForwardObserver (head interventions) active in prefill and in every decoding step.
#pragma once

#include <string>
#include <vector>

#include "core/kv_cache.h"
#include "io/tokenizer.h"
#include "model/model.h"
#include "model/transformer.h"

namespace kvcompact {

/// What generate_answer produced.
struct GeneratedAnswer {
  std::string text;         ///< generated text, cut before the first stop string
  std::vector<int> tokens;  ///< generated ids (a final EOS/BOS not included)
  int prompt_tokens = 0;    ///< encoded prompt length (BOS included when the tokenizer adds one)
  bool stopped = false;     ///< ended by a stop string or EOS/BOS rather than the token limit
};

/// The prompt ids generate_answer feeds: `prompt` encoded with BOS when the tokenizer has one.
/// Throws Error for a model without a tokenizer or a prompt that encodes to no tokens.
std::vector<int> encode_prompt_ids(const Model& model, const std::string& prompt);

/// Encodes `prompt` (with BOS when the tokenizer has one), runs it in one prefill and then
/// decodes greedily (argmax; ties to the lowest id) one token at a time until a stop string
/// appears in the generated text, EOS/BOS is produced, or max_new_tokens tokens were generated.
/// `observer` (may be null) is passed to every forward call. Throws Error for max_new_tokens < 1,
/// an empty encoded prompt or a model without a tokenizer.
GeneratedAnswer generate_answer(const Model& model, const std::string& prompt, int max_new_tokens,
                                const std::vector<std::string>& stop,
                                ForwardObserver* observer = nullptr);

/// The decoding of generate_answer over a cache that already holds the prompt: `logits` [vocab]
/// are those after `prev`, the last token fed. Decodes greedily (argmax over the tokenizer's ids,
/// padded vocabulary rows masked out; ties to the lowest id), feeding each token to `cache`,
/// until a stop string appears in the text (which is then cut before it: cut_at_stop of
/// answer_scoring.h), EOS/BOS is produced,
/// or max_new_tokens tokens were generated; prompt_tokens is left 0. Throws Error for
/// max_new_tokens < 1 or logits of another size than the model vocabulary.
GeneratedAnswer decode_greedy(const Transformer& transformer, const Tokenizer& tokenizer, KVCache& cache,
                              std::vector<float> logits, int prev, int max_new_tokens,
                              const std::vector<std::string>& stop, ForwardObserver* observer = nullptr);

/// A prompt and its answer as one token sequence: ids = encode(prompt + answer', BOS), where
/// answer' is the answer with a space put in front when the prompt ends in a non-space and the
/// answer starts with one; the first `prompt_tokens` ids are the longest common prefix with
/// encode(prompt, BOS) (tokens merging across the boundary count as answer tokens).
struct PromptAnswerTokens {
  std::vector<int> ids;
  int prompt_tokens = 0;  ///< ids[0 .. prompt_tokens) are the prompt; the rest the answer
};
PromptAnswerTokens encode_prompt_answer(const Tokenizer& tokenizer, const std::string& prompt,
                                        const std::string& answer);

/// Teacher-forced mean NLL (nats/token) of the answer tokens of encode_prompt_answer given the
/// prompt, with `observer` (may be null) in every forward call. With observe_prefix false the
/// prompt's tokens but the last are fed in a call without the observer, the prompt's last token
/// and the answer in calls with it: with an intervention on every row, that masks what
/// generate_answer masks under MaskPositions::Last (the prompt's last token, then each answer
/// token). Returns NaN when the answer encodes to no token of its own or the prompt to none.
double answer_nll(const Model& model, const std::string& prompt, const std::string& answer,
                  ForwardObserver* observer = nullptr, bool observe_prefix = true);

/// Index of the largest value (the first one on ties). logits: [n], n >= 1.
int argmax(const float* logits, int n);

}  // namespace kvcompact
