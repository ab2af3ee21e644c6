#include "tasks/answer_generation.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "tasks/answer_scoring.h"
#include "metrics/perplexity.h"
#include "core/error.h"

namespace kvcompact {

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

std::vector<int> encode_prompt_ids(const Model& model, const std::string& prompt) {
  if (!model.tokenizer) throw Error(fmt::format("{}: model has no tokenizer", model.path));
  std::vector<int> ids = model.tokenizer->encode(prompt, true);
  if (ids.empty()) throw Error("answer generation: the prompt encodes to no tokens");
  return ids;
}

GeneratedAnswer generate_answer(const Model& model, const std::string& prompt, int max_new_tokens,
                                const std::vector<std::string>& stop, ForwardObserver* observer) {
  if (max_new_tokens < 1)
    throw Error(fmt::format("answer generation: max_new_tokens {} < 1", max_new_tokens));
  const std::vector<int> ids = encode_prompt_ids(model, prompt);
  const Tokenizer& tok = *model.tokenizer;
  Transformer tr(model.config, model.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::Last;
  o.observer = observer;
  GeneratedAnswer out = decode_greedy(tr, tok, cache, tr.forward(ids, cache, o), ids.back(), max_new_tokens, stop,
                                      observer);
  out.prompt_tokens = static_cast<int>(ids.size());
  return out;
}

GeneratedAnswer decode_greedy(const Transformer& transformer, const Tokenizer& tok, KVCache& cache,
                              std::vector<float> logits, int prev, int max_new_tokens,
                              const std::vector<std::string>& stop, ForwardObserver* observer) {
  if (max_new_tokens < 1)
    throw Error(fmt::format("answer generation: max_new_tokens {} < 1", max_new_tokens));
  const int V = transformer.config().vocab_size;
  if (logits.size() != static_cast<std::size_t>(V))
    throw Error(fmt::format("answer generation: {} logits for a vocabulary of {}", logits.size(), V));
  ForwardOptions o;
  o.logits = LogitsMode::Last;
  o.observer = observer;
  GeneratedAnswer out;
  std::string text;
  for (int step = 0; step < max_new_tokens; ++step) {
    // Padded vocabulary rows past the tokenizer's ids are masked out.
    const int next = argmax(logits.data(), std::min(V, tok.vocab_size()));
    if (next == tok.eos_id() || next == tok.bos_id()) {
      out.stopped = true;
      break;
    }
    out.tokens.push_back(next);
    text += tok.decode_token(prev, next);
    prev = next;
    std::string cut = cut_at_stop(text, stop);
    if (cut.size() < text.size()) {
      text = std::move(cut);
      out.stopped = true;
      break;
    }
    if (step + 1 == max_new_tokens) break;
    const int one[1] = {next};
    logits = transformer.forward(one, cache, o);
  }
  out.text = std::move(text);
  return out;
}

PromptAnswerTokens encode_prompt_answer(const Tokenizer& tokenizer, const std::string& prompt,
                                        const std::string& answer) {
  std::string a = answer;
  if (!prompt.empty() && !a.empty() && !std::isspace(static_cast<unsigned char>(prompt.back())) &&
      !std::isspace(static_cast<unsigned char>(a.front())))
    a = " " + a;
  PromptAnswerTokens out;
  const std::vector<int> p = tokenizer.encode(prompt, true);
  out.ids = tokenizer.encode(prompt + a, true);
  std::size_t k = 0;
  while (k < p.size() && k < out.ids.size() && p[k] == out.ids[k]) ++k;
  out.prompt_tokens = static_cast<int>(k);
  return out;
}

double answer_nll(const Model& model, const std::string& prompt, const std::string& answer,
                  ForwardObserver* observer, bool observe_prefix) {
  if (!model.tokenizer) throw Error(fmt::format("{}: model has no tokenizer", model.path));
  const PromptAnswerTokens t = encode_prompt_answer(*model.tokenizer, prompt, answer);
  const int n = static_cast<int>(t.ids.size()), k = t.prompt_tokens;
  if (k < 1 || k >= n) return std::nan("");
  Transformer tr(model.config, model.weights);
  KVCache cache = tr.make_cache();
  if (k > 1) {
    ForwardOptions o;
    o.logits = LogitsMode::None;
    o.observer = observe_prefix ? observer : nullptr;
    tr.forward(std::span<const int>(t.ids).first(k - 1), cache, o);
  }
  // feeds ids[k-1 .. n-2], scores ids[k .. n-1]
  const NllResult r = score_tokens(tr, cache, std::span<const int>(t.ids).subspan(k - 1), 0, observer);
  return r.mean_nll();
}

}  // namespace kvcompact
