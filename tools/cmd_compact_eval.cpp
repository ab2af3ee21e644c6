// `kvcompact compact-eval`: quality cost of KV-cache compaction per method and keep ratio.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <tuple>

#include "studies/compact_eval.h"
#include "studies/budget_eval.h"
#include "studies/compact_eval_shards.h"
#include "cli_model.h"
#include "study_reports.h"
#include "io/atomic_file.h"
#include "compaction/chunked.h"
#include "core/error.h"
#include "io/text_documents.h"
#include "budgets/budget_solver.h"
#include "report/figures.h"
#include "report/svg_plot.h"
#include "report/table.h"
#include "loaders/model_loader.h"

namespace kvcompact::cli {

int report_compact_eval(const CompactEvalResult& r, nlohmann::json header, const CompactEvalReportFiles& files,
                      bool as_json) {
  Table table({"method", "ratio", "delta_nll_mean", "delta_nll_sem", "nll_mean", "kept_entries",
               "cache_bytes", "full_cache_bytes", "compaction_seconds", "compaction_seconds_per_head"},
              4);
  for (const auto& row : r.rows)
    table.add_row({row.method, row.ratio, row.delta_nll_mean, row.delta_nll_sem, row.nll_mean,
                   static_cast<long long>(std::llround(row.kept_entries)), static_cast<long long>(std::llround(row.cache_bytes)),
                   static_cast<long long>(std::llround(row.full_cache_bytes)), row.compaction_seconds, row.compaction_seconds_per_head});
  nlohmann::json j = std::move(header);
  j.update({{"documents", r.documents},
            {"full_nll_mean", r.full_nll_mean},
            {"mean_context_tokens", r.mean_context_tokens},
            {"mean_continuation_tokens", r.mean_continuation_tokens},
            {"reference_seconds", r.reference_seconds},
            {"units", {{"nll", "nats/token"}, {"bytes", "bytes"}, {"seconds", "s per document"}}},
            {"rows", table.to_json()}});
  for (std::size_t i = 0; i < r.rows.size(); ++i) {
    j["rows"][i]["delta_nll_per_document"] = r.rows[i].delta_nll_per_document;
    j["rows"][i]["seconds_per_document"] = r.rows[i].seconds_per_document;
  }
  j["per_document"] = nlohmann::json::array();
  for (const auto& doc : r.per_document)
    j["per_document"].push_back({{"tokens", doc.tokens},
                                 {"context_tokens", doc.context_tokens},
                                 {"full_nll", doc.full_nll},
                                 {"reference_seconds", doc.reference_seconds}});
  for (const std::string& path : files.csv) write_file_atomic(path, table.to_csv());
  if (!files.plot.empty()) {
    std::vector<CompactEvalRow> positive;  // log-x: ratio 0 cannot be drawn
    for (const auto& row : r.rows)
      if (row.ratio > 0) positive.push_back(row);
    write_figure(files.plot, method_frontier_figure(frontier_points(positive)));
  }
  for (const std::string& path : files.json) write_file_atomic(path, j.dump(2) + "\n");
  if (as_json) {
    print_json(j);
  } else {
    fmt::print("{} documents, mean context {:.1f} tokens, continuation {:.1f} tokens; full-cache NLL {:.4f} nats/token\n",
               r.documents, r.mean_context_tokens, r.mean_continuation_tokens, r.full_nll_mean);
    fmt::print("delta_nll = NLL(compacted) - NLL(full cache), nats/token, mean +- SEM over documents\n\n");
    fmt::print("{}", table.to_text());
  }
  return 0;
}

Runner register_compact_eval(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data, ratios = "0.05,0.1,0.2,0.5,1", methods = "am,random,recent,attn-nofit";
    std::string csv, json_out;
    int docs = 0, skip = 0;
    double context_frac = 0.6, max_head_ratio = 1.0;
    int chunk = 0;
    int context_tokens = 0, continuation_tokens = 0;
    std::string split = "blank-lines";
    unsigned long long seed = 0;
    std::string budgets, plot, shard, out_dir;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "compact-eval", "compact each document's context cache and measure the continuation's delta NLL");
  add_model_options(cmd, o->m);
  cmd->add_option("--data", o->data, "UTF-8 text; documents are separated by blank lines")->required();
  cmd->add_option("--ratios", o->ratios, "keep ratios r in [0, 1], comma-separated");
  cmd->add_option("--methods", o->methods,
                  fmt::format("comma-separated method specs (`kvcompact methods`), families: {}",
                              fmt::join(method_family_names(), ", ")));
  cmd->add_option("--docs", o->docs, "use N documents (after --skip)")->check(positive_number());
  cmd->add_option("--skip", o->skip, "skip the first K documents (held-out evaluation)")->check(non_negative_number());
  cmd->add_option("--context-frac", o->context_frac, "fraction of each document's tokens used as context");
  cmd->add_option("--context-tokens", o->context_tokens,
                  "context = the first N tokens (instead of --context-frac); shorter documents are skipped")
      ->check(positive_number());
  cmd->add_option("--continuation-tokens", o->continuation_tokens,
                  "score at most N continuation tokens (with --context-tokens: documents need all N)")
      ->check(positive_number());
  cmd->add_option("--split", o->split, "how --data is cut into documents: blank-lines or wikitext (articles)");
  cmd->add_option("--seed", o->seed, "seed of the random baseline");
  CLI::Option* budgets_opt = cmd->add_option("--budgets", o->budgets,
                  "per-head budget proportions (kvcompact budget); each ratio is then the total ratio");
  cmd->add_option("--chunk", o->chunk,
                  "chunked compaction in KV space: each context compacted in chunks of N tokens (0 = whole)");
  cmd->add_option("--max-head-ratio", o->max_head_ratio,
                  "with --budgets: no head keeps more than this fraction of its keys; the excess is water-filled "
                  "over the other heads (the paper's max_ratio_per_head; default 1 = no cap)");
  cmd->add_option("--plot", o->plot, "write the delta-NLL vs ratio figure (.svg or .png)");
  cmd->add_option("--csv", o->csv, "also write the table as CSV to this file");
  cmd->add_option("--out-json", o->json_out, "also write the JSON result to this file");
  cmd->add_option("--out", o->out_dir,
                  "study folder: each document's result is written there (units/) and a rerun skips the finished "
                  "ones; `kvcompact merge DIR` aggregates");
  cmd->add_option("--shard", o->shard, "run shard I of N (I/N, 0-based) of the documents into --out DIR");
  add_common_options(cmd, common);
  return [o, &common, budgets_opt] {
    if (budgets_opt->count() > 0 && o->budgets.empty()) throw Error("--budgets: empty file name");
    CompactEvalOptions opt;
    const ShardSpec shard = o->shard.empty() ? ShardSpec{} : parse_shard(o->shard);
    if (shard.active() && o->out_dir.empty()) throw Error("--shard: needs --out DIR (the shared study folder)");
    opt.ratios = parse_number_list("--ratios", o->ratios);
    opt.methods = parse_method_list(o->methods);
    opt.context_frac = o->context_frac;
    opt.seed = o->seed;
    Model model = load_model(o->m.model, o->m.tokenizer);
    if (!o->budgets.empty()) {
      const BudgetSchedule s =
          read_budget_schedule_for(o->budgets, model.config.n_layers, model.config.n_kv_heads, model.config.sliding_layers());
      opt.budget_proportions = s.proportions();
    }
    check_max_head_ratio(o->max_head_ratio, !o->budgets.empty());
    opt.max_head_ratio = o->max_head_ratio;
    check_chunk_size(o->chunk);
    opt.chunk_size = o->chunk;
    opt.context_tokens = o->context_tokens;
    opt.continuation_tokens = o->continuation_tokens;
    std::vector<std::string> docs;
    if (o->context_tokens > 0) {
      // Documents long enough for the context and the continuation, in file order.
      const int need = o->context_tokens + std::max(1, o->continuation_tokens);
      std::vector<std::string> all = read_documents(o->data, 0, o->split);
      int skipped = 0;
      for (auto& d : all) {
        if (o->docs > 0 && static_cast<int>(docs.size()) == o->docs + o->skip) break;
        if (static_cast<int>(model.tokenizer->encode(d, true).size()) >= need) {
          docs.push_back(std::move(d));
        } else {
          ++skipped;
        }
      }
      if (docs.empty())
        throw Error(fmt::format("{}: no document has the {} tokens that --context-tokens {} + --continuation-tokens {} "
                                "need (the model's max_seq_len is {})",
                                o->data, need, o->context_tokens, o->continuation_tokens, model.config.max_seq_len));
      if (!common.json)
        std::fprintf(stderr, "compact-eval: %zu documents of at least %d tokens (%d shorter ones skipped)\n",
                     docs.size(), need, skipped);
    } else {
      docs = read_documents(o->data, o->docs > 0 ? o->docs + o->skip : 0, o->split);
    }
    if (o->skip >= static_cast<int>(docs.size()))
      throw Error(fmt::format("{}: --skip {} leaves no documents (the file has {} usable)", o->data, o->skip,
                              docs.size()));
    docs.erase(docs.begin(), docs.begin() + o->skip);
    CompactEvalResult r;
    if (!o->out_dir.empty()) {
      const UnitShardRun run = run_compact_eval_shard(model, docs, opt, o->out_dir, shard);
      const CompactEvalMerge merged = merge_compact_eval(o->out_dir, /*allow_none=*/true);
      if (!merged.missing.empty()) {
        const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
        const std::size_t done = static_cast<std::size_t>(merged.study.units()) - merged.missing.size();
        if (common.json)
          print_json({{"study", merged.study.id}, {"shard", {{"index", s.index}, {"count", s.count}}},
                      {"evaluated", run.evaluated}, {"skipped", run.skipped}, {"documents_done", done},
                      {"documents", merged.study.units()}});
        else
          fmt::print("compact-eval: shard {}/{} (documents {}..{}): {} evaluated, {} already done; {}: {} of {} "
                     "documents done (`kvcompact merge {}` once every shard has finished)\n",
                     s.index, s.count, run.begin + 1, run.end, run.evaluated, run.skipped, o->out_dir, done,
                     merged.study.units(), o->out_dir);
        return 0;
      }
      r = merged.result;
    } else {
      r = run_compact_eval(model, docs, opt);
    }
    CompactEvalReportFiles files{{}, o->plot, {}};
    if (!o->csv.empty()) files.csv.push_back(o->csv);
    if (!o->json_out.empty()) files.json.push_back(o->json_out);
    if (!o->out_dir.empty()) {  // the completed study's aggregate, as `merge DIR` writes it
      files.csv.push_back(o->out_dir + "/compact_eval.csv");
      files.json.push_back(o->out_dir + "/compact_eval.json");
    }
    return report_compact_eval(r, {{"model", model.path}, {"data", o->data}, {"context_frac", opt.context_frac},
                                   {"budgets", o->budgets}},
                               files, common.json);
  };
}

Runner register_budget_eval(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string data, ratios = "0.02,0.05,0.1", method = "am", budgets, schedules = "optimized,uniform,pyramid";
    std::string json_out, plot, csv, out_dir, shard;
    int docs = 0, skip = 0;
    double context_frac = 0.6, pyramid_beta = 20;
    unsigned long long seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "budget-eval", "delta NLL vs total ratio for per-head budget schedules (optimized / uniform / pyramid)");
  add_model_options(cmd, o->m);
  cmd->add_option("--data", o->data, "UTF-8 text; documents are separated by blank lines")->required();
  cmd->add_option("--budgets", o->budgets,
                  "budgets JSON files (kvcompact budget), comma-separated; series named by their \"schedule\"");
  cmd->add_option("--schedules", o->schedules,
                  "series to run: 'optimized' (= the --budgets files), uniform, pyramid; comma-separated");
  cmd->add_option("--ratios", o->ratios, "total keep ratios in (0, 1], comma-separated");
  cmd->add_option("--method", o->method, "one compaction method spec (`kvcompact methods`)");
  cmd->add_option("--docs", o->docs, "use N documents (after --skip)")->check(positive_number());
  cmd->add_option("--skip", o->skip, "skip the first K documents (held-out evaluation)")->check(non_negative_number());
  cmd->add_option("--context-frac", o->context_frac, "fraction of each document's tokens used as context");
  cmd->add_option("--pyramid-beta", o->pyramid_beta, "PyramidKV beta of the pyramid schedule");
  cmd->add_option("--seed", o->seed, "seed (query subsampling, self-study, random method)");
  cmd->add_option("--out-json", o->json_out, "write the points as JSON (kvcompact plot redraws the figure from it)");
  cmd->add_option("--plot", o->plot, "write the figure (.svg or .png)");
  cmd->add_option("--csv", o->csv, "also write the table as CSV");
  cmd->add_option("--out", o->out_dir,
                  "study folder: each series is a compact-eval study in DIR/series_<k> (a rerun skips finished "
                  "documents); the complete study writes budget_eval.{json,csv,svg} there; `kvcompact merge DIR`");
  cmd->add_option("--shard", o->shard, "run shard I of N (I/N, 0-based) of the documents of every series into --out DIR");
  add_common_options(cmd, common);
  return [o, &common] {
    const ShardSpec shard = o->shard.empty() ? ShardSpec{} : parse_shard(o->shard);
    if (shard.active() && o->out_dir.empty()) throw Error("--shard: needs --out DIR (the shared study folder)");
    CompactEvalOptions base;
    base.ratios = parse_number_list("--ratios", o->ratios);
    for (double r : base.ratios)
      if (!(r > 0 && r <= 1)) throw Error(fmt::format("--ratios: {} is outside (0, 1]", r));
    base.methods = parse_method_list(o->method);
    if (base.methods.size() != 1) throw Error(fmt::format("--method: give one method spec, not {}", base.methods.size()));
    base.context_frac = o->context_frac;
    base.seed = o->seed;
    Model model = load_model(o->m.model, o->m.tokenizer);
    const int L = model.config.n_layers, H = model.config.n_kv_heads;
    const std::vector<int> sliding = model.config.sliding_layers();  // never compacted: budgets cover the others
    std::vector<BudgetEvalSeries> series;
    const std::vector<std::string> budget_files = split_list(o->budgets, "--budgets");
    for (const std::string& name : split_list(o->schedules, "--schedules")) {
      if (name == "optimized") {
        if (budget_files.empty()) throw Error("--schedules optimized: needs --budgets FILE");
        for (const std::string& f : budget_files) {
          const BudgetSchedule s = read_budget_schedule_for(f, L, H, sliding);
          std::string label = budget_files.size() == 1 ? s.schedule : s.schedule + " (" + f + ")";
          series.push_back({label, f, s.proportions()});
        }
      } else if (name == "uniform" || name == "pyramid") {
        series.push_back({name, "", schedule_by_name_or_file(name, L, H, sliding, base.ratios, o->pyramid_beta).proportions()});
      } else {
        throw Error(fmt::format("--schedules: unknown schedule '{}' (valid: optimized, uniform, pyramid)", name));
      }
    }
    if (series.empty()) throw Error("--schedules: empty list");
    auto docs = read_documents(o->data, o->docs > 0 ? o->docs + o->skip : 0);
    if (o->skip >= static_cast<int>(docs.size()))
      throw Error(fmt::format("{}: --skip {} leaves no documents (the file has {})", o->data, o->skip, docs.size()));
    docs.erase(docs.begin(), docs.begin() + o->skip);

    const nlohmann::json header = {{"model", model.path},
                                   {"data", o->data},
                                   {"skip", o->skip},
                                   {"method", to_string(base.methods[0])},
                                   {"context_frac", o->context_frac}};
    if (o->out_dir.empty())
      return report_budget_eval(run_budget_eval(model, docs, base, series), header,
                                {{o->json_out}, {o->csv}, {o->plot}}, common.json);
    const BudgetEvalResult r = run_budget_eval_shard(model, docs, base, series, header, o->out_dir, shard);
    if (!r.complete()) {
      const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
      if (common.json)
        print_json({{"shard", {{"index", s.index}, {"count", s.count}}}, {"missing", r.missing}});
      else
        fmt::print("budget-eval: shard {}/{} done; {}: {} of {} series incomplete (`kvcompact merge {}` once every "
                   "shard has finished)\n",
                   s.index, s.count, o->out_dir, r.missing.size(), r.series.size(), o->out_dir);
      return 0;
    }
    return report_budget_eval(r, header, budget_eval_files(o->out_dir, {{o->json_out}, {o->csv}, {o->plot}}), common.json);
  };
}

BudgetEvalReportFiles budget_eval_files(const std::string& dir, BudgetEvalReportFiles extra) {
  BudgetEvalReportFiles f;
  f.json = {dir + "/budget_eval.json"};
  f.csv = {dir + "/budget_eval.csv"};
  f.plot = {dir + "/budget_eval.svg"};
  if (!extra.json.empty() && !extra.json[0].empty()) f.json.push_back(extra.json[0]);
  if (!extra.csv.empty() && !extra.csv[0].empty()) f.csv.push_back(extra.csv[0]);
  if (!extra.plot.empty() && !extra.plot[0].empty()) f.plot.push_back(extra.plot[0]);
  return f;
}

int report_budget_eval(const BudgetEvalResult& r, nlohmann::json header, const BudgetEvalReportFiles& files,
                       bool as_json) {
  Table table({"schedule", "ratio", "delta_nll_mean", "delta_nll_sem", "nll_mean", "kept_entries", "cache_bytes",
               "full_cache_bytes"},
              4);
  nlohmann::json points = nlohmann::json::array();
  std::vector<FrontierPoint> fp;
  for (std::size_t k = 0; k < r.series.size(); ++k) {
    const BudgetEvalSeries& s = r.series[k];
    for (const auto& row : r.results.at(k).rows) {
      table.add_row({s.label, row.ratio, row.delta_nll_mean, row.delta_nll_sem, row.nll_mean,
                     static_cast<long long>(std::llround(row.kept_entries)),
                     static_cast<long long>(std::llround(row.cache_bytes)),
                     static_cast<long long>(std::llround(row.full_cache_bytes))});
      points.push_back({{"series", s.label},
                        {"budgets", s.source},
                        {"ratio", row.ratio},
                        {"delta_nll_mean", row.delta_nll_mean},
                        {"delta_nll_sem", row.delta_nll_sem},
                        {"nll_mean", row.nll_mean},
                        {"kept_entries", row.kept_entries},
                        {"cache_bytes", row.cache_bytes},
                        {"full_cache_bytes", row.full_cache_bytes}});
      fp.push_back({s.label, row.ratio, row.delta_nll_mean, row.delta_nll_sem});
    }
  }
  const CompactEvalResult& last = r.results.back();
  header["kind"] = "budget-frontier";
  header["documents"] = last.documents;
  header["full_nll_mean"] = last.full_nll_mean;
  header["units"] = {{"nll", "nats/token"}, {"bytes", "bytes"}};
  header["points"] = points;
  for (const std::string& path : files.json)
    if (!path.empty()) write_file_atomic(path, header.dump(2) + "\n");
  for (const std::string& path : files.csv)
    if (!path.empty()) write_file_atomic(path, table.to_csv());
  for (const std::string& path : files.plot)
    if (!path.empty()) write_figure(path, frontier_figure(fp));
  if (as_json) {
    print_json(header);
  } else {
    fmt::print("{} documents (skip {}), method {}; delta_nll = NLL(compacted) - NLL(full cache), nats/token, "
               "mean +- SEM over documents; every schedule keeps the same total keys at a ratio\n\n",
               last.documents, header.value("skip", 0), header.value("method", std::string()));
    fmt::print("{}", table.to_text());
  }
  return 0;
}

}  // namespace kvcompact::cli
