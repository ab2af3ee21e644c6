// `kvcompact tasks`: write a task suite (JSONL, tasks/task_suite.h) generated from the shared data.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "tasks/task_generators.h"
#include "tasks/task_suite.h"
#include "cli_common.h"
#include "core/error.h"
#include "io/hf_tokenizer.h"
#include "loaders/llama2c_checkpoint.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact::cli {

namespace {

namespace fs = std::filesystem;

/// The shared data folder: $KVC_SHARED/data (or $KVC_SHARED_DIR/data), else ../shared/data beside
/// the checkout that holds this binary (build folder one level below it), else ../shared/data from
/// the working folder. Returns the first that exists, or the first candidate when none does.
std::string default_data_dir() {
  std::vector<fs::path> candidates;
  for (const char* var : {"KVC_SHARED", "KVC_SHARED_DIR"})
    if (const char* v = std::getenv(var); v && *v) candidates.push_back(fs::path(v) / "data");
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) candidates.push_back(exe.parent_path().parent_path().parent_path() / "shared" / "data");
  candidates.push_back(fs::path("..") / "shared" / "data");
  for (const fs::path& c : candidates)
    if (fs::is_directory(c, ec)) return c.lexically_normal().string();
  return candidates.front().lexically_normal().string();
}

/// Number of entries of a llama2.c tokenizer.bin (int32 max_token_length, then per token float32
/// score, int32 length, bytes), counted up to the end of the file.
int llama2c_vocab_size(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open tokenizer", path));
  std::int32_t max_len = 0;
  if (!in.read(reinterpret_cast<char*>(&max_len), 4)) throw Error(fmt::format("{}: truncated tokenizer", path));
  int n = 0;
  for (;;) {
    char head[8];
    in.read(head, 8);
    if (in.gcount() == 0) break;
    if (in.gcount() != 8) throw Error(fmt::format("{}: truncated tokenizer at token {}", path, n));
    std::int32_t len;
    std::memcpy(&len, head + 4, 4);
    if (len < 0) throw Error(fmt::format("{}: corrupt tokenizer: token {} has length {}", path, n, len));
    in.seekg(len, std::ios::cur);
    if (!in) throw Error(fmt::format("{}: truncated tokenizer at token {}", path, n));
    ++n;
  }
  return n;
}

/// A tokenizer file on its own: a Hugging Face tokenizer.json (or a folder holding one), else a
/// llama2.c tokenizer.bin.
std::unique_ptr<Tokenizer> load_tokenizer_file(const std::string& path) {
  if (fs::is_directory(path) || fs::path(path).extension() == ".json") return load_hf_tokenizer(path);
  if (!fs::exists(path)) throw Error(fmt::format("{}: tokenizer file not found", path));
  return read_llama2c_tokenizer(path, llama2c_vocab_size(path));
}

/// `tasks --check FILE`: reads the file (read_task_suite) and prints the item count per family.
int check_task_file(const std::string& path, const CommonOptions& common) {
  const std::vector<TaskItem> items = read_task_suite(path);
  std::vector<std::pair<std::string, int>> counts;
  for (const std::string& f : task_families()) {
    const int c = static_cast<int>(std::count_if(items.begin(), items.end(), [&](const TaskItem& t) { return t.family == f; }));
    if (c > 0) counts.emplace_back(f, c);
  }
  if (common.json) {
    nlohmann::json by_family = nlohmann::json::object();
    for (const auto& [f, c] : counts) by_family[f] = c;
    print_json({{"file", path}, {"items", items.size()}, {"families", by_family}});
  } else {
    std::vector<std::string> parts;
    for (const auto& [f, c] : counts) parts.push_back(fmt::format("{} {}", f, c));
    fmt::print("{}: {} items ({})\n", path, items.size(), fmt::join(parts, ", "));
  }
  return 0;
}

}  // namespace

Runner register_tasks(CLI::App& app, CommonOptions& common) {
  struct Opts {
    std::string family, model, tokenizer, data_dir, out, check;
    TaskGenOptions g;
    int max_prompt_tokens = -1;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("tasks", "generate a task suite (JSONL) for mask-eval from the shared data");
  cmd->add_option("--family", o->family,
                  "retrieval | copy | knowledge | math | inference | a RULER task: ruler_niah_single_1..3, "
                  "ruler_niah_multikey_1..3, ruler_niah_multivalue, ruler_niah_multiquery, ruler_vt, ruler_cwe, "
                  "ruler_fwe; `--family list` prints them all");
  cmd->add_option("--model", o->model, "model whose tokenizer counts tokens (and whose max_seq_len limits prompts)");
  cmd->add_option("--tokenizer", o->tokenizer,
                  "tokenizer file (llama2.c tokenizer.bin or tokenizer.json); with --model: the model's tokenizer");
  cmd->add_option("--n", o->g.n, "items to make");
  cmd->add_option("--shots", o->g.shots, "few-shot examples per prompt (knowledge, math, inference)");
  cmd->add_option("--context-tokens", o->g.context_tokens,
                  "retrieval/copy/RULER prompt length in tokens, BOS and question included (0 = 256; RULER 4096)");
  cmd->add_option("--depth", o->g.depth, "retrieval needle depth in [0, 1] (default: spread evenly over items)");
  cmd->add_option("--seed", o->g.seed, "random seed (same seed, same file)");
  cmd->add_option("--variant", o->g.variant,
                  "retrieval: passkey|fact|mixed; math: mixed|arithmetic|gsm8k; inference: bAbI tasks, e.g. 1,2");
  cmd->add_option("--max-prompt-tokens", o->max_prompt_tokens,
                  "prompt tokens + answer tokens must fit (default: the --model's max_seq_len; 0 = no limit)");
  cmd->add_option("--data-dir", o->data_dir, "shared data folder (default: $KVC_SHARED/data or ../shared/data)");
  cmd->add_option("-o,--output,--out", o->out, "the JSONL file to write");
  cmd->add_option("--check", o->check, "only read and validate this task file; print its items per family");
  add_common_options(cmd, common);
  return [o, &common] {
    if (!o->check.empty()) return check_task_file(o->check, common);
    if (o->family.empty()) throw Error("tasks: --family is required (or --check FILE)");
    if (o->family == "list") {
      for (const std::string& f : task_families()) fmt::print("{}\n", f);
      return 0;
    }
    if (o->out.empty()) throw Error("tasks: -o/--output is required");
    if (o->model.empty() && o->tokenizer.empty())
      throw Error("tasks: give --model or --tokenizer (tokens are counted with that tokenizer)");
    TaskGenOptions g = o->g;
    std::unique_ptr<Model> model;
    std::unique_ptr<Tokenizer> own_tokenizer;
    const Tokenizer* tok = nullptr;
    if (!o->model.empty()) {
      model = std::make_unique<Model>(load_model(o->model, o->tokenizer));
      tok = model->tokenizer.get();
      if (tok == nullptr) throw Error(fmt::format("{}: model has no tokenizer", o->model));
    } else {
      own_tokenizer = load_tokenizer_file(o->tokenizer);
      tok = own_tokenizer.get();
    }
    g.max_prompt_tokens = o->max_prompt_tokens >= 0 ? o->max_prompt_tokens
                          : model                   ? model->config.max_seq_len
                                                    : 0;
    const std::string data_dir = o->data_dir.empty() ? default_data_dir() : o->data_dir;
    const std::vector<TaskItem> items = generate_tasks(o->family, data_dir, *tok, g);
    write_task_suite(o->out, items);

    std::vector<int> lengths;
    for (const TaskItem& item : items) lengths.push_back(static_cast<int>(tok->encode(item.prompt, true).size()));
    const int lo = *std::min_element(lengths.begin(), lengths.end());
    const int hi = *std::max_element(lengths.begin(), lengths.end());
    double mean = 0;
    for (int l : lengths) mean += l;
    mean /= static_cast<double>(lengths.size());
    if (common.json) {
      print_json({{"output", o->out},
                  {"family", o->family},
                  {"items", items.size()},
                  {"seed", g.seed},
                  {"shots", g.shots},
                  {"context_tokens", g.context_tokens > 0 ? g.context_tokens : default_context_tokens(o->family)},
                  {"max_prompt_tokens", g.max_prompt_tokens},
                  {"data_dir", data_dir},
                  {"prompt_tokens", {{"min", lo}, {"mean", mean}, {"max", hi}}}});
    } else {
      fmt::print("{}: {} {} items (seed {}), prompt tokens min {} mean {:.1f} max {} (BOS included)\n", o->out,
                 items.size(), o->family, g.seed, lo, mean, hi);
    }
    return 0;
  };
}

}  // namespace kvcompact::cli
