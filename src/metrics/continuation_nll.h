// NLL of a continuation given a cache that already holds its context.
#pragma once

#include <span>

#include "metrics/perplexity.h"
#include "core/kv_cache.h"
#include "model/transformer.h"

namespace kvcompact {

/// Total NLL (nats) of `tokens` [m >= 1] continuing the context held in `cache`: the first token is
/// scored from `first_logits` [vocab] (the logits after the context's last token), tokens 1..m-1
/// teacher-forced by feeding tokens 0..m-2 over the cache (at positions cache.next_position, ...).
/// The cache is taken by value: the caller's cache is unchanged. Returns {total_nll, m}.
/// Throws Error for an empty `tokens`, bad ids, or a first_logits of wrong size.
NllResult continuation_nll(const Transformer& transformer, KVCache cache,
                           std::span<const float> first_logits, std::span<const int> tokens);

}  // namespace kvcompact
