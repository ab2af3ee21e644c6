// `kvcompact task-eval` (issue 14): generation accuracy over compacted caches on task files whose
// items mark a context span (RULER tasks).
#include <fmt/format.h>

#include <string>

#include "studies/task_eval.h"
#include "tasks/task_suite.h"
#include "cli_model.h"
#include "core/error.h"
#include "io/atomic_file.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "report/table.h"
#include "study_reports.h"

namespace kvcompact::cli {
namespace {

/// The compaction methods of a --methods list; the item "full" (the uncompacted row, always
/// evaluated) is accepted and dropped.
std::vector<MethodSpec> task_eval_methods(const std::string& text) {
  std::string rest;
  for (const std::string& item : split_list(text, "--methods"))
    if (item != "full") rest += (rest.empty() ? "" : ",") + item;
  if (rest.empty()) return {};
  return parse_method_list(rest);
}

}  // namespace

Runner register_task_eval(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::vector<std::string> tasks;
    std::string methods = "full,am,snapkv,streaming", ratios = "0.1,0.2", csv, out_json, out_dir, shard;
    int n = 0;
    unsigned long long seed = 0;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "task-eval",
      "accuracy of greedy answers over compacted caches on task files with a context span (kvcompact tasks --family "
      "ruler_...): the context is compacted, the question fed verbatim; scores x100 (RULER's scale)");
  add_model_options(cmd, o->m);
  cmd->add_option("--tasks", o->tasks, "task files (JSONL, every item with \"context\")")->required()->expected(1, -1);
  cmd->add_option("--methods", o->methods,
                  fmt::format("comma-separated method specs (`kvcompact methods`; \"full\", the uncompacted row, is "
                              "always evaluated), families: {}",
                              fmt::join(method_family_names(), ", ")));
  cmd->add_option("--ratios", o->ratios, "keep ratios r in [0, 1], comma-separated");
  cmd->add_option("--n,--docs", o->n, "evaluate the first N items of each file (0 = all)")
      ->check(non_negative_number());
  cmd->add_option("--seed", o->seed, "seed of the random baseline and query sampling (+ item index)");
  cmd->add_option("--csv", o->csv, "also write the table as CSV to this file");
  cmd->add_option("--out-json", o->out_json, "also write the JSON result (rows and per-item answers) to this file");
  cmd->add_option("--out", o->out_dir,
                  "study folder: each item's result is a unit file there and a rerun skips the finished ones; the "
                  "complete study writes task_eval.{csv,json} there; `kvcompact merge DIR` aggregates");
  cmd->add_option("--shard", o->shard, "run shard I of N (I/N, 0-based) of the items into --out DIR");
  add_common_options(cmd, common);
  return [o, &common] {
    const ShardSpec shard = o->shard.empty() ? ShardSpec{} : parse_shard(o->shard);
    if (shard.active() && o->out_dir.empty()) throw Error("--shard: needs --out DIR (the shared study folder)");
    TaskEvalOptions opt;
    opt.methods = task_eval_methods(o->methods);
    opt.ratios = parse_number_list("--ratios", o->ratios);
    opt.seed = o->seed;
    std::vector<TaskEvalFile> files;
    for (const std::string& path : o->tasks) {
      TaskEvalFile f{path, read_task_suite(path)};
      if (o->n > 0 && static_cast<int>(f.items.size()) > o->n) f.items.resize(static_cast<std::size_t>(o->n));
      files.push_back(std::move(f));
    }
    validate_task_eval(files, opt);  // before loading the model
    Model model = load_model(o->m.model, o->m.tokenizer);
    std::vector<std::string> csv, json;
    if (!o->csv.empty()) csv.push_back(o->csv);
    if (!o->out_json.empty()) json.push_back(o->out_json);
    if (!o->out_dir.empty()) {
      const UnitShardRun run = run_task_eval_shard(model, files, opt, o->out_dir, shard);
      const TaskEvalMerge m = merge_task_eval(o->out_dir, /*allow_none=*/true);
      if (!m.missing.empty()) {
        const ShardSpec s = shard.active() ? shard : ShardSpec{0, 1};
        const int done = m.study.units() - static_cast<int>(m.missing.size());
        if (common.json)
          print_json({{"study", m.study.id}, {"shard", {{"index", s.index}, {"count", s.count}}},
                      {"evaluated", run.evaluated}, {"skipped", run.skipped}, {"items_done", done},
                      {"items", m.study.units()}});
        else
          fmt::print("task-eval: shard {}/{} (items {}..{}): {} evaluated, {} already done; {}: {} of {} items done "
                     "(`kvcompact merge {}` once every shard has finished)\n",
                     s.index, s.count, run.begin + 1, run.end, run.evaluated, run.skipped, o->out_dir, done,
                     m.study.units(), o->out_dir);
        return 0;
      }
      csv.push_back(o->out_dir + "/task_eval.csv");
      json.push_back(o->out_dir + "/task_eval.json");
      return report_task_eval(m.result, {{"model", model.path}, {"tasks", o->tasks}, {"study", m.study.id}}, csv,
                              json, common.json);
    }
    const TaskEvalResult r = run_task_eval(model, files, opt);
    return report_task_eval(r, {{"model", model.path}, {"tasks", o->tasks}}, csv, json, common.json);
  };
}

int report_task_eval(const TaskEvalResult& r, nlohmann::json header, const std::vector<std::string>& csv,
                     const std::vector<std::string>& json, bool as_json) {
  Table table({"family", "method", "ratio", "items", "score", "score_sem", "compaction_s", "kept_entries"}, 4);
  for (const TaskEvalRow& row : r.rows)
    table.add_row({row.family, row.method, row.ratio, row.items, row.score, row.score_sem, row.compaction_seconds,
                   row.kept_entries});
  for (const std::string& path : csv) write_file_atomic(path, table.to_csv());
  header["items"] = r.units.size();
  header["mean_context_tokens"] = r.mean_context_tokens;
  header["prefill_seconds"] = r.prefill_seconds;
  header["units"] = {{"score", "mean item_score x 100 (RULER's scale, percent); score_sem likewise"},
                     {"compaction_s", "seconds of compact_cache per context, mean over items"},
                     {"kept_entries", "cache entries summed over layers and heads, mean over items"}};
  header["rows"] = table.to_json();
  nlohmann::json details = nlohmann::json::array();
  for (const TaskEvalUnit& u : r.units) {
    nlohmann::json answers = nlohmann::json::array();
    for (std::size_t k = 0; k < u.answers.size() && k < r.keys.size(); ++k)
      answers.push_back({{"method", r.keys[k].method},
                         {"ratio", r.keys[k].ratio},
                         {"answer", u.answers[k].text},
                         {"score", u.answers[k].score}});
    details.push_back({{"file", u.file},
                       {"id", u.id},
                       {"family", u.family},
                       {"context_tokens", u.context_tokens},
                       {"question_tokens", u.question_tokens},
                       {"answers", answers}});
  }
  header["per_item"] = details;
  // Invalid UTF-8 in an answer (a token cut inside a character) is written as U+FFFD.
  const auto dump = [](const nlohmann::json& j) {
    return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  };
  for (const std::string& path : json) write_file_atomic(path, dump(header));
  if (as_json) {
    std::fputs(dump(header).c_str(), stdout);
    return 0;
  }
  fmt::print("{} items, mean context {:.1f} tokens (BOS included); prefill {:.1f} s in all\n", r.units.size(),
             r.mean_context_tokens, r.prefill_seconds);
  fmt::print("score: mean item_score x 100 (RULER recall: % of references found; others: exact match), SEM over "
             "items; compaction_s: compact_cache wall time per context\n\n");
  fmt::print("{}", table.to_text());
  return 0;
}

}  // namespace kvcompact::cli
