// `kvcompact slurm`: a study (influence sweep, compact-eval, qa-eval, mask-eval, task-eval) as a SLURM job
// array plus a dependent merge job (issue #18).
#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "studies/budget_eval.h"
#include "studies/unit_study.h"
#include "studies/influence_shards.h"
#include "cli_common.h"
#include "io/atomic_file.h"
#include "core/error.h"

namespace kvcompact::cli {
namespace {
namespace fs = std::filesystem;

/// Single-quoted for a POSIX shell.
std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

/// A #SBATCH value: as it is when it holds no blank or '#', else in double quotes (sbatch's
/// directive parser splits at unquoted blanks and ends the line at an unquoted '#'). Values with
/// a double quote or a line break are refused before this is called.
std::string sbatch_quote(const std::string& s) {
  if (s.find_first_of(" \t#") == std::string::npos) return s;
  return "\"" + s + "\"";
}

/// The full path of `name` on PATH, or "" when absent.
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string p = path != nullptr ? path : "";
  std::size_t start = 0;
  while (start <= p.size()) {
    const std::size_t end = std::min(p.find(':', start), p.size());
    const fs::path cand = fs::path(p.substr(start, end - start).empty() ? "." : p.substr(start, end - start)) / name;
    if (access(cand.c_str(), X_OK) == 0) return cand.string();
    start = end + 1;
  }
  return "";
}

/// Runs `command`, returns its stdout; throws Error with the output when it fails.
std::string run_capture(const std::string& command) {
  FILE* f = popen((command + " 2>&1").c_str(), "r");
  if (f == nullptr) throw Error(fmt::format("slurm: cannot run {}", command));
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, f) != nullptr) out += buf;
  const int rc = pclose(f);
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  if (rc != 0) throw Error(fmt::format("slurm: `{}` failed: {}", command, out));
  return out;
}

void print_status(const StudyStatus& st, bool json) {
  if (json) {
    nlohmann::json shards = nlohmann::json::array();
    for (const ShardStatus& s : st.shards)
      shards.push_back({{"shard", fmt::format("{}/{}", s.shard.index, s.shard.count)},
                        {"units", s.end - s.begin},
                        {"done", s.done},
                        {"missing", s.missing}});
    print_json({{"study", st.study.id}, {"units", st.units}, {"done", st.done}, {"shards", shards}});
    return;
  }
  fmt::print("study {}: {}/{} units done ({} documents x {} heads)\n", st.study.id, st.done, st.units,
             st.study.documents, st.study.heads.size());
  for (const ShardStatus& s : st.shards) {
    fmt::print("  shard {}/{}: units {}..{}: {} done, {} missing", s.shard.index, s.shard.count, s.begin, s.end,
               s.done, s.missing.size());
    for (std::size_t i = 0; i < s.missing.size() && i < 8; ++i) fmt::print("{}[{}]", i == 0 ? ": " : " ", s.missing[i]);
    fmt::print("{}\n", s.missing.size() > 8 ? " ..." : "");
  }
}

}  // namespace

Runner register_slurm(CLI::App& app, CommonOptions& common) {
  struct Opts {
    int array = 0, cpus = 1;
    std::string partition, time, mem, status, job_name;
    bool dry_run = false;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand(
      "slurm",
      "run a study on a SLURM cluster: `slurm influence|compact-eval|qa-eval|mask-eval|task-eval|budget-eval ARGS... --array N` writes "
      "DIR/slurm/{STUDY_array,merge}.sbatch (task i runs STUDY ARGS --shard i/N) and submits both with sbatch; "
      "`slurm --status DIR` shows done/missing units per shard");
  cmd->allow_extras();
  cmd->add_option("--array", o->array, "number of array tasks (shards)")->check(positive_number());
  cmd->add_option("--partition", o->partition, "SLURM partition (#SBATCH --partition)");
  cmd->add_option("--time", o->time, "time limit per task (#SBATCH --time, e.g. 6:00:00)");
  cmd->add_option("--cpus", o->cpus, "CPUs per task (#SBATCH --cpus-per-task; the task's --threads)")
      ->check(positive_number());
  cmd->add_option("--mem", o->mem, "memory per task (#SBATCH --mem, e.g. 8G)");
  cmd->add_option("--job-name", o->job_name, "job name (default kvc-STUDY; the merge job adds -merge)");
  cmd->add_flag("--dry-run", o->dry_run, "only write the scripts");
  cmd->add_option("--status", o->status, "show done/missing units per shard of the study in this folder");
  add_common_options(cmd, common);
  return [o, cmd, &common] {
    const std::vector<std::string> args = cmd->remaining();
    if (!o->status.empty()) {
      if (!args.empty()) throw Error(fmt::format("slurm --status: unexpected argument '{}'", args[0]));
      const StudyKind* kind = study_kind_in(o->status);
      if (kind != nullptr && kind->name == "budget-eval") {
        const BudgetEvalResult r = merge_budget_eval(o->status);
        if (common.json) print_json({{"series", r.series.size()}, {"complete", r.complete()}, {"missing", r.missing}});
        else {
          fmt::print("budget-eval study: {} of {} series complete\n", r.series.size() - r.missing.size(), r.series.size());
          for (const std::string& m : r.missing) fmt::print("  missing {}\n", m);
        }
        return 0;
      }
      if (kind != nullptr && kind->name != "influence") {
        const UnitStudyState st = read_unit_study(o->status, *kind);
        std::vector<int> missing_1;  // 1-based, as every message numbers units
        std::vector<std::string> missing_names;
        for (int u : st.missing) {
          missing_1.push_back(u + 1);
          missing_names.push_back(st.study.unit_names[static_cast<std::size_t>(u)]);
        }
        if (common.json) {
          nlohmann::json shards = nlohmann::json::array();
          for (const auto& s : st.shards)
            shards.push_back({{"shard", fmt::format("{}/{}", s.shard.index, s.shard.count)},
                              {"units", s.end - s.begin},
                              {"done", s.done}});
          print_json({{"study", st.study.id}, {"kind", kind->name}, {"units", st.study.units()}, {"done", st.done()},
                      {"missing", missing_1}, {"missing_names", missing_names}, {"shards", shards}});
        } else {
          fmt::print("{}\n", unit_study_status_line(st));
          for (const auto& s : st.shards) {
            if (s.end == s.begin)
              fmt::print("  shard {}/{}: no {}s (more shards than {}s)\n", s.shard.index, s.shard.count, kind->noun,
                         kind->noun);
            else
              fmt::print("  shard {}/{}: {}s {}..{}: {} of {} done\n", s.shard.index, s.shard.count, kind->noun,
                         s.begin + 1, s.end, s.done, s.end - s.begin);
          }
          if (!st.shards.empty() && static_cast<int>(st.shards.size()) < st.shards.back().shard.count)
            fmt::print("  {} of {} shards have written their manifest (the others have not started)\n",
                       st.shards.size(), st.shards.back().shard.count);
        }
        return 0;
      }
      print_status(study_status({o->status}), common.json);
      return 0;
    }
    if (args.empty() ||
        (args[0] != "influence" && args[0] != "compact-eval" && args[0] != "qa-eval" && args[0] != "mask-eval" &&
         args[0] != "task-eval" && args[0] != "budget-eval"))
      throw Error("slurm: give the study to run: `kvcompact slurm "
                  "influence|compact-eval|qa-eval|mask-eval|task-eval|budget-eval ARGS... --array N` (or --status DIR)");
    const std::string study = args[0];
    for (const auto& [name, value] : {std::pair<const char*, const std::string*>{"--partition", &o->partition},
                                      {"--time", &o->time}, {"--mem", &o->mem}, {"--job-name", &o->job_name}})
      if (value->find_first_of("\n\r\"") != std::string::npos)
        throw Error(fmt::format("slurm: {} holds a line break or a double quote (a #SBATCH line cannot carry it)", name));
    const std::string job_name = o->job_name.empty() ? "kvc-" + study : o->job_name;
    if (o->array > 1001)
      std::fprintf(stderr, "kvcompact: warning: --array %d is above SLURM's default MaxArraySize (1001); sbatch "
                           "refuses it unless the cluster raised that limit\n", o->array);
    if (o->array < 1) throw Error("slurm: --array N (the number of array tasks) is required");
    std::string out;
    for (std::size_t i = 1; i < args.size(); ++i) {
      if (args[i] == "--shard" || args[i].starts_with("--shard="))
        throw Error("slurm: --shard is set per array task; leave it out");
      if (args[i] == "--threads" || args[i].starts_with("--threads="))
        throw Error("slurm: --threads is set per array task (--cpus); leave it out");
      if (args[i] == "--out" && i + 1 < args.size()) out = args[i + 1];
      if (args[i].starts_with("--out=")) out = args[i].substr(6);
    }
    if (out.empty()) throw Error(fmt::format("slurm {}: --out DIR is required (the shared output folder)", study));
    // The inputs every array task reads must exist before N tasks are queued to fail on them (the
    // tasks run in this folder: #SBATCH --chdir).
    for (std::size_t i = 1; i < args.size(); ++i) {
      for (const char* flag : {"--model", "--data", "--tokenizer", "--tasks", "--scores", "--budgets", "--head-means"}) {
        std::vector<std::string> values;
        const std::string f = flag;
        if (args[i] == f && i + 1 < args.size()) values = split_list(args[i + 1], f);
        else if (args[i].starts_with(f + "=")) values = split_list(args[i].substr(f.size() + 1), f);
        for (const std::string& v : values)
          if (!fs::exists(v))
            throw Error(fmt::format("slurm {}: {} {}: no such file or folder (every array task would fail on it)",
                                    study, f, v));
      }
    }
    const fs::path cwd = fs::current_path();
    const fs::path out_abs = fs::absolute(out).lexically_normal();
    const fs::path sdir = out_abs / "slurm";
    const std::string exe = fs::read_symlink("/proc/self/exe").string();
    std::string common_hdr = fmt::format("#SBATCH --chdir={}\n", sbatch_quote(cwd.string()));
    if (!o->partition.empty()) common_hdr += fmt::format("#SBATCH --partition={}\n", sbatch_quote(o->partition));
    if (!o->time.empty()) common_hdr += fmt::format("#SBATCH --time={}\n", sbatch_quote(o->time));
    if (!o->mem.empty()) common_hdr += fmt::format("#SBATCH --mem={}\n", sbatch_quote(o->mem));
    for (const auto& [what, path] : {std::pair<const char*, std::string>{"the working folder", cwd.string()},
                                     {"--out", out_abs.string()}, {"the kvcompact executable", exe}})
      if (path.find_first_of("\n\r\"") != std::string::npos)
        throw Error(fmt::format("slurm: {} {} holds a line break or a double quote, which a #SBATCH line cannot "
                                "carry; use another folder",
                                what, nlohmann::json(path).dump()));  // escaped: the message stays one line
    std::string cmdline = shell_quote(exe);
    for (const auto& a : args) cmdline += " " + shell_quote(a);
    // Options this subcommand shares with the study (add_common_options) reach the tasks too.
    if (common.fast_quant) cmdline += " --fast-quant";
    const std::string array_script = fmt::format(
        "#!/bin/bash\n"
        "# kvcompact {study} as a SLURM job array: task i runs shard i/{n}. A requeued or restarted\n"
        "# task skips the units already in {out}/units.\n"
        "#SBATCH --job-name={name}\n"
        "#SBATCH --array=0-{last}\n"
        "#SBATCH --cpus-per-task={cpus}\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --requeue\n"
        "#SBATCH --open-mode=append\n"
        "#SBATCH --output={logs}\n"
        "{hdr}"
        "set -euo pipefail\n"
        "export OMP_NUM_THREADS=\"${{SLURM_CPUS_PER_TASK:-{cpus}}}\"\n"
        "echo \"kvcompact: job ${{SLURM_JOB_ID}} task ${{SLURM_ARRAY_TASK_ID}} (restart ${{SLURM_RESTART_COUNT:-0}}) "
        "on $(hostname -s)\"\n"
        "exec {cmd} --shard \"${{SLURM_ARRAY_TASK_ID}}/{n}\" --threads \"${{SLURM_CPUS_PER_TASK:-{cpus}}}\"\n",
        fmt::arg("study", study), fmt::arg("n", o->array), fmt::arg("out", out_abs.string()),
        fmt::arg("name", sbatch_quote(job_name)), fmt::arg("last", o->array - 1), fmt::arg("cpus", o->cpus),
        fmt::arg("logs", sbatch_quote((sdir / "logs" / "shard_%a.log").string())),
        fmt::arg("hdr", common_hdr), fmt::arg("cmd", cmdline));
    const std::string merge_script = fmt::format(
        "#!/bin/bash\n"
        "# Merges the shards once every array task has ended (afterany); exit 2 lists missing units.\n"
        "#SBATCH --job-name={name}\n"
        "#SBATCH --cpus-per-task=1\n"
        "#SBATCH --ntasks=1\n"
        "#SBATCH --output={logs}\n"
        "{hdr}"
        "set -euo pipefail\n"
        "exec {exe} merge {out}\n",
        fmt::arg("name", sbatch_quote(job_name + "-merge")), fmt::arg("logs", sbatch_quote((sdir / "logs" / "merge_%j.log").string())),
        fmt::arg("hdr", common_hdr),
        fmt::arg("exe", shell_quote(exe)), fmt::arg("out", shell_quote(out_abs.string())));
    const std::string array_path = (sdir / (study + "_array.sbatch")).string();
    const std::string merge_path = (sdir / "merge.sbatch").string();
    std::string sbatch;
    if (!o->dry_run) {
      sbatch = find_on_path("sbatch");
      if (sbatch.empty())
        throw Error("slurm: sbatch not found on PATH (install SLURM's client tools, or pass --dry-run to only "
                    "write the scripts)");
    }
    fs::create_directories(sdir / "logs");
    write_file_atomic(array_path, array_script);
    write_file_atomic(merge_path, merge_script);
    nlohmann::json j = {{"array_script", array_path}, {"merge_script", merge_path}, {"tasks", o->array}};
    if (o->dry_run) {
      if (common.json) print_json(j);
      else
        fmt::print("wrote {} ({} tasks) and {} (not submitted: --dry-run); to submit them by hand:\n"
                   "  id=$(sbatch --parsable {}) && sbatch --dependency=afterany:${{id%;*}} {}\n",
                   array_path, o->array, merge_path, shell_quote(array_path), shell_quote(merge_path));
      return 0;
    }
    auto job_id = [](std::string s) { return s.substr(0, s.find(';')); };  // --parsable: "id[;cluster]"
    const std::string array_id = job_id(run_capture(shell_quote(sbatch) + " --parsable " + shell_quote(array_path)));
    const std::string merge_id = job_id(run_capture(shell_quote(sbatch) + " --parsable --dependency=afterany:" +
                                                    array_id + " " + shell_quote(merge_path)));
    j["array_job"] = array_id;
    j["merge_job"] = merge_id;
    if (common.json) print_json(j);
    else
      fmt::print("submitted array job {} ({} tasks, {}) and merge job {} (after it ends); `kvcompact slurm "
                 "--status {}` shows progress\n",
                 array_id, o->array, array_path, merge_id, out);
    return 0;
  };
}

}  // namespace kvcompact::cli
