// kvcompact: run Llama-family models on CPU and compact their KV cache by Attention Matching.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <new>

#include "cli_common.h"
#include "io/error.h"

int main(int argc, char** argv) {
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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    apply_threads(common.threads);
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
