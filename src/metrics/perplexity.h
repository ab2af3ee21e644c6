// Teacher-forced negative log-likelihood and perplexity of token sequences.
#pragma once

#include <cstddef>
#include <span>

#include "core/kv_cache.h"
#include "model/transformer.h"

namespace kvcompact {

/// -log softmax(row)[target] in nats for one logits row: [vocab], computed stably as
/// logsumexp(row) - row[target] with the max subtracted and double accumulation.
/// Throws Error for a target outside [0, vocab) or a non-finite logit.
double token_nll(std::span<const float> row, int target);

/// Sum of token_nll over rows: logits [targets.size(), vocab] row-major, targets [rows].
/// Throws Error when logits.size() != targets.size() * vocab or for a bad target/logit.
double sequence_nll(std::span<const float> logits, int vocab, std::span<const int> targets);

/// Total NLL of a scored sequence.
struct NllResult {
  double total_nll = 0.0;  ///< nats, summed over scored tokens
  long long tokens = 0;    ///< number of scored tokens
  double mean_nll() const { return tokens > 0 ? total_nll / static_cast<double>(tokens) : 0.0; }
  double perplexity() const;  ///< exp(mean_nll)
};

/// Teacher-forced scoring: feeds ids[0 .. n-2] after whatever `cache` holds (at positions
/// cache.next_position, ...) and scores targets ids[1 .. n-1], i.e. inputs ids[0:n-1], targets
/// ids[1:n]. Runs as one prefill split into chunks of `chunk_tokens` forward calls (0 = automatic:
/// at most ~64 MiB of logits per chunk), which gives the same result as a single call.
/// The cache ends holding the n-1 fed tokens. `observer` (optional, e.g. a HeadIntervention) is
/// passed to every forward call. Throws Error for fewer than 2 ids or bad ids.
NllResult score_tokens(const Transformer& transformer, KVCache& cache, std::span<const int> ids,
                       int chunk_tokens = 0, ForwardObserver* observer = nullptr);

/// score_tokens on a fresh cache.
NllResult score_tokens(const Transformer& transformer, std::span<const int> ids,
                       int chunk_tokens = 0, ForwardObserver* observer = nullptr);

}  // namespace kvcompact
