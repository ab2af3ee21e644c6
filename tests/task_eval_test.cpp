// task-eval (issue 14) on stories260K: a method keeping every entry answers as the full row; the
// scores equal an independent recomputation (compact_context + generate_from_cache + RULER's
// string_match_all by hand); a rerun with --out skips finished items and gives the same JSON;
// bad inputs are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tasks/answer_scoring.h"
#include "compaction/compact_context.h"
#include "studies/task_eval.h"
#include "tasks/task_suite.h"
#include "cli_runner.h"
#include "core/error.h"
#include "loaders/model_loader.h"
#include "model/generate_from_cache.h"
#include "model/sampler.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";

using testing::CliRun;
using testing::expect_one_line_error;
using testing::fresh_dir;
using testing::read_json;
using testing::run_cli;
using testing::write_tmp;

const Model& stories() {
  static const Model m = load_model(kBin);
  return m;
}

TaskItem make_item(const std::string& id, const std::string& context, const std::string& question,
                   const std::string& answer_type, std::vector<std::string> references, int max_new_tokens) {
  TaskItem it;
  it.id = id;
  it.family = "copy";
  it.context = context;
  it.prompt = context + question;
  it.answer_type = answer_type;
  if (answer_type == "recall") {
    it.references = references;
    for (std::size_t i = 0; i < references.size(); ++i) it.reference += (i ? ", " : "") + references[i];
  } else {
    it.reference = references.at(0);
  }
  it.max_new_tokens = max_new_tokens;
  return it;
}

/// Two small items: a recall item (three references; the model tends to write "she"/"lily") and a
/// copy item scored by exact match.
std::vector<TaskItem> hand_items() {
  return {make_item("r1",
                    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun with "
                    "her dog Max.",
                    "\nOne day, Lily", "recall", {"she", "lily", "qqq"}, 24),
          make_item("c1", "Tom had a red ball and a blue hat. Lily saw a big dog.", "\nTom had a red", "text",
                    {"ball and a blue hat."}, 8)};
}

std::string task_file(const std::string& name, const std::vector<TaskItem>& items) {
  std::string bytes;
  for (const TaskItem& it : items) bytes += task_item_to_jsonl(it) + "\n";
  return write_tmp(name, bytes);
}

class TaskEval : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBin)) GTEST_SKIP() << "stories260K missing";
  }
};

// (1) recent and snapkv at ratio 1 keep every entry unchanged: the same answers and scores as the
// full row, item by item (the full row is computed once: one "full" row per family).
TEST_F(TaskEval, KeepingEveryEntryAnswersAsTheFullRow) {
  TaskEvalOptions opt;
  opt.methods = parse_method_list("recent,snapkv");
  opt.ratios = {1.0, 0.3};
  opt.progress = false;
  const TaskEvalResult r = run_task_eval(stories(), {{"hand.jsonl", hand_items()}}, opt);
  const std::vector<TaskEvalRowKey> keys = task_eval_row_keys(opt);
  ASSERT_EQ(keys.size(), 5u);
  ASSERT_EQ(r.units.size(), 2u);
  ASSERT_EQ(r.rows.size(), 5u);  // one family: full + 2 methods x 2 ratios
  EXPECT_EQ(std::count_if(r.rows.begin(), r.rows.end(), [](const TaskEvalRow& x) { return x.method == "full"; }), 1);
  for (const TaskEvalUnit& u : r.units) {
    ASSERT_EQ(u.answers.size(), keys.size());
    EXPECT_FALSE(u.answers[0].text.empty()) << u.id;
    for (std::size_t k = 1; k < keys.size(); ++k) {
      if (keys[k].ratio != 1.0) {
        EXPECT_LT(u.answers[k].entries, u.answers[0].entries);
        continue;
      }
      EXPECT_EQ(u.answers[k].text, u.answers[0].text) << u.id << " " << keys[k].method;
      EXPECT_EQ(u.answers[k].score, u.answers[0].score) << u.id << " " << keys[k].method;
      EXPECT_EQ(u.answers[k].entries, u.answers[0].entries);
    }
  }
  for (const TaskEvalRow& row : r.rows)
    if (row.ratio == 1.0) {
      EXPECT_EQ(row.score, r.rows[0].score) << row.method;
      EXPECT_EQ(row.score_sem, r.rows[0].score_sem) << row.method;
    }
  // Scores are x100: the full row's mean is 100 x the mean item_score.
  EXPECT_DOUBLE_EQ(r.rows[0].score, 100.0 * (r.units[0].answers[0].score + r.units[1].answers[0].score) / 2);
}

// (2) The library's answer and score for one item equal a recomputation through compact_context
// and generate_from_cache (greedy Sampler), cut at the stop string and scored by counting the
// references in the lower-cased answer.
TEST_F(TaskEval, ScoresEqualAnIndependentRecomputation) {
  const Model& model = stories();
  const TaskItem item = hand_items()[0];
  TaskEvalOptions opt;
  opt.methods = parse_method_list("am,snapkv");
  opt.ratios = {0.5};
  opt.progress = false;
  const TaskEvalResult r = run_task_eval(model, {{"hand.jsonl", {item}}}, opt);
  ASSERT_EQ(r.units.size(), 1u);
  ASSERT_EQ(r.units[0].answers.size(), 3u);
  const Tokenizer& tok = *model.tokenizer;
  const std::vector<int> ids = tok.encode(item.context, true);
  const std::string question = item.prompt.substr(item.context.size());
  for (std::size_t k = 1; k < 3; ++k) {
    CompactionOptions co;
    co.method = opt.methods[k - 1];
    co.ratio = 0.5;
    co.seed = 0;  // options.seed + item index
    const ContextPrefill prefill = prefill_for_compaction(model, ids, co);
    CompactedContext cc = compact_context(model, ids, prefill, co);
    const double kept = static_cast<double>(cc.file.cache.total_entries());  // before the question is fed
    const Transformer tr(model.config, model.weights);
    Sampler greedy(tok.vocab_size(), 0.0f, 1.0f, 0);
    ContinueOptions cont;
    cont.max_new_tokens = item.max_new_tokens;
    const std::size_t prompt_pieces = tok.encode(question, false).size();
    std::size_t pieces = 0;
    std::string generated;
    generate_from_cache(tr, tok, cc.file.cache, cc.file.last_logits, ids.back(), question, greedy, cont,
                        [&](std::string_view piece) {
                          if (pieces++ >= prompt_pieces) generated += piece;
                        });
    const std::string answer = cut_at_stop(generated, item.stop);
    std::string lower = answer;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    int found = 0;
    for (const std::string& ref : item.references) found += lower.find(ref) != std::string::npos;
    const double expected = static_cast<double>(found) / static_cast<double>(item.references.size());
    const TaskEvalAnswer& got = r.units[0].answers[k];
    EXPECT_EQ(got.text, answer) << to_string(co.method);
    EXPECT_DOUBLE_EQ(got.score, expected) << to_string(co.method) << " answer '" << answer << "'";
    EXPECT_DOUBLE_EQ(got.score, string_match_all(answer, item.references));
    EXPECT_EQ(got.entries, kept);
    EXPECT_DOUBLE_EQ(r.rows[k].score, 100.0 * expected);
    EXPECT_EQ(r.rows[k].score_sem, 0.0);  // one item
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Progress lines of evaluated items ("... N context tokens), T s").
int evaluated_lines(const std::string& err) {
  int n = 0;
  for (std::size_t p = err.find(" context tokens), "); p != std::string::npos; p = err.find(" context tokens), ", p + 1))
    ++n;
  return n;
}

// (3) --out: a rerun skips the finished items and writes the same JSON; a deleted unit is
// evaluated again; two shards merge to the same per-item answers.
TEST_F(TaskEval, ResumesFromTheStudyFolder) {
  const std::string tasks = task_file("task_eval_resume.jsonl", hand_items());
  const std::string dir = fresh_dir("task_eval_resume");
  const std::string args =
      "task-eval --model " + kBin + " --tasks " + tasks + " --methods full,recent,snapkv --ratios 0.3 --out " + dir;
  const CliRun first = run_cli(args);
  ASSERT_EQ(first.status, 0) << first.err;
  const std::string json1 = slurp(dir + "/task_eval.json");
  ASSERT_FALSE(json1.empty());
  EXPECT_EQ(evaluated_lines(first.err), 2) << first.err;
  ASSERT_TRUE(std::filesystem::exists(dir + "/units/task_eval_item_1.json"));

  const CliRun again = run_cli(args);
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_EQ(evaluated_lines(again.err), 0) << again.err;  // nothing evaluated
  EXPECT_NE(again.err.find("already done"), std::string::npos) << again.err;
  EXPECT_EQ(slurp(dir + "/task_eval.json"), json1);

  std::filesystem::remove(dir + "/units/task_eval_item_1.json");
  const CliRun third = run_cli(args);
  ASSERT_EQ(third.status, 0) << third.err;
  EXPECT_EQ(evaluated_lines(third.err), 1) << third.err;
  EXPECT_NE(third.err.find("item 2/2 (copy c1"), std::string::npos) << third.err;
  const nlohmann::json a = nlohmann::json::parse(json1), b = read_json(dir + "/task_eval.json");
  EXPECT_EQ(a["per_item"], b["per_item"]);  // timings aside, the same answers and scores

  const std::string sharded = fresh_dir("task_eval_shards");
  const std::string sargs =
      "task-eval --model " + kBin + " --tasks " + tasks + " --methods recent,snapkv --ratios 0.3 --out " + sharded;
  const CliRun s0 = run_cli(sargs + " --shard 0/2");
  ASSERT_EQ(s0.status, 0) << s0.err;
  EXPECT_NE(s0.out.find("1 of 2 items done"), std::string::npos) << s0.out;
  const CliRun status = run_cli("slurm --status " + sharded);
  ASSERT_EQ(status.status, 0) << status.err;
  EXPECT_NE(status.out.find("1/2 items done"), std::string::npos) << status.out;
  EXPECT_EQ(run_cli("merge " + sharded).status, 2);  // item 2 missing
  ASSERT_EQ(run_cli(sargs + " --shard 1/2").status, 0);
  const CliRun merged = run_cli("merge " + sharded);
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_EQ(read_json(sharded + "/task_eval.json")["per_item"], a["per_item"]);
}

// (4) Bad inputs: one line on stderr, exit 1.
TEST_F(TaskEval, BadInputsAreOneLineErrors) {
  std::vector<TaskItem> items = hand_items();
  items[1].context.clear();
  const std::string no_context = task_file("task_eval_no_context.jsonl", items);
  expect_one_line_error(run_cli("task-eval --model " + kBin + " --tasks " + no_context),
                        no_context + ": item c1 has no \"context\"");

  std::string story;
  for (int i = 0; i < 80; ++i) story += "Tom and Lily went to the park to play with a big red ball. ";
  const std::string long_ctx = task_file("task_eval_long.jsonl", {make_item("l1", story, "\nTom", "word", {"x"}, 4)});
  expect_one_line_error(run_cli("task-eval --model " + kBin + " --tasks " + long_ctx), "more than the model's max_seq_len 512");

  const std::string ok = task_file("task_eval_ok.jsonl", hand_items());
  expect_one_line_error(run_cli("task-eval --model " + kBin + " --tasks " + ok + " --ratios 0.1,1.5"),
                        "--ratios: 1.5 is outside [0, 1]");
  expect_one_line_error(run_cli("task-eval --model " + kBin + " --tasks " + ok + " --methods full,nosuchmethod"),
                        "nosuchmethod");
  const std::string empty = write_tmp("task_eval_empty.jsonl", "\n");
  expect_one_line_error(run_cli("task-eval --model " + kBin + " --tasks " + empty), "empty task file");
}

}}  // namespace
}  // namespace kvcompact
