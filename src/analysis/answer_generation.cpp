#include "analysis/answer_generation.h"

#include <fmt/format.h>

#include "io/error.h"

namespace kvcompact {

int argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

GeneratedAnswer generate_answer(const Model& model, const std::string& prompt, int max_new_tokens,
                                const std::vector<std::string>& stop, ForwardObserver* observer) {
  if (max_new_tokens < 1)
    throw Error(fmt::format("answer generation: max_new_tokens {} < 1", max_new_tokens));
  if (!model.tokenizer) throw Error(fmt::format("{}: model has no tokenizer", model.path));
  const Tokenizer& tok = *model.tokenizer;
  GeneratedAnswer out;
  const std::vector<int> ids = tok.encode(prompt, true);
  if (ids.empty()) throw Error("answer generation: the prompt encodes to no tokens");
  out.prompt_tokens = static_cast<int>(ids.size());
  Transformer tr(model.config, model.weights);
  KVCache cache = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::Last;
  o.observer = observer;
  std::vector<float> logits = tr.forward(ids, cache, o);
  int prev = ids.back();
  std::string text;
  for (int step = 0; step < max_new_tokens; ++step) {
    const int next = argmax(logits.data(), model.config.vocab_size);
    if (next == tok.eos_id() || next == tok.bos_id()) {
      out.stopped = true;
      break;
    }
    out.tokens.push_back(next);
    text += tok.decode_token(prev, next);
    prev = next;
    std::size_t cut = std::string::npos;
    for (const std::string& s : stop)
      if (!s.empty()) cut = std::min(cut, text.find(s));
    if (cut != std::string::npos) {
      text.resize(cut);
      out.stopped = true;
      break;
    }
    if (step + 1 == max_new_tokens) break;
    const int one[1] = {next};
    logits = tr.forward(one, cache, o);
  }
  out.text = std::move(text);
  return out;
}

}  // namespace kvcompact
