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
  /// --fast-quant: int8 activations against ggml-quantised weights in decoding (MatmulMode::FastQuant;
  /// llama.cpp's arithmetic, not exact).
  bool fast_quant = false;
};

/// A subcommand's body, run after parsing; returns the process exit status.
using Runner = std::function<int()>;

/// Adds --threads, --json and --fast-quant to a subcommand.
void add_common_options(CLI::App* cmd, CommonOptions& common);

/// Sets the OpenMP and OpenBLAS thread counts (threads > 0).
void apply_threads(int threads);

/// Applies the options that act process-wide: threads and --fast-quant.
void apply_common_options(const CommonOptions& common);

/// Prints a JSON object (pretty, with a trailing newline) on stdout.
void print_json(const nlohmann::json& j);

/// Parses "0.05,0.1,0.2" into numbers; throws Error naming the option and the bad item.
std::vector<double> parse_number_list(const std::string& option, const std::string& text);
/// Prints "kvcompact: warning: positions up to N run past the model's max_seq_len M ..." on stderr
/// once per process when positions > max_seq_len > 0 (RoPE positions the model was not trained on).
void warn_past_max_seq_len(long long positions, int max_seq_len);

/// Splits "a,b,c" at commas, trimming spaces; "" gives no items. Throws Error "<option>: empty
/// item in '...'" for an empty item ("a,,b", a leading or trailing comma).
std::vector<std::string> split_list(const std::string& text, const std::string& option = "");

/// CLI11 checks with one-line messages ("--docs: must be a positive number, got '0'").
/// --max-head-ratio of the per-head budget options: only with --budgets (when it is not 1) and in
/// (0, 1]. Throws Error("--max-head-ratio: ...").
void check_max_head_ratio(double ratio, bool with_budgets);

CLI::Validator positive_number();
CLI::Validator non_negative_number();
/// A keep ratio: a whole finite number in [0, 1]; "" and values that underflow a double (1e-400) are refused.
CLI::Validator ratio_number();

// Each command file registers its subcommand and returns the runner to call when it is chosen.
Runner register_info(CLI::App& app, CommonOptions& common);
Runner register_merge(CLI::App& app, CommonOptions& common);
Runner register_slurm(CLI::App& app, CommonOptions& common);
Runner register_tokenize(CLI::App& app, CommonOptions& common);
Runner register_logits(CLI::App& app, CommonOptions& common);
Runner register_generate(CLI::App& app, CommonOptions& common);
Runner register_ppl(CLI::App& app, CommonOptions& common);
Runner register_compact_eval(CLI::App& app, CommonOptions& common);
Runner register_compact(CLI::App& app, CommonOptions& common);     // tools/cmd_cache.cpp
Runner register_qa_eval(CLI::App& app, CommonOptions& common);     // tools/cmd_qa.cpp
Runner register_make_cloze(CLI::App& app, CommonOptions& common);  // tools/cmd_qa.cpp
Runner register_chat_render(CLI::App& app, CommonOptions& common);  // tools/cmd_chat.cpp
Runner register_influence(CLI::App& app, CommonOptions& common);    // tools/cmd_influence.cpp
Runner register_budget(CLI::App& app, CommonOptions& common);       // tools/cmd_influence.cpp
Runner register_plot(CLI::App& app, CommonOptions& common);         // tools/cmd_influence.cpp
Runner register_methods(CLI::App& app, CommonOptions& common);      // tools/cmd_influence.cpp
Runner register_tasks(CLI::App& app, CommonOptions& common);        // tools/cmd_tasks.cpp
Runner register_head_scores(CLI::App& app, CommonOptions& common);  // tools/cmd_heads.cpp
Runner register_head_means(CLI::App& app, CommonOptions& common);   // tools/cmd_heads.cpp
Runner register_mask_eval(CLI::App& app, CommonOptions& common);    // tools/cmd_heads.cpp
Runner register_budget_eval(CLI::App& app, CommonOptions& common);  // tools/cmd_compact_eval.cpp
Runner register_speed(CLI::App& app, CommonOptions& common);        // tools/cmd_speed.cpp
Runner register_task_eval(CLI::App& app, CommonOptions& common);    // tools/cmd_task_eval.cpp
Runner register_serve(CLI::App& app, CommonOptions& common);        // tools/cmd_serve.cpp

/// `generate --cache FILE`: continue from a saved .kvc cache (tools/cmd_cache.cpp).
struct GenerateFromCacheArgs {
  std::string model, tokenizer, cache, prompt;
  int steps = 256;  ///< tokens to generate at most
  float temperature = 1.0f, top_p = 0.9f;
  unsigned long long seed = 0;
};
int run_generate_from_cache(const GenerateFromCacheArgs& args, const CommonOptions& common);

/// `ppl --cache FILE`: score a text as the continuation of a saved .kvc cache (tools/cmd_cache.cpp).
struct PplFromCacheArgs {
  std::string model, tokenizer, cache, data;
  long long max_tokens = 0;  ///< score only the first N tokens (0 = all)
};
int run_ppl_from_cache(const PplFromCacheArgs& args, const CommonOptions& common);

}  // namespace kvcompact::cli
