// kvcompact: run Llama-family models on CPU and compact their KV cache by Attention Matching.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <new>

#include "cli_common.h"
#include "core/error.h"

namespace {

/// OpenMP threads that spin while waiting (libgomp's default: about 300,000 spins, then sleep)
/// starve each other on a busy machine: on 2 cores shared with other work, many small parallel
/// regions ran 5-40x slower than on one thread. On an otherwise idle machine the spinning is what
/// makes decoding fast: a token is ~200 short parallel regions, and waking sleeping threads for
/// each cost a third of SmolLM2's decode speed (43 vs 65 tokens/s on 2 cores). libgomp reads
/// OMP_WAIT_POLICY before main(), so when the user has chosen neither OMP_WAIT_POLICY nor
/// GOMP_SPINCOUNT we look at the processes running right now (/proc/loadavg's 4th field, which
/// counts us; the fewest over up to 6 samples in 15 ms): when the others and our threads would not
/// fit on the CPUs, we set PASSIVE and re-execute ourselves once. Set OMP_WAIT_POLICY=ACTIVE or
/// PASSIVE to choose.
bool machine_is_busy() {
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  long threads = cpus;
  if (const char* t = std::getenv("OMP_NUM_THREADS"); t != nullptr && std::atol(t) > 0) threads = std::atol(t);
  // The fewest running over a few samples 3 ms apart: the processes started beside us (the rest of a
  // shell pipeline, a parent's helpers) run for a moment at start-up and must not count as load.
  long fewest = -1;
  for (int sample = 0; sample < 6; ++sample) {
    if (sample > 0) usleep(3000);
    std::FILE* f = std::fopen("/proc/loadavg", "r");
    if (f == nullptr) return true;  // cannot tell: the safe choice
    double l1, l5, l15;
    long running = 0, total = 0;
    const int got = std::fscanf(f, "%lf %lf %lf %ld/%ld", &l1, &l5, &l15, &running, &total);
    std::fclose(f);
    if (got != 5) return true;
    fewest = fewest < 0 ? running : std::min(fewest, running);
    if (fewest <= 1) break;  // only us: idle
  }
  const long others = std::max(0L, fewest - 1);
  return others + std::min(threads, cpus) > cpus;
}

void choose_wait_policy(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr || std::getenv("GOMP_SPINCOUNT") != nullptr) return;
  if (!machine_is_busy()) return;  // libgomp's default spinning
  setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
  execv("/proc/self/exe", argv);  // returns only on failure: then run as we are
}

}  // namespace

int main(int argc, char** argv) {
  choose_wait_policy(argv);
  using namespace kvcompact::cli;
  CLI::App app{"kvcompact: KV-cache compaction (Attention Matching) and head analysis for Llama-family models"};
  app.require_subcommand(1);
  CommonOptions common;
  std::vector<std::pair<CLI::App*, Runner>> commands;
  auto add = [&](Runner (*reg)(CLI::App&, CommonOptions&)) {
    std::size_t before = app.get_subcommands({}).size();
    Runner r = reg(app, common);
    commands.emplace_back(app.get_subcommands({})[before], std::move(r));
  };
  add(register_info);
  add(register_tokenize);
  add(register_logits);
  add(register_generate);
  add(register_ppl);
  add(register_compact_eval);
  add(register_compact);
  add(register_qa_eval);
  add(register_make_cloze);
  add(register_chat_render);
  add(register_influence);
  add(register_merge);
  add(register_slurm);
  add(register_budget);
  add(register_plot);
  add(register_methods);
  add(register_tasks);
  add(register_head_scores);
  add(register_head_means);
  add(register_mask_eval);
  add(register_budget_eval);
  add(register_speed);
  add(register_task_eval);
  add(register_serve);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help
    std::fprintf(stderr, "kvcompact: error: %s (see --help)\n", e.what());
    return 1;
  }
  try {
    apply_common_options(common);
    for (auto& [cmd, run] : commands)
      if (cmd->parsed()) return run();
  } catch (const kvcompact::Error& e) {
    std::fprintf(stderr, "kvcompact: error: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvcompact: error: out of memory\n");
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kvcompact: error: %s\n", e.what());
    return 1;
  }
  return 1;
}
