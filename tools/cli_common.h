// Shared pieces of the kvcompact command-line tool: options every command takes and output helpers.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvcompact::cli {

/// Options every subcommand accepts.
struct CommonOptions {
  int threads = 0;    ///< 0 = OpenMP default
  bool json = false;  ///< print one JSON object on stdout instead of text
};

/// A subcommand's body, run after parsing; returns the process exit status.
using Runner = std::function<int()>;

/// Adds --threads and --json to a subcommand.
void add_common_options(CLI::App* cmd, CommonOptions& common);

/// Sets the OpenMP and OpenBLAS thread counts (threads > 0).
void apply_threads(int threads);

/// Prints a JSON object (pretty, with a trailing newline) on stdout.
void print_json(const nlohmann::json& j);

/// Parses "0.05,0.1,0.2" into numbers; throws Error naming the option and the bad item.
std::vector<double> parse_number_list(const std::string& option, const std::string& text);
/// Splits "a,b,c" at commas (empty items dropped).
std::vector<std::string> split_list(const std::string& text);

// Each command file registers its subcommand and returns the runner to call when it is chosen.
Runner register_info(CLI::App& app, CommonOptions& common);
Runner register_tokenize(CLI::App& app, CommonOptions& common);
Runner register_logits(CLI::App& app, CommonOptions& common);
Runner register_generate(CLI::App& app, CommonOptions& common);
Runner register_ppl(CLI::App& app, CommonOptions& common);
Runner register_compact_eval(CLI::App& app, CommonOptions& common);

}  // namespace kvcompact::cli
