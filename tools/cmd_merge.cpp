// `kvcompact merge`: the aggregate of a sharded influence sweep or compact-eval (issue #18) from its
// unit files.
#include <fmt/format.h>

#include <cstdio>

#include "analysis/compact_eval_shards.h"
#include "analysis/influence_shards.h"
#include "cli_common.h"
#include "core/error.h"
#include "compact_eval_report.h"
#include "report/figures.h"
#include "report/svg_plot.h"

namespace kvcompact::cli {

Runner register_merge(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::vector<std::string> dirs;
    std::string out, band = "sem";
    bool png = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "merge", "aggregate a sharded influence sweep (influence --shard I/N) or compact-eval (compact-eval --out DIR "
               "--shard I/N) from its finished units; exit 2 when units are missing (the aggregate then covers the "
               "finished ones)");
  cmd->add_option("dirs", o->dirs, "output folders of the shards (one study; units are looked up in order)")
      ->required();
  cmd->add_option("--out", o->out,
                  "folder for influence.{json,csv,svg} or compact_eval.{json,csv} (default: the first folder)");
  cmd->add_option("--band", o->band, "figure band: sem, std or none");
  cmd->add_flag("--png", o->png, "also write the figure as PNG");
  add_common_options(cmd, common);
  return [o, &common] {
    if (has_compact_eval_study(o->dirs[0])) {
      if (o->dirs.size() != 1) throw Error("merge: a compact-eval study is one folder (its shards share --out DIR)");
      const CompactEvalMerge m = merge_compact_eval(o->dirs[0]);
      const std::string out = o->out.empty() ? o->dirs[0] : o->out;
      const int documents = m.study.documents;
      // A partial study's table is printed but not written: compact_eval.{csv,json} only ever hold
      // the complete study.
      CompactEvalReportFiles files;
      if (m.missing.empty()) files = {{out + "/compact_eval.csv"}, "", {out + "/compact_eval.json"}};
      std::vector<int> missing_1;
      for (int d : m.missing) missing_1.push_back(d + 1);
      report_compact_eval(m.result,
                          {{"study", m.study.id},
                           {"model_fingerprint", m.study.settings.value("model_fingerprint", "")},
                           {"context_frac", m.options.context_frac},
                           {"missing_documents", missing_1}},
                          files, common.json);
      if (!m.missing.empty()) {
        std::fprintf(stderr,
                     "kvcompact: merge: %zu of %d documents missing; the table above covers the finished ones "
                     "(compact_eval.csv/json are written once the study is complete)\n",
                     m.missing.size(), documents);
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
    const std::string svg = influence_figure(curves, {}, band);
    write_figure(out + "/influence.svg", svg);
    if (o->png) write_figure(out + "/influence.png", svg);
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
