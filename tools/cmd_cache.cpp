// `kvcompact compact` (save a compacted context cache as a .kvc file) and the `--cache` variants of
// `generate` and `ppl` that continue from such a file.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <ctime>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "budgets/budget_solver.h"
#include "compaction/compact_context.h"
#include "metrics/continuation_nll.h"
#include "cli_model.h"
#include "compaction/chunked.h"
#include "compaction/compact_cache.h"
#include "compaction/reference_queries.h"
#include "core/error.h"
#include "loaders/kvc_file.h"
#include "io/npy_file.h"
#include "io/atomic_file.h"
#include "io/text_documents.h"
#include "model/generate_from_cache.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "core/model_fingerprint.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact::cli {
namespace {

std::string trim(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\r\n");
  if (a == std::string::npos) return "";
  const std::size_t b = s.find_last_not_of(" \t\r\n");
  return s.substr(a, b - a + 1);
}

/// Loads a .kvc file and refuses it unless it was made for `model`.
KvcFile load_cache_for(const Model& model, const std::string& path) {
  KvcFile f = read_kvc_file(path);
  check_kvc_model(f, path, model.config, model_fingerprint(model.config, model.weights), model.path);
  return f;
}

/// `compact --dump-heads DIR`: every head's K [T, d], V [T, d], Q [n, d] and, compacted alone
/// (single-threaded, timed), its selected indices [t], beta [t] and C2 [t, d]; manifest.json lists them.
void dump_heads(const std::string& dir, const ContextPrefill& prefill, const CompactionOptions& co, int n_layers) {
  if (is_layer_scoped(co.method))
    throw Error(fmt::format("--dump-heads: {} selects across a layer's heads; dump a per-head method", to_string(co.method)));
  std::filesystem::create_directories(dir);
  const KVCache& full = prefill.cache;
  const int H = full.n_kv_heads(), d = full.head_dim();
  nlohmann::json heads = nlohmann::json::array();
  for (int l = 0; l < full.n_layers(); ++l)
    for (int h = 0; h < H; ++h) {
      const HeadCache& src = full.head(l, h);
      const std::vector<float>& q = prefill.queries.at(l, h);
      HeadCompactionInput in;
      in.keys = src.keys.data();
      in.values = src.values.data();
      in.queries = q.data();
      in.T = static_cast<int>(src.length());
      in.n_queries = prefill.queries.count(l, h);
      in.head_dim = d;
      in.context_queries = prefill.context_queries.at(l, h).data();
      in.group_size = in.T > 0 ? prefill.context_queries.count(l, h) / in.T : 1;
      if (!co.rope_inv_freq.empty()) in.rope_inv_freq = co.rope_inv_freq.data();
      in.rope_half_split = co.rope_half_split;
      const int t = kept_entries(co.ratio, in.T);
      const auto t0 = std::chrono::steady_clock::now();
      const CompactedHead c = compact_head(co.method, in, t, l, n_layers, head_seed(co.seed, l, h, H));
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      const std::string base = fmt::format("{}/L{}H{}_", dir, l, h);
      write_npy(base + "K.npy", src.keys, {in.T, d});
      write_npy(base + "V.npy", src.values, {in.T, d});
      write_npy(base + "Q.npy", q, {in.n_queries, d});
      const std::vector<std::int32_t> sel(c.selected.begin(), c.selected.end());
      write_npy(base + "selected.npy", sel, {c.size()});
      write_npy(base + "beta.npy", c.beta, {c.size()});
      write_npy(base + "C2.npy", c.values, {c.size(), d});
      heads.push_back({{"layer", l}, {"kv_head", h}, {"T", in.T}, {"n_queries", in.n_queries}, {"t", c.size()},
                       {"seconds", secs}});
    }
  write_file_atomic(dir + "/manifest.json",
                    nlohmann::json({{"method", to_string(co.method)}, {"ratio", co.ratio}, {"head_dim", d},
                                    {"heads", heads}}).dump(1) + "\n");
}

}  // namespace

Runner register_compact(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string context, method = "am", out;
    double ratio = 0.1;
    unsigned long long seed = 0;
    std::string budgets, dump_heads, diagnostics;
    double max_head_ratio = 1.0;
    int chunk = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("compact", "compact a context's KV cache and save it as a .kvc file");
  add_model_options(cmd, o->m);
  cmd->add_option("--context", o->context, "UTF-8 text file: its whole text (trimmed) is one context, encoded with BOS")
      ->required();
  cmd->add_option("--ratio", o->ratio, "keep ratio r in [0, 1]")->check(ratio_number());
  cmd->add_option("--method", o->method, fmt::format("compaction method spec (`kvcompact methods`), families: {}", fmt::join(method_family_names(), ", ")));
  cmd->add_option("-o,--output", o->out, "the .kvc file to write")->required();
  cmd->add_option("--seed", o->seed, "seed of the random baseline");
  cmd->add_option("--budgets", o->budgets, "per-head budget proportions (kvcompact budget); --ratio is then the total ratio");
  cmd->add_option("--max-head-ratio", o->max_head_ratio,
                  "with --budgets: no head keeps more than this fraction of its keys; the excess is water-filled "
                  "over the other heads (the paper's max_ratio_per_head; default 1 = no cap)");
  cmd->add_option("--chunk", o->chunk,
                  "chunked compaction in KV space: compact the context in chunks of N tokens, each with its own "
                  "repeat-prefill queries (0 = the whole context at once)");
  cmd->add_option("--diagnostics", o->diagnostics,
                  "also write per-head attention diagnostics (relative L2 error, cosine, attention-mass error of the "
                  "compacted heads on the fitted reference queries and on held-out context queries) to this JSON file");
  cmd->add_option("--dump-heads", o->dump_heads,
                  "also write, per layer and KV head, K, V, the reference queries Q and the method's result "
                  "(selected, beta, C2, seconds; each head compacted alone) as .npy files + manifest.json to this folder");
  add_common_options(cmd, common);
  return [o, &common] {
    CompactionOptions co;
    co.method = parse_method_spec(o->method);
    co.ratio = o->ratio;
    co.seed = o->seed;
    check_chunk_size(o->chunk);
    co.chunk_size = o->chunk;
    Model model = load_model(o->m.model, o->m.tokenizer);
    set_rope(co, model.config);
    const std::string text = trim(read_text_file(o->context));
    const std::vector<int> ids = model.tokenizer->encode(text, /*add_bos=*/true);
    if (ids.size() < 2) throw Error(fmt::format("{}: the context encodes to {} tokens (need at least 2)", o->context, ids.size()));
    const ContextPrefill prefill = prefill_for_compaction(model, ids, co);
    std::vector<int> uniform_lengths;  // per head: a uniform budget of the same total
    if (o->max_head_ratio != 1.0 && o->budgets.empty()) throw Error("--max-head-ratio: only with --budgets");
    if (!o->budgets.empty()) {
      const std::vector<int> sliding = model.config.sliding_layers();
      const int H = model.config.n_kv_heads;
      const BudgetSchedule s = read_budget_schedule_for(o->budgets, model.config.n_layers, H, sliding);
      const std::vector<double> p = s.proportions();
      const std::vector<int> lengths(p.size(), static_cast<int>(ids.size()));
      co.head_budgets = compacted_head_budgets(p, lengths, H, sliding, co.ratio, o->max_head_ratio);
      uniform_lengths = compacted_head_budgets(std::vector<double>(p.size(), 1.0 / p.size()), lengths, H, sliding, co.ratio);
    }
    if (!o->dump_heads.empty()) dump_heads(o->dump_heads, prefill, co, model.config.n_layers);
    const CompactedContext compacted = compact_context(model, ids, prefill, co);
    const KvcFile& f = compacted.file;
    // The uniform cache's bytes from its lengths (the same heads carrying beta): no second compaction.
    // Sliding-window layers are never compacted: they keep their length in both caches.
    for (int l = 0; l < f.cache.n_layers() && !uniform_lengths.empty(); ++l)
      if (f.cache.sliding(l))
        for (int h = 0; h < f.cache.n_kv_heads(); ++h)
          uniform_lengths[static_cast<std::size_t>(l * f.cache.n_kv_heads() + h)] =
              static_cast<int>(f.cache.head(l, h).length());
    const std::size_t uniform_bytes = uniform_lengths.empty() ? 0 : f.cache.bytes_with_lengths(uniform_lengths);
    write_kvc_file(o->out, f);
    const auto file_bytes = std::filesystem::file_size(o->out);
    nlohmann::json diag;
    if (!o->diagnostics.empty()) {
      diag = compaction_diagnostics(prefill, f.cache);
      diag["method"] = f.method;
      diag["ratio"] = f.ratio;
      diag["context_tokens"] = ids.size();
      write_file_atomic(o->diagnostics, diag.dump(2) + "\n");
    }
    if (common.json) {
      print_json({{"output", o->out}, {"context_tokens", ids.size()}, {"method", f.method}, {"ratio", f.ratio},
                  {"kept_entries", f.cache.total_entries()}, {"full_entries", prefill.cache.total_entries()},
                  {"cache_bytes", f.cache.bytes()}, {"full_cache_bytes", prefill.cache.bytes()},
                  {"file_bytes", file_bytes}, {"model_fingerprint", fingerprint_hex(f.model_fingerprint)},
                  {"budgets", o->budgets}, {"uniform_cache_bytes_same_total", uniform_bytes},
                  {"diagnostics", diag.is_null() ? nlohmann::json() : diag["mean"]}});
    } else {
      fmt::print("{}: {} context tokens, {} at ratio {}: {} of {} entries kept ({} of {} cache bytes), file {} bytes\n",
                 o->out, ids.size(), f.method, f.ratio, f.cache.total_entries(), prefill.cache.total_entries(),
                 f.cache.bytes(), prefill.cache.bytes(), file_bytes);
      if (!o->budgets.empty())
        fmt::print("per-head budgets from {}: {} bytes; a uniform cache of the same total: {} bytes\n", o->budgets,
                   f.cache.bytes(), uniform_bytes);
      if (!diag.is_null()) {
        const auto& fit = diag["mean"]["fit"];
        const auto& held = diag["mean"]["heldout"];
        fmt::print("diagnostics -> {} (means over heads; fit / held-out queries): relative L2 {:.4f} / {:.4f}, "
                   "cosine {:.4f} / {:.4f}, attention-mass error {:.4f} / {:.4f}\n",
                   o->diagnostics, fit["rel_l2_mean"].get<double>(), held["rel_l2_mean"].get<double>(),
                   fit["cosine_mean"].get<double>(), held["cosine_mean"].get<double>(),
                   fit["mass_err_mean"].get<double>(), held["mass_err_mean"].get<double>());
      }
    }
    return 0;
  };
}

int run_generate_from_cache(const GenerateFromCacheArgs& a, const CommonOptions& common) {
  Model model = load_model(a.model, a.tokenizer);
  KvcFile f = load_cache_for(model, a.cache);
  if (f.context_tokens.empty())
    throw Error(fmt::format("{}: the cache holds no context tokens; there is nothing to continue", a.cache));
  Transformer transformer(model.config, model.weights);
  const uint64_t seed = a.seed ? a.seed : static_cast<uint64_t>(std::time(nullptr));
  Sampler sampler(model.tokenizer->vocab_size(), a.temperature, a.top_p, seed);  // padded rows masked out
  std::function<void(std::string_view)> stream;
  if (!common.json)
    stream = [](std::string_view piece) {
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
    };
  ContinueOptions copt;
  copt.max_new_tokens = a.steps;
  const long long last_position = static_cast<long long>(f.cache.next_position) +
                                  static_cast<long long>(model.tokenizer->encode(a.prompt, false).size()) + a.steps;
  warn_past_max_seq_len(last_position, model.config.max_seq_len);
  GenerationResult r = generate_from_cache(transformer, *model.tokenizer, f.cache, f.last_logits,
                                           f.context_tokens.back(), a.prompt, sampler, copt, stream);
  if (common.json) {
    print_json({{"text", r.text}, {"prompt_tokens", r.prompt_tokens}, {"generated", r.generated},
                {"context_tokens", f.context_tokens.size()}, {"cache_entries", f.cache.total_entries()},
                {"method", f.method}, {"ratio", f.ratio}, {"stopped", r.stopped}, {"seed", seed}});
  } else {
    std::fputc('\n', stdout);
  }
  return 0;
}

int run_ppl_from_cache(const PplFromCacheArgs& a, const CommonOptions& common) {
  Model model = load_model(a.model, a.tokenizer);
  KvcFile f = load_cache_for(model, a.cache);
  Transformer transformer(model.config, model.weights);
  std::vector<int> ids = model.tokenizer->encode(trim(read_text_file(a.data)), /*add_bos=*/false);
  if (ids.empty()) throw Error(fmt::format("{}: the text encodes to no tokens", a.data));
  if (a.max_tokens > 0) {
    if (static_cast<long long>(ids.size()) < a.max_tokens)
      throw Error(fmt::format("{}: has {} tokens; --max-tokens {} needs that many", a.data, ids.size(), a.max_tokens));
    ids.resize(static_cast<std::size_t>(a.max_tokens));
  }
  const long long last_position = static_cast<long long>(f.cache.next_position) + static_cast<long long>(ids.size());
  warn_past_max_seq_len(last_position, model.config.max_seq_len);
  const NllResult r = continuation_nll(transformer, f.cache, f.last_logits, ids);
  const double nll = r.mean_nll();
  if (!std::isfinite(nll)) throw Error(fmt::format("{}: NLL is not finite", a.data));
  if (common.json) {
    print_json({{"nll", nll}, {"ppl", std::exp(nll)}, {"tokens", r.tokens}, {"context_tokens", f.context_tokens.size()},
                {"cache_entries", f.cache.total_entries()}, {"method", f.method}, {"ratio", f.ratio}});
  } else {
    fmt::print("nll {:.6f} nats/token, perplexity {:.4f} over {} tokens after a {}-token context ({} at ratio {}, {} cache entries)\n",
               nll, std::exp(nll), r.tokens, f.context_tokens.size(), f.method, f.ratio, f.cache.total_entries());
  }
  return 0;
}

}  // namespace kvcompact::cli
