// Autoregressive text generation with llama2.c run.c `generate` semantics.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/tokenizer.h"
#include "core/kv_cache.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {

/// What generate() produced.
struct GenerationResult {
  std::vector<int> prompt_tokens;  ///< the encoded prompt, BOS first
  std::vector<int> generated;      ///< sampled ids, in order (a stopping BOS/EOS is not included)
  std::string text;     ///< every printed piece: prompt pieces after BOS, then generated pieces
  int positions = 0;    ///< forward positions run (<= steps)
  bool stopped = false; ///< true when BOS or EOS was sampled before `steps` positions
};

/// Generates text as llama2.c run.c generate(): the prompt is encoded with BOS; positions
/// 0 .. steps-1 are run, position p feeding token t_p and yielding t_{p+1}, which is the next
/// prompt token while inside the prompt and otherwise sampler.sample(logits). Generation stops
/// after `steps` positions (prompt included: steps 200 from an empty prompt prints 200 tokens) or
/// when BOS or EOS is produced. Each produced token's text is tokenizer.decode_token(prev, next);
/// it is appended to result.text and passed to on_text (if set) as soon as it exists.
/// The prompt (all but its last token) is fed in one prefill, equal to llama2.c's token-at-a-time.
/// `cache` (optional) must be empty or shaped for the model; a fresh one is used when null.
/// The sampler should be sized by the tokenizer (Sampler(tokenizer.vocab_size(), ...)): rows of a
/// model's padded vocabulary beyond the tokenizer's tokens are then never drawn.
/// `after_forward` (optional) is called after every forward call with the cache and every token
/// fed so far (BOS first); it may rewrite the cache (e.g. compact it during generation,
/// compaction/online_compaction.h) as long as next_position stays the number of tokens fed.
/// Throws Error for steps < 1, an empty encoded prompt, a tokenizer larger than the model
/// vocabulary or a sampler larger than the tokenizer.
GenerationResult generate(const Transformer& transformer, const Tokenizer& tokenizer,
                          std::string_view prompt, int steps, Sampler& sampler,
                          const std::function<void(std::string_view)>& on_text = {},
                          KVCache* cache = nullptr,
                          const std::function<void(KVCache&, std::span<const int>)>& after_forward = {});

}  // namespace kvcompact
