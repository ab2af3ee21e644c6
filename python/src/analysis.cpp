// Python entry points of the library's studies: head influence curves (studies/influence.h),
// budget schedules from them (budgets/budget_solver.h) and head masking studies
// (studies/mask_eval.h). Results are returned as the same JSON objects the CLI writes
// (influence.json, budgets JSON, mask_eval.json), as Python dicts; progress lines go to an
// optional callable (ProgressSink).
#include <fmt/format.h>
#include <pybind11/stl.h>

#include <cctype>
#include <memory>
#include <string>
#include <optional>
#include <string>
#include <vector>

#include "budgets/budget_solver.h"
#include "heads/head_intervention.h"
#include "heads/head_means.h"
#include "heads/head_scores.h"
#include "studies/influence.h"
#include "budgets/influence_curves.h"
#include "studies/mask_eval.h"
#include "tasks/task_suite.h"
#include "compaction/method_spec.h"
#include "core/error.h"
#include "core/model_fingerprint.h"
#include "arrays.h"
#include "py_model.h"

namespace kvcompact::py_bind {
namespace {

/// The library's messages name the CLI's flags; from Python they name the keyword arguments.
std::string python_names(std::string msg) {
  static const std::pair<const char*, const char*> names[] = {
      {"--ratios", "grid"},       {"--baseline", "baseline"}, {"--heads", "heads"},
      {"--floor", "floor"},       {"--units", "units"},       {"--random-seeds", "random_seeds"},
      {"--targets", "targets"},   {"--out", "out_dir"},       {"--k ", "ks "},
      {"--budgets", "budgets"},   {"--scores", "scores"},     {"--tasks", "tasks"}};
  for (const auto& [flag, arg] : names)
    for (std::size_t at = msg.find(flag); at != std::string::npos; at = msg.find(flag, at + 1)) {
      const std::size_t end = at + std::char_traits<char>::length(flag);
      if (end < msg.size() && (std::isalnum(static_cast<unsigned char>(msg[end])) || msg[end] == '-')) continue;
      msg.replace(at, end - at, arg);
    }
  return msg;
}

/// Runs f, turning a library Error into one whose message names the Python arguments.
template <class F>
auto with_python_names(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Error(python_names(e.what()));
  }
}

py::object json_to_py(const nlohmann::json& j) { return py::module_::import("json").attr("loads")(j.dump()); }

nlohmann::json py_to_json(const py::handle& obj) {
  return nlohmann::json::parse(py::module_::import("json").attr("dumps")(obj).cast<std::string>());
}

/// A ratio grid from a spec string ("start:stop:count" or "a,b,c") or a sequence of floats.
std::vector<double> ratio_grid(const py::object& grid) {
  if (py::isinstance<py::str>(grid)) return parse_ratio_grid(grid.cast<std::string>());
  std::vector<double> g;
  try {
    g = grid.cast<std::vector<double>>();
  } catch (const py::cast_error&) {
    throw py::type_error("grid: expected a spec string (\"0:0.5:51\", \"0,0.05,0.1\") or a sequence of floats");
  }
  std::string spec;
  for (double r : g) spec += (spec.empty() ? "" : ",") + fmt::format("{}", r);
  return parse_ratio_grid(spec);  // the library's checks (increasing, in [0, 1])
}

/// Curves from a dict (the influence.json object) or a path to such a file.
InfluenceCurves curves_arg(const py::object& curves) {
  if (py::isinstance<py::str>(curves)) return read_influence_curves_json(curves.cast<std::string>());
  if (py::isinstance<py::dict>(curves)) return influence_curves_from_json(py_to_json(curves), "curves");
  throw py::type_error("curves: expected an influence.json dict (Model.influence) or a path to one");
}

std::vector<double> targets_arg(const std::vector<double>& targets) {
  if (targets.empty()) throw py::value_error("targets: empty (give total ratios in (0, 1])");
  for (double r : targets)
    if (!(r > 0.0 && r <= 1.0)) throw py::value_error("targets: " + fmt::format("{}", r) + " is outside (0, 1]");
  return targets;
}

py::object influence(const PyModel& self, const std::vector<std::string>& documents, const std::string& out_dir,
                     const py::object& grid, double baseline, const std::string& heads, const std::string& method,
                     double context_frac, std::uint64_t seed, bool reuse_prefix, const std::string& budgets,
                     const py::object& progress, const py::kwargs& options) {
  const Model& model = self.model();
  if (documents.empty()) throw py::value_error("documents: empty (give at least one text)");
  if (out_dir.empty()) throw py::value_error("out_dir: empty (the sweep writes its per-document files there)");
  if (!(context_frac > 0.0 && context_frac < 1.0))
    throw py::value_error("context_frac: must be in (0, 1), got " + fmt::format("{}", context_frac));
  InfluenceOptions opt;
  opt.grid = ratio_grid(grid);
  opt.baseline_ratio = baseline;
  baseline_index(opt.baseline_ratio, opt.grid);
  opt.heads = influence_heads(heads, model.config);
  opt.method = parse_method_spec(spec_text(method, options));
  opt.context_frac = context_frac;
  opt.seed = seed;
  opt.reuse_prefix = reuse_prefix;
  if (!budgets.empty()) {
    const BudgetSchedule s =
        read_budget_schedule_for(budgets, model.config.n_layers, model.config.n_kv_heads, model.config.sliding_layers());
    if (!(baseline > 0)) throw py::value_error("budgets: needs a baseline above 0 (the budgets' total ratio)");
    opt.budget_proportions = s.proportions();
    opt.budgets_source = budgets;
  }
  ProgressSink sink(progress);
  InfluenceCurves curves;
  {
    py::gil_scoped_release release;
    curves = run_influence(model, documents, opt, out_dir);
  }
  sink.rethrow_if_failed();
  return json_to_py(influence_curves_to_json(curves));
}

/// Task items from a path (.jsonl) or a sequence of dicts in the task-file format.
std::vector<TaskItem> task_items(const py::object& tasks) {
  if (py::isinstance<py::str>(tasks)) return read_task_suite(tasks.cast<std::string>());
  std::string text;
  try {
    for (const auto& item : tasks) text += py_to_json(item).dump() + "\n";
  } catch (const py::error_already_set&) {
    throw py::type_error("tasks: expected a path to a .jsonl task file or a sequence of task dicts");
  }
  return parse_task_suite(text, "tasks");
}

py::object mask_eval(const PyModel& self, const py::object& tasks, const std::string& scores,
                     const std::vector<int>& ks, int random_seeds, std::uint64_t seed, const std::string& ablation,
                     const std::string& head_means, const std::string& reference,
                     const std::vector<std::string>& metrics, const std::string& out_dir, const py::object& progress) {
  const Model& model = self.model();
  MaskEvalOptions opts;
  opts.ks = ks;
  opts.random_seeds = random_seeds;
  opts.seed = seed;
  const AblationSpec spec = parse_ablation_spec(ablation);  // "scale:F" too; positions: the ablation's default
  opts.ablation = spec.ablation;
  opts.scale = spec.scale;
  opts.reference = reference;
  opts.metrics = metrics;
  std::unique_ptr<HeadMeans> means;
  if (opts.ablation == Ablation::Mean) {
    if (head_means.empty()) throw py::value_error("head_means: ablation 'mean' needs a head-means file (kvcompact head-means)");
    means = std::make_unique<HeadMeans>(read_head_means(head_means));
    check_head_means_model(*means, model.config, fingerprint_hex(self.fingerprint()), head_means);
    opts.means = means.get();
  }
  const HeadScores head_scores = read_head_scores(scores, &model.config);
  const std::vector<TaskItem> items = task_items(tasks);
  ProgressSink sink(progress);
  MaskEvalResult r;
  {
    py::gil_scoped_release release;
    r = run_mask_eval(model, items, head_scores, opts, out_dir);
  }
  sink.rethrow_if_failed();
  return json_to_py(mask_eval_to_json(r));
}

}  // namespace

void bind_analysis(py::module_& m, py::class_<PyModel>& model_class) {
  model_class.def("influence", [](const PyModel& self, const std::vector<std::string>& documents,
                                  const std::string& out_dir, const py::object& grid, double baseline,
                                  const std::string& heads, const std::string& method, double context_frac,
                                  std::uint64_t seed, bool reuse_prefix, const std::string& budgets,
                                  const py::object& progress, const py::kwargs& options) {
    return with_python_names([&] {
      return influence(self, documents, out_dir, grid, baseline, heads, method, context_frac, seed, reuse_prefix,
                       budgets, progress, options);
    });
  }, py::arg("documents"), py::arg("out_dir"), py::arg("grid") = "0:0.5:51",
                  py::arg("baseline") = 0.05, py::arg("heads") = "all", py::arg("method") = "am",
                  py::arg("context_frac") = 0.6, py::arg("seed") = 0, py::arg("reuse_prefix") = true,
                  py::arg("budgets") = "", py::arg("progress") = py::none());
  model_class.def("mask_eval", [](const PyModel& self, const py::object& tasks, const std::string& scores,
                                  const std::vector<int>& ks, int random_seeds, std::uint64_t seed,
                                  const std::string& ablation, const std::string& head_means,
                                  const std::string& reference, const std::vector<std::string>& metrics,
                                  const std::string& out_dir, const py::object& progress) {
    return with_python_names([&] {
      return mask_eval(self, tasks, scores, ks, random_seeds, seed, ablation, head_means, reference, metrics, out_dir,
                       progress);
    });
  }, py::arg("tasks"), py::arg("scores"), py::arg("ks"),
                  py::arg("random_seeds") = 5, py::arg("seed") = 0, py::arg("ablation") = "zero",
                  py::arg("head_means") = "", py::arg("reference") = "gold",
                  py::arg("metrics") = std::vector<std::string>{"chrf"}, py::arg("out_dir") = "",
                  py::arg("progress") = py::none());

  m.def("optimize_budgets", [](const py::object& curves, const std::vector<double>& targets, double floor, int units) {
    BudgetSolverOptions o;
    o.targets = targets_arg(targets);
    o.floor = floor;
    o.units = units;
    return with_python_names([&] {
      const InfluenceCurves c = curves_arg(curves);
      BudgetSchedule s;
      {
        py::gil_scoped_release release;
        s = optimize_budgets(c, o);
      }
      return json_to_py(budget_schedule_to_json(s));
    });
  }, py::arg("curves"), py::arg("targets") = std::vector<double>{0.01, 0.02, 0.05, 0.1}, py::arg("floor") = 0.1,
     py::arg("units") = 200);
  m.def("uniform_budgets", [](int n_layers, int n_kv_heads, const std::vector<double>& targets,
                              const py::object& curves) {
    BudgetSchedule s = uniform_schedule(n_layers, n_kv_heads, targets_arg(targets));
    if (!curves.is_none()) set_predicted_delta(s, curves_arg(curves));
    return json_to_py(budget_schedule_to_json(s));
  }, py::arg("n_layers"), py::arg("n_kv_heads"), py::arg("targets") = std::vector<double>{0.01, 0.02, 0.05, 0.1},
     py::arg("curves") = py::none());
  m.def("pyramid_budgets", [](int n_layers, int n_kv_heads, const std::vector<double>& targets, double beta,
                              const py::object& curves) {
    BudgetSchedule s = pyramid_schedule(n_layers, n_kv_heads, targets_arg(targets), beta);
    if (!curves.is_none()) set_predicted_delta(s, curves_arg(curves));
    return json_to_py(budget_schedule_to_json(s));
  }, py::arg("n_layers"), py::arg("n_kv_heads"), py::arg("targets") = std::vector<double>{0.01, 0.02, 0.05, 0.1},
     py::arg("beta") = 20.0, py::arg("curves") = py::none());
  m.def("per_head_budgets", [](const py::object& schedule, const std::vector<int>& tokens_per_head, double ratio,
                               double max_head_ratio) {
    const BudgetSchedule s = py::isinstance<py::str>(schedule)
                                 ? read_budget_schedule(schedule.cast<std::string>())
                                 : budget_schedule_from_json(py_to_json(schedule), "schedule");
    return per_head_budgets(s.proportions(), tokens_per_head, ratio, max_head_ratio);
  }, py::arg("schedule"), py::arg("tokens_per_head"), py::arg("ratio"), py::arg("max_head_ratio") = 1.0);
}

}  // namespace kvcompact::py_bind
