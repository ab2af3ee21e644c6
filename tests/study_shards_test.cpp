// Sharded qa-eval and mask-eval (issue #18) through the CLI on stories260K: the study run as 3
// shards one after another (one twice: the rerun skips its finished units), then `merge DIR`, must
// give the numbers of a one-process run exactly (the reference: the unsharded qa-eval, which never
// writes or reads unit files, and a mask-eval in its own folder); a partial study merges with
// exit 2 naming what is missing; mixed studies and bad shard options are one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kStories = kShared + "/data/tinystories/tinystories_val_head.txt";

using testing::CliRun;
using testing::expect_one_line_error;
using testing::run_cli;
using testing::write_tmp;

std::string tmp_dir(const std::string& name) { return testing::fresh_dir("study_shards_" + name); }
using testing::read_json;

TEST(QaEvalShards, MergedShardsEqualOneProcess) {
  const std::string dir = tmp_dir("qa");
  const std::string data = dir + "/cloze.jsonl";
  ASSERT_EQ(run_cli("make-cloze --data " + kStories + " --articles 5 --questions 2 --seed 3 -o " + data).status, 0);
  const std::string eval = "qa-eval --model " + kBin + " --data " + data + " --ratios 0.2,0.5 --methods am,random";
  const CliRun one = run_cli(eval + " --json");
  ASSERT_EQ(one.status, 0) << one.err;
  const nlohmann::json a = nlohmann::json::parse(one.out);
  const std::string study = dir + "/study";
  for (const char* s : {"2/3", "0/3"}) {
    const CliRun r = run_cli(eval + " --out " + study + " --shard " + s);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("articles done"), std::string::npos) << r.out;  // incomplete: no table yet
  }
  const CliRun partial = run_cli("merge " + study);
  EXPECT_EQ(partial.status, 2) << partial.err;
  EXPECT_NE(partial.err.find("2 of 5 articles missing"), std::string::npos) << partial.err;
  EXPECT_FALSE(std::filesystem::exists(study + "/qa_eval.json"));
  const CliRun status = run_cli("slurm --status " + study);
  ASSERT_EQ(status.status, 0) << status.err;
  EXPECT_NE(status.out.find("3/5 articles done; missing articles: 2 (article_1) 3 (article_2)"), std::string::npos)
      << status.out;
  const CliRun again = run_cli(eval + " --out " + study + " --shard 0/3");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 evaluated, 1 already done"), std::string::npos) << again.out;
  const CliRun last = run_cli(eval + " --out " + study + " --shard 1/3");  // completes the study
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_NE(last.out.find("delta_answer_nll_mean"), std::string::npos) << last.out;
  ASSERT_TRUE(std::filesystem::exists(study + "/qa_eval.json"));
  const CliRun merged = run_cli("merge " + study);
  ASSERT_EQ(merged.status, 0) << merged.err;
  const nlohmann::json b = read_json(study + "/qa_eval.json");
  ASSERT_EQ(a["rows"].size(), 5u);  // full + 2 methods x 2 ratios
  EXPECT_EQ(b["rows"], a["rows"]);
  for (const char* k : {"articles", "questions", "mean_context_tokens", "answers_generated", "notes"})
    EXPECT_EQ(b[k], a[k]) << k;
  EXPECT_TRUE(std::filesystem::exists(study + "/qa_eval.csv"));

  // Bad input.
  expect_one_line_error(run_cli(eval + " --shard 1/3"), "--shard: needs --out DIR");
  expect_one_line_error(run_cli(eval + " --out " + study + " --shard 3/3"), "--shard '3/3'");
  expect_one_line_error(run_cli(eval + " --out " + dir + "/other --answers-cache " + dir + "/answers"),
                        "leave out --answers-cache");
  expect_one_line_error(run_cli(eval + " --seed 4 --out " + study + " --shard 0/3"), "settings that differ: seed");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kStories + " --docs 2 --out " + study),
                        "holds a qa-eval study; use another --out folder for the compact-eval study");
  std::ofstream(study + "/units/qa_eval_article_4.json") << "{\"version\": 1";
  expect_one_line_error(run_cli("merge " + study), "delete it to have article 5 (article_4) evaluated again");
}

std::string task_file() { return testing::hand_made_task_file("shard_tasks.jsonl"); }

TEST(MaskEvalShards, MergedShardsEqualOneProcess) {
  const std::string dir = tmp_dir("mask");
  const std::string tasks = task_file(), scores = dir + "/scores.json";
  ASSERT_EQ(run_cli("head-scores --model " + kBin + " --method retrieval --tasks " + tasks + " -o " + scores).status, 0);
  const std::string base = "mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                           " --k 1,4 --random-seeds 2";
  const std::string eval = base + " --metric chrf,nll";
  const CliRun one = run_cli(eval + " --out " + dir + "/one");
  ASSERT_EQ(one.status, 0) << one.err;
  const nlohmann::json a = read_json(dir + "/one/mask_eval.json");
  // 7 conditions: none, then per K: topk and 2 random draws; shards of 2, 2 and 3 conditions.
  const std::string study = dir + "/study";
  for (const char* s : {"2/3", "0/3"}) {
    const CliRun r = run_cli(eval + " --out " + study + " --shard " + s);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("conditions done"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(study + "/mask_eval.json"));
  const CliRun partial = run_cli("merge " + study);
  EXPECT_EQ(partial.status, 2) << partial.err;
  EXPECT_NE(partial.err.find("2 of 7 conditions missing: randomk_k1_d0 randomk_k1_d1"), std::string::npos) << partial.err;
  const CliRun again = run_cli(eval + " --out " + study + " --shard 2/3");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 run, 3 already done"), std::string::npos) << again.out;
  EXPECT_EQ(again.err.find("items in"), std::string::npos) << again.err;  // no condition ran again
  const CliRun last = run_cli(eval + " --out " + study + " --shard 1/3");
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_NE(last.out.find("RandomK"), std::string::npos) << last.out;
  const nlohmann::json b = read_json(study + "/mask_eval.json");
  EXPECT_EQ(b["rows"], a["rows"]);
  EXPECT_EQ(b["topk_heads"], a["topk_heads"]);
  EXPECT_EQ(b["families"], a["families"]);
  std::filesystem::remove(study + "/mask_eval.json");
  const CliRun merged = run_cli("merge " + study);
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_EQ(read_json(study + "/mask_eval.json"), b);  // merge writes what the completing shard wrote
  EXPECT_TRUE(std::filesystem::exists(study + "/mask_eval.svg"));

  // Bad input: another study into the folder, a unit of another ranking, bad shards.
  expect_one_line_error(run_cli(base + " --metric chrf --out " + study + " --shard 0/3"),
                        "settings that differ: metrics");
  expect_one_line_error(run_cli(eval + " --out " + study + " --shard 1/0"), "--shard '1/0'");
  const std::string unit = study + "/units/mask_eval_topk_k4.json";
  nlohmann::json u = read_json(unit);
  u["result"]["heads"][0] = "L0Q0";
  u["result"]["heads"][1] = "L0Q0";
  std::ofstream(unit) << u.dump();
  expect_one_line_error(run_cli(eval + " --out " + study + " --shard 2/3"), "mask_eval_topk_k4.json: masks heads");
  expect_one_line_error(run_cli("merge " + study), "mask_eval_topk_k4.json: its heads are not the ones this study masks");
}

TEST(BudgetEvalShards, MergedShardsEqualOneProcess) {
  const std::string dir = tmp_dir("budget");
  const std::string eval = "budget-eval --model " + kBin + " --data " + kStories +
                           " --docs 5 --skip 1 --ratios 0.1,0.5 --schedules uniform,pyramid";
  const CliRun one = run_cli(eval + " --out-json " + dir + "/one.json");
  ASSERT_EQ(one.status, 0) << one.err;
  const nlohmann::json a = read_json(dir + "/one.json");
  const std::string study = dir + "/study";
  const CliRun first = run_cli(eval + " --out " + study + " --shard 1/2");
  ASSERT_EQ(first.status, 0) << first.err;
  EXPECT_NE(first.out.find("2 of 2 series incomplete"), std::string::npos) << first.out;
  const CliRun partial = run_cli("merge " + study);
  EXPECT_EQ(partial.status, 2) << partial.err;
  EXPECT_NE(partial.err.find("missing series_0 (uniform): documents 1 2"), std::string::npos) << partial.err;
  const CliRun last = run_cli(eval + " --out " + study + " --shard 0/2");
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_NE(last.out.find("delta_nll_mean"), std::string::npos) << last.out;
  const nlohmann::json b = read_json(study + "/budget_eval.json");
  ASSERT_EQ(a["points"].size(), 4u);
  EXPECT_EQ(b["points"], a["points"]);
  EXPECT_EQ(b["full_nll_mean"], a["full_nll_mean"]);
  std::filesystem::remove(study + "/budget_eval.json");
  ASSERT_EQ(run_cli("merge " + study).status, 0);
  EXPECT_EQ(read_json(study + "/budget_eval.json")["points"], a["points"]);
  EXPECT_TRUE(std::filesystem::exists(study + "/budget_eval.svg"));
  // Swapped series folders (or one from another study) are refused, never merged.
  std::filesystem::rename(study + "/series_0", study + "/swap");
  std::filesystem::rename(study + "/series_1", study + "/series_0");
  std::filesystem::rename(study + "/swap", study + "/series_1");
  expect_one_line_error(run_cli("merge " + study), "series 0 (uniform) of this budget-eval is study");
  std::filesystem::rename(study + "/series_0", study + "/swap");
  std::filesystem::rename(study + "/series_1", study + "/series_0");
  std::filesystem::rename(study + "/swap", study + "/series_1");
  ASSERT_EQ(run_cli("merge " + study).status, 0);
  // Other series into the same folder, and another kind of study, are refused.
  expect_one_line_error(run_cli("budget-eval --model " + kBin + " --data " + kStories +
                                " --docs 5 --skip 1 --ratios 0.1,0.5 --schedules uniform --out " + study),
                        "holds a budget-eval of other series");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kStories + " --docs 2 --out " + study),
                        "holds a budget-eval study");
  expect_one_line_error(run_cli(eval + " --shard 0/2"), "--shard: needs --out DIR");
}

}}  // namespace
}  // namespace kvcompact
