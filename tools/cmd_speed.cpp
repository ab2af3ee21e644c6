// `kvcompact speed`: prefill and decode tokens/s of a model, the figures llama.cpp's llama-bench
// reports as pp<N> and tg<N> (bench/vs_llama_cpp.py prints them next to llama.cpp's).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli_model.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "ops/isa.h"
#include "ops/matmul.h"

namespace kvcompact::cli {

Runner register_speed(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    int prompt_tokens = 512, gen_tokens = 32, runs = 3;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("speed", "time prefill (pp) and decode (tg) in tokens/s, medians over --runs");
  add_model_options(cmd, o->m);
  add_common_options(cmd, common);
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prefill length (one forward call)")->check(positive_number());
  cmd->add_option("--gen-tokens", o->gen_tokens, "decoded tokens, one forward call each, after the prompt")
      ->check(positive_number());
  cmd->add_option("--runs", o->runs, "repetitions (the median is reported)")->check(positive_number());
  return [o, &common] {
    Model model = load_model(o->m.model, o->m.tokenizer);
    const Transformer tr(model.config, model.weights);
    const int V = model.config.vocab_size;
    if (o->prompt_tokens + o->gen_tokens > model.config.max_seq_len)
      throw Error(fmt::format("--prompt-tokens {} + --gen-tokens {} exceed the model's max_seq_len {}",
                              o->prompt_tokens, o->gen_tokens, model.config.max_seq_len));
    // Token ids as llama-bench draws them: fixed pseudo-random ids (content does not change speed).
    std::vector<int> prompt(static_cast<std::size_t>(o->prompt_tokens));
    std::uint64_t s = 42;
    for (int& t : prompt) {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      t = static_cast<int>((s >> 33) % static_cast<std::uint64_t>(V));
    }
    using clock = std::chrono::steady_clock;
    std::vector<double> pp, tg;
    for (int r = 0; r < o->runs + 1; ++r) {  // run 0 warms up (page-in of the mapped weights)
      KVCache cache = tr.make_cache();
      ForwardOptions opt;
      opt.logits = LogitsMode::Last;
      const auto t0 = clock::now();
      std::vector<float> logits = tr.forward(prompt, cache, opt);
      const auto t1 = clock::now();
      for (int g = 0; g < o->gen_tokens; ++g) {
        const int next[1] = {static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin())};
        logits = tr.forward(next, cache, opt);
      }
      const auto t2 = clock::now();
      if (r == 0) continue;
      pp.push_back(o->prompt_tokens / std::chrono::duration<double>(t1 - t0).count());
      tg.push_back(o->gen_tokens / std::chrono::duration<double>(t2 - t1).count());
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
    };
    const double pp_m = median(pp), tg_m = median(tg);
    if (common.json) {
      print_json({{"model", model.path}, {"prompt_tokens", o->prompt_tokens}, {"gen_tokens", o->gen_tokens},
                  {"isa", isa_name(kernel_isa())}, {"fast_quant", matmul_mode() == MatmulMode::FastQuant},
                  {"runs", o->runs}, {"pp_tokens_per_s", pp_m}, {"tg_tokens_per_s", tg_m},
                  {"pp_runs", pp}, {"tg_runs", tg}});
    } else {
      std::printf("%s\npp%d %.1f tokens/s, tg%d %.1f tokens/s (median of %d runs)\n", model.path.c_str(),
                  o->prompt_tokens, pp_m, o->gen_tokens, tg_m, o->runs);
    }
    return 0;
  };
}

}  // namespace kvcompact::cli
