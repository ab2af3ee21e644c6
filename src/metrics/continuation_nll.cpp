#include "metrics/continuation_nll.h"

#include <fmt/format.h>

#include "core/error.h"

namespace kvcompact {

NllResult continuation_nll(const Transformer& transformer, KVCache cache,
                           std::span<const float> first_logits, std::span<const int> tokens) {
  if (tokens.empty()) throw Error("continuation NLL: no tokens to score");
  if (first_logits.size() != static_cast<std::size_t>(transformer.config().vocab_size))
    throw Error(fmt::format("continuation NLL: first_logits has {} values, vocabulary is {}",
                            first_logits.size(), transformer.config().vocab_size));
  NllResult r;
  r.total_nll = token_nll(first_logits, tokens[0]);
  r.tokens = 1;
  if (tokens.size() >= 2) {
    const NllResult rest = score_tokens(transformer, cache, tokens);
    r.total_nll += rest.total_nll;
    r.tokens += rest.tokens;
  }
  return r;
}

}  // namespace kvcompact
