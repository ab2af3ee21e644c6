// `kvcompact merge`: the aggregate of a sharded study (issue #18) from its unit files: an influence
// sweep, a compact-eval, a qa-eval or a mask-eval, told apart by the manifests in DIR/shards.
#include <fmt/format.h>

#include <cstdio>
#include <filesystem>

#include "studies/compact_eval_shards.h"
#include "studies/budget_eval.h"
#include "studies/influence_shards.h"
#include "studies/mask_eval.h"
#include "studies/qa_eval_shards.h"
#include "studies/task_eval.h"
#include "studies/unit_study.h"
#include "cli_common.h"
#include "core/error.h"
#include "study_reports.h"
#include "report/figures.h"
#include "report/svg_plot.h"

namespace kvcompact::cli {
namespace {

/// "1 4 7" (1-based) for the first 20 0-based units, then "...".
std::string numbers_1(const std::vector<int>& units) {
  std::string out;
  for (std::size_t i = 0; i < units.size() && i < 20; ++i) out += fmt::format("{}{}", i == 0 ? "" : " ", units[i] + 1);
  return units.size() > 20 ? out + " ..." : out;
}

}  // namespace

/// The merged table of a qa-eval or task-eval study folder (QaEvalMerge / TaskEvalMerge: study,
/// result over the finished units, 0-based missing units): printed and, once complete, written
/// to OUT/<stem>.csv/json; a partial merge says which `units` are missing and returns 2.
template <class Merge, class Report>
int report_unit_merge(const Merge& m, const std::string& out_dir, const char* stem, const char* units, bool as_json,
                      Report report) {
  std::vector<std::string> csv, json;
  if (m.missing.empty()) csv = {out_dir + "/" + stem + ".csv"}, json = {out_dir + "/" + stem + ".json"};
  std::vector<int> missing_1;
  for (int u : m.missing) missing_1.push_back(u + 1);
  nlohmann::json header{{"study", m.study.id},
                        {"model", m.study.inputs.is_object() ? m.study.inputs.value("model", "") : ""},
                        {"model_fingerprint", m.study.settings.value("model_fingerprint", "")},
                        {std::string("missing_") + units, missing_1}};
  if (m.study.inputs.is_object())  // what the study recorded beside the model (qa-eval: its budgets)
    for (const auto& [key, value] : m.study.inputs.items())
      if (!header.contains(key)) header[key] = value;
  report(m.result, header, csv, json, as_json);
  if (m.missing.empty()) return 0;
  std::fprintf(stderr,
               "kvcompact: merge: %zu of %d %s missing (%s); the table above covers the finished ones "
               "(%s.csv/json are written once the study is complete)\n",
               m.missing.size(), m.study.units(), units, numbers_1(m.missing).c_str(), stem);
  return 2;
}

Runner register_merge(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::vector<std::string> dirs;
    std::string out, band = "sem";
    bool png = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "merge", "aggregate a sharded study (influence, compact-eval, qa-eval, mask-eval, task-eval or budget-eval run with --out DIR "
               "--shard I/N) from its finished units; exit 2 when units are missing (influence, compact-eval and qa-eval "
               "then print the aggregate of the finished ones; the result files are written once the study is complete)");
  cmd->add_option("dirs", o->dirs, "output folders of the shards (one study; units are looked up in order)")
      ->required();
  cmd->add_option("--out", o->out,
                  "folder for the results: influence.{json,csv,svg}, compact_eval.{json,csv}, qa_eval.{json,csv}, task_eval.{json,csv}, "
                  "mask_eval.{json,csv,svg} or budget_eval.{json,csv,svg} (default: the first folder)");
  cmd->add_option("--band", o->band, "figure band: sem, std or none");
  cmd->add_flag("--png", o->png, "also write the figure as PNG");
  add_common_options(cmd, common);
  return [o, &common] {
    const StudyKind* kind = study_kind_in(o->dirs[0]);
    if (kind == nullptr && o->dirs.size() == 1) {
      std::error_code ec;
      if (!std::filesystem::is_directory(o->dirs[0], ec)) throw Error(fmt::format("{}: no such folder", o->dirs[0]));
      throw Error(fmt::format("{}: holds no study (no shard manifests in {}/shards); was it run with --out DIR "
                              "[--shard I/N]?",
                              o->dirs[0], o->dirs[0]));
    }
    if (kind != nullptr && kind->name != "influence" && o->dirs.size() != 1)
      throw Error(fmt::format("merge: {} is one folder (its shards share --out DIR)", kind->article));
    const std::string out_dir = o->out.empty() ? o->dirs[0] : o->out;
    if (kind != nullptr && kind->name == "qa-eval")
      return report_unit_merge(merge_qa_eval(o->dirs[0]), out_dir, "qa_eval", "articles", common.json,
                               report_qa_eval);
    if (kind != nullptr && kind->name == "task-eval")
      return report_unit_merge(merge_task_eval(o->dirs[0]), out_dir, "task_eval", "items", common.json,
                               report_task_eval);
    if (kind != nullptr && kind->name == "budget-eval") {
      nlohmann::json header;
      const BudgetEvalResult r = merge_budget_eval(o->dirs[0], &header);
      if (!r.complete()) {
        for (const std::string& m : r.missing) std::fprintf(stderr, "kvcompact: merge: missing %s\n", m.c_str());
        std::fprintf(stderr, "kvcompact: merge: %zu of %zu series incomplete (nothing written)\n", r.missing.size(),
                     r.series.size());
        return 2;
      }
      return report_budget_eval(r, header, budget_eval_files(out_dir, {}), common.json);
    }
    if (kind != nullptr && kind->name == "mask-eval") {
      const MaskEvalMerge m = merge_mask_eval(o->dirs[0]);
      if (!m.result) {
        std::string names;
        for (std::size_t i = 0; i < m.missing.size() && i < 20; ++i) names += " " + m.missing[i];
        std::fprintf(stderr,
                     "kvcompact: merge: %zu of %d conditions missing:%s%s (the metrics need every condition: nothing "
                     "written)\n",
                     m.missing.size(), m.units, names.c_str(), m.missing.size() > 20 ? " ..." : "");
        return 2;
      }
      return report_mask_eval(*m.result, out_dir, out_dir + "/mask_eval.svg", common.json);
    }
    if (kind != nullptr && kind->name == "compact-eval") {
      const CompactEvalMerge m = merge_compact_eval(o->dirs[0]);
      const std::string out = o->out.empty() ? o->dirs[0] : o->out;
      const int documents = m.study.units();
      // A partial study's table is printed but not written: compact_eval.{csv,json} only ever hold
      // the complete study.
      CompactEvalReportFiles files;
      if (m.missing.empty()) files = {{out + "/compact_eval.csv"}, "", {out + "/compact_eval.json"}};
      std::vector<int> missing_1;
      for (int d : m.missing) missing_1.push_back(d + 1);
      report_compact_eval(m.result,
                          {{"study", m.study.id},
                           {"model", m.study.inputs.is_object() ? m.study.inputs.value("model", "") : ""},
                           {"model_fingerprint", m.study.settings.value("model_fingerprint", "")},
                           {"context_frac", m.options.context_frac},
                           {"missing_documents", missing_1}},
                          files, common.json);
      if (!m.missing.empty()) {
        std::fprintf(stderr,
                     "kvcompact: merge: %zu of %d documents missing (%s); the table above covers the finished ones "
                     "(compact_eval.csv/json are written once the study is complete)\n",
                     m.missing.size(), documents, numbers_1(m.missing).c_str());
        return 2;
      }
      return 0;
    }
    const BandKind band = parse_band_kind(o->band);
    const StudyStatus st = study_status(o->dirs);
    const InfluenceCurves curves = merge_units(st);
    const std::string out = o->out.empty() ? o->dirs[0] : o->out;
    write_influence_curves_json(out + "/influence.json", curves);
    write_influence_curves_csv(out + "/influence.csv", curves);
    write_influence_figures(out, curves, band, o->png);
    const bool complete = st.missing.empty();
    if (common.json) {
      print_json({{"study", st.study.id},
                  {"units", st.units},
                  {"done", st.done},
                  {"missing", st.missing},
                  {"complete", complete},
                  {"outputs", {out + "/influence.json", out + "/influence.csv", out + "/influence.svg"}}});
    } else {
      fmt::print("study {}: {}/{} units ({} documents x {} heads) -> {}/influence.{{json,csv,svg}}\n", st.study.id,
                 st.done, st.units, st.study.documents, st.study.heads.size(), out);
      if (!complete) {
        fmt::print("incomplete: {} units missing:", st.missing.size());
        for (std::size_t i = 0; i < st.missing.size() && i < 20; ++i) fmt::print(" [{}]", st.missing[i]);
        fmt::print("{}\n", st.missing.size() > 20 ? " ..." : "");
      }
    }
    if (!complete)
      std::fprintf(stderr, "kvcompact: merge: %zu of %zu units missing; the aggregate covers the finished ones\n",
                   st.missing.size(), st.units);
    return complete ? 0 : 2;
  };
}

}  // namespace kvcompact::cli
