#include "model/generate.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace kvcompact {

GenerationResult generate(const Transformer& transformer, const Tokenizer& tokenizer,
                          std::string_view prompt, int steps, Sampler& sampler,
                          const std::function<void(std::string_view)>& on_text, KVCache* cache,
                          const std::function<void(KVCache&, std::span<const int>)>& after_forward) {
  if (steps < 1) throw Error(fmt::format("generate: steps {} must be >= 1", steps));
  // A model's vocabulary may be padded beyond the tokenizer's (Qwen3: 151669 tokens, 151936 rows)
  if (tokenizer.vocab_size() > transformer.config().vocab_size)
    throw Error(fmt::format("generate: tokenizer has {} tokens, more than the model vocabulary of {}",
                            tokenizer.vocab_size(), transformer.config().vocab_size));
  // ... so the sampler draws among the tokenizer's ids only (the padded rows are masked out).
  if (sampler.vocab_size() > tokenizer.vocab_size())
    throw Error(fmt::format("generate: sampler vocabulary {} is larger than the tokenizer's {} (ids without a token "
                            "could be drawn)", sampler.vocab_size(), tokenizer.vocab_size()));
  KVCache local;
  if (!cache) {
    local = transformer.make_cache();
    cache = &local;
  }
  GenerationResult res;
  res.prompt_tokens = tokenizer.encode(prompt, true);
  const std::vector<int>& pt = res.prompt_tokens;
  if (pt.empty()) throw Error("generate: the prompt encoded to no tokens");
  const int np = static_cast<int>(pt.size());
  const int bos = tokenizer.bos_id(), eos = tokenizer.eos_id();

  auto emit = [&](int prev, int next) {
    const std::string piece = tokenizer.decode_token(prev, next);
    res.text += piece;
    if (on_text) on_text(piece);
  };

  // Positions 0 .. n_pre-1 only feed prompt tokens whose successor is known: one prefill.
  const int n_pre = std::min(np - 1, steps);
  int pos = 0;
  std::vector<int> fed;  // every token fed so far (for after_forward)
  if (n_pre > 0) {
    ForwardOptions opt;
    opt.logits = LogitsMode::None;
    transformer.forward(std::span<const int>(pt.data(), n_pre), *cache, opt);
    if (after_forward) {
      fed.assign(pt.begin(), pt.begin() + n_pre);
      after_forward(*cache, fed);
    }
    for (int i = 0; i < n_pre; ++i) {
      ++pos;
      if (tokenizer.adds_bos() && pt[i + 1] == bos) {  // llama2.c breaks on BOS even inside the prompt
        res.positions = pos;
        res.stopped = true;
        return res;
      }
      emit(pt[i], pt[i + 1]);
    }
  }
  int token = pt[n_pre];
  ForwardOptions opt;
  opt.logits = LogitsMode::Last;
  while (pos < steps) {
    const std::vector<float> logits =
        transformer.forward(std::span<const int>(&token, 1), *cache, opt);
    if (after_forward) {
      fed.push_back(token);
      after_forward(*cache, fed);
    }
    const int next = sampler.sample(logits);
    ++pos;
    if (next == bos || next == eos) {
      res.stopped = true;
      break;
    }
    res.generated.push_back(next);
    emit(token, next);
    token = next;
  }
  res.positions = pos;
  return res;
}

}  // namespace kvcompact
