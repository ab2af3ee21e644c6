// `kvcompact influence`, `budget`, `plot` and `methods`: head influence curves, budgets, figures.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "budgets/budget_solver.h"
#include "studies/influence.h"
#include "cli_model.h"
#include "compaction/method_spec.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "io/qa_dataset.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "report/figures.h"
#include "report/mask_figure.h"
#include "report/svg_plot.h"
#include "loaders/model_loader.h"

namespace kvcompact::cli {

Runner register_influence(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data, ratios = "0:0.5:51", heads = "all", method = "am", out;
    double baseline = 0.05, context_frac = 0.6;
    int docs = 0;
    unsigned long long seed = 0;
    bool plain = false, png = false;
    std::string band = "sem";
    std::string qa, budgets, answers_cache, prompt_template = kDefaultQaPrompt;
    int max_answer_tokens = 32, max_context_tokens = 0;
    bool chat = false;
    std::string shard;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("influence",
                                 "head influence curves: delta NLL vs one KV head's ratio, others at a baseline");
  add_model_options(cmd, o->m);
  auto* data_opt = cmd->add_option("--data", o->data, "UTF-8 text; documents are separated by blank lines");
  auto* qa_opt = cmd->add_option("--qa", o->qa,
                                 "QuALITY-format JSONL instead of --data: context = each article, evaluated tokens "
                                 "= the reference answers (as qa-eval scores them)");
  data_opt->excludes(qa_opt);
  cmd->add_option("--answers-cache", o->answers_cache, "--qa: folder of qa-eval's reference-answer cache");
  cmd->add_option("--max-answer-tokens", o->max_answer_tokens, "--qa: reference answer length cap (tokens)")
      ->check(positive_number());
  cmd->add_option("--max-context-tokens", o->max_context_tokens, "--qa: article token cap (0 = max_seq_len minus question room)")
      ->check(non_negative_number());
  cmd->add_option("--prompt-template", o->prompt_template, "--qa: question prompt ({question} is replaced)");
  cmd->add_flag("--chat", o->chat, "--qa: wrap article + question as a user message with the model's chat template");
  cmd->add_option("--budgets", o->budgets,
                  "per-head budget proportions (kvcompact budget) for the heads not swept, at total ratio --baseline");
  cmd->add_option("--ratios", o->ratios, "ratio grid: start:stop:count or a comma list, in [0, 1]");
  cmd->add_option("--baseline", o->baseline, "ratio of every head not being swept (must be on the grid)")->check(ratio_number());
  cmd->add_option("--heads", o->heads, "all (every KV head of the global layers), or KV heads like L0H0,L3H1");
  cmd->add_option("--docs", o->docs, "use the first N documents")->check(positive_number());
  cmd->add_option("--method", o->method, "compaction method spec (see `kvcompact methods`)");
  cmd->add_option("--context-frac", o->context_frac, "fraction of each document's tokens used as context");
  cmd->add_option("--seed", o->seed, "seed (query subsampling, self-study, random method)");
  cmd->add_option("--out", o->out, "output folder (per-document files, influence.json/.csv, figure)")->required();
  cmd->add_flag("--plain", o->plain, "recompute every layer (no prefix reuse; for checking)");
  cmd->add_option("--band", o->band, "figure band: sem, std or none");
  cmd->add_flag("--png", o->png, "also write the figure as PNG");
  cmd->add_option("--shard", o->shard,
                  "I/N: run only shard I (from 0) of N of the documents x heads units, one file per unit in "
                  "--out/units; `kvcompact merge --out` builds influence.json");
  add_common_options(cmd, common);
  return [o, &common] {
    ShardSpec shard;
    if (!o->shard.empty()) shard = parse_shard(o->shard);
    Model model = load_model(o->m.model, o->m.tokenizer);
    InfluenceOptions opt;
    opt.grid = parse_ratio_grid(o->ratios);
    opt.baseline_ratio = o->baseline;
    baseline_index(opt.baseline_ratio, opt.grid);
    opt.heads = influence_heads(o->heads, model.config);
    opt.method = parse_method_spec(o->method);
    opt.context_frac = o->context_frac;
    opt.seed = o->seed;
    opt.reuse_prefix = !o->plain;
    opt.shard = shard;
    const BandKind band = parse_band_kind(o->band);
    if (o->data.empty() == o->qa.empty()) throw Error("influence: give one of --data FILE or --qa FILE.jsonl");
    if (o->chat && o->qa.empty()) throw Error("--chat: only with --qa");
    if (!o->budgets.empty()) {
      const BudgetSchedule s =
          read_budget_schedule_for(o->budgets, model.config.n_layers, model.config.n_kv_heads, model.config.sliding_layers());
      if (!(opt.baseline_ratio > 0)) throw Error("--budgets: needs --baseline above 0 (the budgets' total ratio)");
      opt.budget_proportions = s.proportions();
      opt.budgets_source = o->budgets;
    }
    InfluenceCurves curves;
    if (!o->qa.empty()) {
      std::vector<QaArticle> articles = read_qa_jsonl(o->qa);
      if (o->docs > 0 && o->docs < static_cast<int>(articles.size())) articles.resize(static_cast<std::size_t>(o->docs));
      QaEvalOptions qa;
      qa.answers_cache_dir = o->answers_cache;
      qa.max_answer_tokens = o->max_answer_tokens;
      qa.max_context_tokens = o->max_context_tokens;
      qa.prompt_template = o->prompt_template;
      if (o->chat) qa.chat = find_chat_template(o->m.model, o->m.tokenizer);
      curves = run_influence_qa(model, articles, opt, qa, o->out);
    } else {
      const auto docs = read_documents(o->data, o->docs);
      curves = run_influence(model, docs, opt, o->out);
    }
    if (shard.active()) {
      const StudyStatus st = study_status({o->out});
      for (const ShardStatus& s : st.shards)
        if (s.shard.index == shard.index && s.shard.count == shard.count) {
          if (common.json) {
            print_json({{"study", st.study.id}, {"shard", o->shard}, {"units", s.end - s.begin}, {"done", s.done},
                        {"study_units", st.units}, {"study_done", st.done}});
          } else {
            fmt::print("shard {}: {}/{} units done -> {}/units (study {}: {}/{} units; `kvcompact merge {}` "
                       "builds influence.{{json,csv,svg}})\n",
                       o->shard, s.done, s.end - s.begin, o->out, st.study.id, st.done, st.units, o->out);
          }
        }
      return 0;
    }
    write_influence_figures(o->out, curves, band, o->png);
    // Heads ranked by the area under their curve (trapezoid over the grid, nats/token x ratio).
    std::vector<std::pair<double, std::string>> area;
    for (const auto& h : curves.heads) area.emplace_back(h.area(), h.name());
    if (common.json) {
      nlohmann::json j = influence_curves_to_json(curves);
      j["outputs"] = {o->out + "/influence.json", o->out + "/influence.csv", o->out + "/influence.svg"};
      print_json(j);
      return 0;
    }
    std::sort(area.begin(), area.end());
    fmt::print("{} heads x {} ratios over {} documents -> {}/influence.{{json,csv,svg}}\n", curves.heads.size(),
               curves.grid.size(), curves.heads.empty() ? 0 : curves.heads[0].documents, o->out);
    fmt::print("heads by area under the delta-NLL curve (most negative = more keys help most):\n");
    for (const auto& [a, name] : area) fmt::print("  {:>6}  {:+.5f}\n", name, a);
    return 0;
  };
}

Runner register_budget(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::string curves, targets = "0.01,0.02,0.05,0.1", schedule = "optimized", out, paper_out;
    double floor = 0.1, pyramid_beta = 20;
    int units = 200, n_layers = 0, n_kv_heads = 0;
    bool png = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("budget", "per-head KV budgets from influence curves (or uniform / pyramid)");
  cmd->add_option("--curves", o->curves, "influence output folder or its influence.json");
  cmd->add_option("--targets", o->targets, "total keep ratios the proportions must serve");
  cmd->add_option("--schedule", o->schedule, "optimized (default; needs --curves), uniform or pyramid");
  cmd->add_option("--floor", o->floor, "each head keeps at least floor/H of the budget (0 allows empty heads)");
  cmd->add_option("--units", o->units, "solver resolution: proportions are multiples of 1/(H*units)");
  cmd->add_option("--pyramid-beta", o->pyramid_beta, "pyramid: bottom/top share parameter (PyramidKV beta, >= 1, default 20)");
  cmd->add_option("--layers", o->n_layers, "uniform/pyramid without curves: number of layers");
  cmd->add_option("--kv-heads", o->n_kv_heads, "uniform/pyramid without curves: KV heads per layer");
  cmd->add_option("-o,--out", o->out, "budgets JSON file")->required();
  cmd->add_flag("--png", o->png, "also write the heatmap as PNG");
  CLI::Option* paper_opt = cmd->add_option("--paper-out", o->paper_out,
                  "also write the proportions in the paper's flat form {\"L0H0\": p, ...} (its precomputed_budget_path)");
  add_common_options(cmd, common);
  return [o, &common, paper_opt] {
    if (paper_opt->count() > 0 && o->paper_out.empty()) throw Error("--paper-out: empty file name");
    if (!o->paper_out.empty() && std::filesystem::absolute(o->paper_out).lexically_normal() == std::filesystem::absolute(o->out).lexically_normal())
      throw Error(fmt::format("--paper-out {}: the same file as -o; give another name", o->paper_out));
    for (const std::string& f : {o->out, o->paper_out})
      if (!f.empty() && std::filesystem::is_directory(f)) throw Error(fmt::format("{}: is a folder, not a file name", f));
    std::vector<double> targets = parse_number_list("--targets", o->targets);
    std::unique_ptr<InfluenceCurves> curves;
    if (!o->curves.empty()) {
      std::string path = o->curves;
      if (std::filesystem::is_directory(path)) path += "/influence.json";
      curves = std::make_unique<InfluenceCurves>(read_influence_curves_json(path));
    }
    int L = curves ? curves->n_layers : o->n_layers, H = curves ? curves->n_kv_heads : o->n_kv_heads;
    if (!curves && o->schedule != "optimized" && (L < 1 || H < 1))
      throw Error(fmt::format("budget --schedule {}: give --curves DIR, or --layers and --kv-heads", o->schedule));
    if (curves && (o->n_layers > 0 || o->n_kv_heads > 0) && (o->n_layers != L || o->n_kv_heads != H))
      throw Error(fmt::format("budget: --layers {} --kv-heads {} disagree with the curves ({} x {}); give one of them",
                              o->n_layers, o->n_kv_heads, L, H));
    if (!curves && o->schedule == "optimized") throw Error("budget: --schedule optimized needs --curves");
    BudgetSolverOptions so;
    so.targets = targets;
    so.floor = o->floor;
    so.units = o->units;
    BudgetSchedule s = named_schedule(o->schedule, L, H, curves ? curves->sliding_layers : std::vector<int>{}, so,
                                      curves.get(), o->pyramid_beta);
    if (curves && o->schedule != "optimized") set_predicted_delta(s, *curves);
    if (curves && !curves->grid.empty()) {
      // The additive model reads each head's curve at r_h = p_h * H * R (H: the compacted heads);
      // outside the grid it holds the nearest end value, which is an extrapolation: say so.
      const double H_all =
          static_cast<double>(s.n_layers - static_cast<int>(s.sliding_layers.size())) * s.n_kv_heads;
      double worst = 0, lowest = 1;
      for (const auto& h : s.heads)
        for (double R : targets) {
          worst = std::max(worst, h.proportion * H_all * R);
          if (h.proportion > 0) lowest = std::min(lowest, h.proportion * H_all * R);
        }
      if (worst > curves->grid.back() + 1e-12)
        std::fprintf(stderr,
                     "kvcompact: note: some head ratios reach %.3g, beyond the curves' last ratio %.3g; the "
                     "prediction holds the last value there (sweep a wider --ratios grid for these targets)\n",
                     worst, curves->grid.back());
      if (lowest < curves->grid.front() - 1e-12)
        std::fprintf(stderr,
                     "kvcompact: note: some head ratios fall to %.3g, below the curves' first ratio %.3g; the "
                     "prediction holds the first value there (sweep a --ratios grid that starts lower)\n",
                     lowest, curves->grid.front());
    }
    write_budget_schedule(o->out, s);
    if (!o->paper_out.empty()) write_file_atomic(o->paper_out, budget_schedule_to_paper_json(s).dump(1) + "\n");
    const std::string svg = budget_heatmap(s);
    std::string base = o->out.size() > 5 && o->out.ends_with(".json") ? o->out.substr(0, o->out.size() - 5) : o->out;
    write_figure(base + ".svg", svg);
    if (o->png) write_figure(base + ".png", svg);
    if (common.json) {
      print_json(budget_schedule_to_json(s));
      return 0;
    }
    fmt::print("{} schedule for {} layers x {} KV heads{} -> {} (heatmap {}.svg)\n", s.schedule, s.n_layers,
               s.n_kv_heads,
               s.sliding_layers.empty()
                   ? std::string()
                   : fmt::format(" (sliding-window layers {} never compacted, left out)", fmt::join(s.sliding_layers, ",")),
               o->out, base);
    for (const auto& [R, D] : s.predicted_delta)
      fmt::print("  predicted delta NLL at total ratio {}: {:+.5f} nats/token (additive model, relative to every head at the curves' baseline ratio)\n", R, D);
    return 0;
  };
}

Runner register_plot(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::string input, out, band = "sem", heads, metrics;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("plot", "redraw a figure from its JSON (influence curves, budgets, budget-eval points, mask-eval or a peer comparison)");
  cmd->add_option("input", o->input, "influence.json, a budgets JSON file, budget-eval --out-json, mask_eval.json or a comparison JSON (bench/peers/compare_kvpress_ruler.py)")->required();
  cmd->add_option("-o,--out", o->out, "figure file (.svg or .png)")->required();
  cmd->add_option("--band", o->band, "influence: sem, std or none");
  cmd->add_option("--heads", o->heads, "influence: heads to show (default all)");
  cmd->add_option("--metrics", o->metrics,
                  "mask-eval: metrics to draw, comma list in colour order (blue, red, green, ...; default all)");
  add_common_options(cmd, common);
  return [o, &common] {
    const nlohmann::json j = read_json_file(o->input);
    std::string svg, kind;
    if (j.value("kind", "") == "budget-frontier") {  // written by budget-eval --out-json
      std::vector<FrontierPoint> points;
      try {
        for (const auto& p : j.at("points"))
          points.push_back({p.at("series").get<std::string>(), p.at("ratio").get<double>(),
                            p.at("delta_nll_mean").get<double>(), p.at("delta_nll_sem").get<double>()});
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("{}: points: {}", o->input, e.what()));
      }
      svg = frontier_figure(points);
      kind = "budget frontier";
    } else if (j.value("kind", "") == "comparison") {  // written by bench/peers/compare_kvpress*.py
      std::vector<ComparisonPoint> points;
      std::string title, y_title, peer;
      try {
        title = j.at("title").get<std::string>();
        y_title = j.at("y_title").get<std::string>();
        peer = j.value("peer", std::string("peer"));
        for (const auto& p : j.at("points"))
          points.push_back({p.at("method").get<std::string>(), p.at("peer").get<bool>(), p.at("ratio").get<double>(),
                            p.at("mean").get<double>(), p.at("sem").get<double>()});
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("{}: {}", o->input, e.what()));
      }
      svg = comparison_figure(points, title, y_title, peer);
      kind = "comparison";
    } else if (j.value("kind", "") == "mask-eval") {  // written by mask-eval (DIR/mask_eval.json)
      MaskEvalResult r = mask_eval_from_json(j, o->input);
      if (!o->metrics.empty()) {
        const std::vector<std::string> want = split_list(o->metrics, "--metrics");
        for (const std::string& m : want)
          if (std::find(r.metrics.begin(), r.metrics.end(), m) == r.metrics.end())
            throw Error(fmt::format("--metrics: {} has no metric \"{}\" (it has {})", o->input, m,
                                    fmt::join(r.metrics, ", ")));
        r.metrics = want;
        std::erase_if(r.rows, [&](const MaskEvalRow& row) {
          return std::find(want.begin(), want.end(), row.metric) == want.end();
        });
      }
      svg = mask_eval_figure(r);
      kind = "head masking";
    } else if (j.contains("schedule")) {
      svg = budget_heatmap(budget_schedule_from_json(j, o->input));
      kind = "budget heatmap";
    } else {
      if (!j.is_object() || !j.contains("grid") || !j.contains("heads"))
        throw Error(fmt::format("{}: not an influence.json, budgets, budget-eval or mask_eval.json file", o->input));
      InfluenceCurves c = influence_curves_from_json(j, o->input);
      std::vector<HeadId> heads;
      if (!o->heads.empty()) heads = parse_head_names(o->heads, c.n_layers, c.n_kv_heads);
      svg = influence_figure(c, heads, parse_band_kind(o->band));
      kind = "influence curves";
    }
    write_figure(o->out, svg);
    if (common.json) print_json({{"figure", o->out}, {"kind", kind}});
    else fmt::print("{} -> {}\n", kind, o->out);
    return 0;
  };
}

Runner register_methods(CLI::App& app, CommonOptions& common) {
  auto* cmd = app.add_subcommand("methods", "list compaction methods and their options (method specs)");
  add_common_options(cmd, common);
  return [&common] {
    if (common.json) print_json({{"help", method_help()}});
    else fmt::print("{}", method_help());
    return 0;
  };
}

}  // namespace kvcompact::cli
