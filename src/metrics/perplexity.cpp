#include "metrics/perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace kvcompact {

double token_nll(std::span<const float> row, int target) {
  const int vocab = static_cast<int>(row.size());
  if (target < 0 || target >= vocab)
    throw Error(fmt::format("nll: target id {} is outside the vocabulary of {}", target, vocab));
  double mx = -INFINITY;
  for (int i = 0; i < vocab; ++i) {
    if (!std::isfinite(row[i]))
      throw Error(fmt::format("nll: logit {} of token {} is not finite", row[i], i));
    mx = std::max(mx, static_cast<double>(row[i]));
  }
  double sum = 0.0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i]) - mx);
  return std::log(sum) + mx - static_cast<double>(row[target]);
}

double sequence_nll(std::span<const float> logits, int vocab, std::span<const int> targets) {
  if (vocab <= 0 || logits.size() != targets.size() * static_cast<std::size_t>(vocab))
    throw Error(fmt::format("nll: {} logits do not form {} rows of vocabulary {}", logits.size(),
                            targets.size(), vocab));
  double total = 0.0;
  for (std::size_t r = 0; r < targets.size(); ++r)
    total += token_nll(logits.subspan(r * vocab, vocab), targets[r]);
  return total;
}

double NllResult::perplexity() const { return std::exp(mean_nll()); }

NllResult score_tokens(const Transformer& transformer, KVCache& cache, std::span<const int> ids,
                       int chunk_tokens, ForwardObserver* observer) {
  if (ids.size() < 2)
    throw Error(fmt::format("perplexity: need at least 2 token ids, got {}", ids.size()));
  const int vocab = transformer.config().vocab_size;
  if (chunk_tokens <= 0) chunk_tokens = std::max(1, (16 << 20) / vocab);
  const int n = static_cast<int>(ids.size()) - 1;  // inputs / targets
  NllResult res;
  ForwardOptions opt;
  opt.logits = LogitsMode::All;
  opt.observer = observer;
  for (int start = 0; start < n; start += chunk_tokens) {
    const int len = std::min(chunk_tokens, n - start);
    const std::vector<float> logits = transformer.forward(ids.subspan(start, len), cache, opt);
    res.total_nll += sequence_nll(logits, vocab, ids.subspan(start + 1, len));
    res.tokens += len;
  }
  return res;
}

NllResult score_tokens(const Transformer& transformer, std::span<const int> ids,
                       int chunk_tokens, ForwardObserver* observer) {
  KVCache cache = transformer.make_cache();
  return score_tokens(transformer, cache, ids, chunk_tokens, observer);
}

}  // namespace kvcompact
