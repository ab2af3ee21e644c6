#include "model/generate_from_cache.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

GenerationResult generate_from_cache(const Transformer& transformer, const Tokenizer& tokenizer,
                                     KVCache& cache, std::span<const float> last_logits,
                                     int last_token, std::string_view prompt, Sampler& sampler,
                                     const ContinueOptions& options,
                                     const std::function<void(std::string_view)>& on_text,
                                     int* stop_token) {
  const int V = transformer.config().vocab_size;
  if (options.max_new_tokens < 1)
    throw Error(fmt::format("generate: max_new_tokens {} must be >= 1", options.max_new_tokens));
  // The sampler draws among the tokenizer's ids only: padded vocabulary rows are masked out.
  if (tokenizer.vocab_size() > V || sampler.vocab_size() > tokenizer.vocab_size())
    throw Error(fmt::format("generate: tokenizer ({}) larger than the model vocabulary {}, or sampler ({}) larger "
                            "than the tokenizer", tokenizer.vocab_size(), V, sampler.vocab_size()));
  if (last_logits.size() != static_cast<std::size_t>(V))
    throw Error(fmt::format("generate: last_logits has {} values, vocabulary is {}", last_logits.size(), V));
  if (stop_token) *stop_token = -1;
  GenerationResult res;
  res.prompt_tokens = tokenizer.encode(prompt, /*add_bos=*/false);
  auto emit = [&](int prev, int next) {
    const std::string piece = tokenizer.decode_token(prev, next);
    res.text += piece;
    if (on_text) on_text(piece);
  };
  std::vector<float> logits(last_logits.begin(), last_logits.end());
  int prev = last_token;
  if (!res.prompt_tokens.empty()) {
    ForwardOptions opt;
    opt.logits = LogitsMode::Last;
    logits = transformer.forward(res.prompt_tokens, cache, opt);
    res.positions += static_cast<int>(res.prompt_tokens.size());
    for (int t : res.prompt_tokens) {
      emit(prev, t);
      prev = t;
    }
  }
  const int bos = tokenizer.bos_id(), eos = tokenizer.eos_id();
  ForwardOptions opt;
  opt.logits = LogitsMode::Last;
  for (int i = 0; i < options.max_new_tokens; ++i) {
    const int next = sampler.sample(logits);
    const bool newline =
        options.stop_at_newline && tokenizer.decode_token(prev, next).find('\n') != std::string::npos;
    if (next == bos || next == eos || newline) {
      res.stopped = true;
      if (stop_token) *stop_token = next;
      break;
    }
    res.generated.push_back(next);
    emit(prev, next);
    prev = next;
    if (i + 1 == options.max_new_tokens) break;  // the last token need not be fed
    logits = transformer.forward(std::span<const int>(&next, 1), cache, opt);
    ++res.positions;
  }
  return res;
}

}  // namespace kvcompact
