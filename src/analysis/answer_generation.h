// Greedy answer generation for task evaluation: stop strings, a token limit, and an optional
// ForwardObserver (head interventions) active in prefill and in every decoding step.
#pragma once

#include <string>
#include <vector>

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

/// Encodes `prompt` (with BOS when the tokenizer has one), runs it in one prefill and then
/// decodes greedily (argmax; ties to the lowest id) one token at a time until a stop string
/// appears in the generated text, EOS/BOS is produced, or max_new_tokens tokens were generated.
/// `observer` (may be null) is passed to every forward call. Throws Error for max_new_tokens < 1,
/// an empty encoded prompt or a model without a tokenizer.
GeneratedAnswer generate_answer(const Model& model, const std::string& prompt, int max_new_tokens,
                                const std::vector<std::string>& stop,
                                ForwardObserver* observer = nullptr);

/// Index of the largest value (the first one on ties). logits: [n], n >= 1.
int argmax(const float* logits, int n);

}  // namespace kvcompact
