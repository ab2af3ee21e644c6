// Text generation that continues from an existing (e.g. compacted or loaded) KV cache.
#pragma once

#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "io/tokenizer.h"
#include "model/generate.h"
#include "core/kv_cache.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {

/// Options of generate_from_cache.
struct ContinueOptions {
  int max_new_tokens = 256;      ///< sampled tokens at most (>= 1)
  bool stop_at_newline = false;  ///< also stop when a sampled token's text contains '\n'
};

/// Continues a context held in `cache` (next_position = T). `last_logits` [vocab] are the logits
/// after the context's last token `last_token` (needed when the prompt is empty, and to decode the
/// first piece). The prompt is encoded WITHOUT BOS and fed in one prefill at positions T, T+1, ...;
/// then up to max_new_tokens tokens are sampled one at a time. Stops on BOS or EOS (and on a
/// newline piece when stop_at_newline); the stopping token is not appended to `generated` or
/// `text` but is returned in `stop_token` (-1 when the limit was reached).
/// result.prompt_tokens holds the prompt's ids (no BOS); result.text the prompt pieces then the
/// generated pieces; result.positions the positions run (prompt + sampled tokens fed).
/// The cache ends holding the prompt and every generated token that was fed.
/// Throws Error for max_new_tokens < 1, vocabulary mismatches, or a last_logits of wrong size.
GenerationResult generate_from_cache(const Transformer& transformer, const Tokenizer& tokenizer,
                                     KVCache& cache, std::span<const float> last_logits,
                                     int last_token, std::string_view prompt, Sampler& sampler,
                                     const ContinueOptions& options,
                                     const std::function<void(std::string_view)>& on_text = {},
                                     int* stop_token = nullptr);

}  // namespace kvcompact
