// `kvcompact logits` and `kvcompact generate`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "studies/qa_eval.h"
#include "cli_model.h"
#include "core/error.h"
#include "compaction/online_compaction.h"
#include "compaction/method_spec.h"
#include "model/generate.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact::cli {

Runner register_logits(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string prompt;
    int top = 10;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("logits", "next-token distribution after a prompt (top K)");
  add_model_options(cmd, o->m);
  cmd->add_option("--prompt", o->prompt, "prompt text (encoded with BOS)");
  cmd->add_option("--top", o->top, "how many of the most likely tokens to show (ids past the tokenizer's "
                                   "vocabulary, a model's padding rows, are masked out)")->check(positive_number());
  add_common_options(cmd, common);
  return [o, &common] {
    Model model = load_model(o->m.model, o->m.tokenizer);
    Transformer transformer(model.config, model.weights);
    const std::vector<int> ids = model.tokenizer->encode(o->prompt, /*add_bos=*/true);
    if (ids.empty()) throw Error("--prompt: the prompt encodes to no tokens");
    warn_past_max_seq_len(static_cast<long long>(ids.size()), model.config.max_seq_len);
    KVCache cache = transformer.make_cache();
    const std::vector<float> logits = transformer.forward(ids, cache);
    // Rows of a padded vocabulary (ids >= the tokenizer's vocab_size, e.g. Qwen3's 151669..151935)
    // are no tokens: they are masked out, as generate does (not shown, not in the softmax).
    const int V = std::min(static_cast<int>(logits.size()), model.tokenizer->vocab_size());
    const float mx = *std::max_element(logits.begin(), logits.begin() + V);
    double z = 0;
    for (int i = 0; i < V; ++i) z += std::exp(static_cast<double>(logits[i]) - mx);
    const double log_z = mx + std::log(z);
    std::vector<int> order(static_cast<std::size_t>(V));
    std::iota(order.begin(), order.end(), 0);
    const int k = std::min(o->top, V);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
    nlohmann::json top = nlohmann::json::array();
    if (!common.json) fmt::print("{} prompt tokens; top {} next tokens:\n{:>6}  {:>10}  {:>10}  piece\n", ids.size(), k, "id", "logit", "logprob");
    for (int i = 0; i < k; ++i) {
      const int id = order[i];
      const double lp = logits[id] - log_z;
      if (common.json)
        top.push_back({{"id", id}, {"piece", model.tokenizer->piece(id)}, {"logit", logits[id]}, {"logprob", lp}});
      else
        fmt::print("{:>6}  {:>10.4f}  {:>10.4f}  {:?}\n", id, logits[id], lp, model.tokenizer->piece(id));
    }
    if (common.json) print_json({{"prompt_tokens", ids.size()}, {"top", top}});
    return 0;
  };
}

Runner register_generate(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string prompt;
    int steps = 256;
    float temperature = 1.0f, top_p = 0.9f;
    unsigned long long seed = 0;
    std::string cache;
    bool chat = false;
    int compact_at = 0, keep_recent = 64, max_compactions = 0;
    double compact_ratio = 0.1;
    std::string compact_method = "am";
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("generate", "generate text (temperature 0 = greedy)");
  add_model_options(cmd, o->m);
  cmd->add_option("--prompt", o->prompt, "prompt text (encoded with BOS)");
  cmd->add_option("--steps", o->steps, "positions to run, prompt included (llama2.c -n)")->check(positive_number());
  cmd->add_option("--temperature", o->temperature, "softmax temperature; 0 = greedy")->check(non_negative_number());
  cmd->add_option("--top-p", o->top_p, "nucleus sampling mass in (0, 1); >= 1 samples the full distribution");
  cmd->add_option("--seed", o->seed, "random seed (0 = time-based)");
  cmd->add_option("--cache", o->cache,
                  "continue from a saved .kvc cache (kvcompact compact): the prompt is encoded without BOS "
                  "and fed after the context; --steps then counts generated tokens");
  cmd->add_flag("--chat", o->chat,
                "wrap the prompt as a user message with the model's chat template (tokenizer_config.json of an HF "
                "checkpoint or beside --tokenizer tokenizer.json), generation prompt added");
  cmd->add_option("--compact-at", o->compact_at,
                  "compact during generation: whenever a head holds this many entries, compact all but the newest "
                  "--keep-recent of them to --compact-ratio with --compact-method, then continue (0 = never)");
  cmd->add_option("--keep-recent", o->keep_recent, "with --compact-at: newest entries kept verbatim (default 64)");
  cmd->add_option("--compact-ratio", o->compact_ratio, "with --compact-at: keep ratio of the older entries (default 0.1)");
  cmd->add_option("--compact-method", o->compact_method, "with --compact-at: method spec (default am)");
  cmd->add_option("--max-compactions", o->max_compactions, "with --compact-at: at most this many (0 = no limit)");
  add_common_options(cmd, common);
  return [o, &common] {
    if (o->compact_at < 0) throw Error(fmt::format("--compact-at {}: must be >= 0", o->compact_at));
    if (o->compact_at > 0 && !o->cache.empty()) throw Error("--compact-at: not with --cache");
    if (!(o->top_p > 0.0f && o->top_p <= 1.0f))
      throw Error(fmt::format("--top-p {}: must be in (0, 1] (1 samples the full distribution)", o->top_p));
    std::string prompt = o->prompt;
    std::shared_ptr<const ChatTemplate> chat;
    if (o->chat) {
      chat = find_chat_template(o->m.model, o->m.tokenizer);
      prompt = chat_wrap_prompt(*chat, prompt);
    }
    if (!o->cache.empty())
      return run_generate_from_cache({o->m.model, o->m.tokenizer, o->cache, prompt, o->steps,
                                      o->temperature, o->top_p, o->seed},
                                     common);
    Model model = load_model(o->m.model, o->m.tokenizer);
    // generate() encodes with BOS: a template that writes the BOS token itself (Llama 3) must not
    // get a second one.
    if (chat && model.tokenizer->adds_bos() && !chat->bos_token.empty() && prompt.starts_with(chat->bos_token))
      prompt.erase(0, chat->bos_token.size());
    warn_past_max_seq_len(o->steps, model.config.max_seq_len);
    Transformer transformer(model.config, model.weights);
    uint64_t seed = o->seed ? o->seed : static_cast<uint64_t>(std::time(nullptr));
    Sampler sampler(model.tokenizer->vocab_size(), o->temperature, o->top_p, seed);  // padded rows masked out
    std::function<void(std::string_view)> stream;
    if (!common.json)
      stream = [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      };
    std::vector<OnlineCompactionEvent> events;
    GenerationResult r;
    if (o->compact_at > 0) {
      OnlineCompactionOptions oc;
      oc.limit = o->compact_at;
      oc.keep_recent = o->keep_recent;
      oc.ratio = o->compact_ratio;
      oc.method = parse_method_spec(o->compact_method);
      oc.max_compactions = o->max_compactions;
      oc.seed = seed;
      r = generate_with_online_compaction(transformer, *model.tokenizer, prompt, o->steps, sampler, oc, &events, stream);
    } else {
      r = generate(transformer, *model.tokenizer, prompt, o->steps, sampler, stream);
    }
    if (common.json) {
      nlohmann::json ev = nlohmann::json::array();
      for (const auto& e : events)
        ev.push_back({{"tokens_fed", e.tokens_fed}, {"entries_before", e.entries_before},
                      {"entries_after", e.entries_after}, {"seconds", e.seconds}});
      print_json({{"text", r.text}, {"prompt_tokens", r.prompt_tokens}, {"generated", r.generated},
                  {"positions", r.positions}, {"stopped", r.stopped}, {"seed", seed}, {"chat", o->chat},
                  {"compactions", ev}});
    } else {
      std::fputc('\n', stdout);
    }
    return 0;
  };
}

}  // namespace kvcompact::cli
