// CLI: head-scores, head-means, mask-eval and ppl --mask-heads on stories260K, end to end and
// with bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "heads/head_scores.h"
#include "studies/mask_eval.h"
#include "cli_runner.h"
#include "io/json_file.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::expect_one_line_error;
using testing::run_cli;
using testing::write_tmp;

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";

std::string task_file() { return testing::hand_made_task_file("heads_tasks.jsonl"); }

TEST(HeadsCli, ScoresThenMaskEvalEndToEnd) {
  const std::string tasks = task_file();
  const std::string scores = write_tmp("heads_scores.json", "");
  auto r = run_cli("head-scores --model " + kBin + " --method retrieval --tasks " + tasks + " -o " + scores);
  ASSERT_EQ(r.status, 0) << r.err;
  const HeadScores s = read_head_scores(scores);
  EXPECT_EQ(s.method, "retrieval");
  EXPECT_EQ(s.items, 2);  // the knowledge item's answer is not in its prompt
  EXPECT_EQ(s.ranked.size(), 40u);

  const std::string out = write_tmp("heads_mask", "");
  std::filesystem::remove(out);
  r = run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
              " --k 1,40 --random-seeds 2 --metric chrf,nll --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  const MaskEvalResult m = mask_eval_from_json(read_json_file(out + "/mask_eval.json"), "mask_eval.json");
  EXPECT_EQ(m.families, (std::vector<std::string>{"copy", "knowledge"}));
  EXPECT_EQ(m.metrics, (std::vector<std::string>{"accuracy", "chrf", "nll"}));
  // per family and metric: none + (topk + randomk) x 2 K values
  EXPECT_EQ(m.rows.size(), 2u * 3u * 5u);
  double nll_none = 0, nll_all = 0;
  for (const MaskEvalRow& row : m.rows)
    if (row.family == "copy" && row.metric == "nll") {
      if (row.condition == "none") nll_none = row.mean;
      if (row.condition == "topk" && row.k == 40) nll_all = row.mean;
    }
  EXPECT_GT(nll_none, 0.0);
  EXPECT_GT(nll_all, nll_none + 0.5);  // with no attention at all the answer gets much less likely
  for (const MaskEvalRow& row : m.rows) {
    if (row.k == 40 && row.condition == "randomk") {
      // masking every head: every random draw is the same set, so the SEM is 0 and TopK == RandomK
      EXPECT_EQ(row.sem, 0.0);
      for (const MaskEvalRow& t : m.rows) {
        if (t.k == 40 && t.condition == "topk" && t.family == row.family && t.metric == row.metric) {
          EXPECT_EQ(t.mean, row.mean);
        }
      }
    }
    EXPECT_GE(row.mean, 0.0);
  }
  EXPECT_TRUE(std::filesystem::exists(out + "/mask_eval.svg"));
  EXPECT_TRUE(std::filesystem::exists(out + "/units/mask_eval_topk_k40.json"));
  // a rerun reuses the saved answers (no "items in" progress lines) and gives the same file
  const std::string first = read_json_file(out + "/mask_eval.json").dump();
  r = run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
              " --k 1,40 --random-seeds 2 --metric chrf,nll --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err.find("items in"), std::string::npos) << r.err;
  EXPECT_EQ(read_json_file(out + "/mask_eval.json").dump(), first);

  // bad input
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 41 --out " + out + "_x"),
                        "K = 41");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 0 --out " + out + "_x"),
                        "K = 0");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --metric comet --out " + out + "_x"),
                        "comet-score not found");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --ablation mean --out " + out + "_x"),
                        "--head-means");
  const std::string bad_tasks = write_tmp("heads_bad.jsonl", "{\"id\":\"a\"}\n");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + bad_tasks + " --scores " + scores +
                                " --k 2 --out " + out + "_x"),
                        ":1:");
  nlohmann::json j = read_json_file(scores);
  j["heads"][0]["layer"] = 9;
  j["heads"][0]["name"] = "L9Q" + std::to_string(j["heads"][0]["head"].get<int>());
  const std::string bad_scores = write_tmp("heads_bad_scores.json", j.dump());
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + bad_scores +
                                " --k 2 --out " + out + "_x"),
                        "L9Q");
  expect_one_line_error(run_cli("head-scores --model " + kBin + " --method nope -o " + scores), "nope");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " " + tasks + " --scores " + scores +
                                " --k 2 --out " + out + "_x"),
                        "also in");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --random-seeds 1000000 --out " + out + "_x"),
                        "--random-seeds");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --plot " + out + "_x/fig.pdf --out " + out + "_x"),
                        "fig.pdf");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --metric chrf,,nll --out " + out + "_x"),
                        "empty item");
  // a scores file keeps its ranking through the "rank" fields even when the array is reordered
  nlohmann::json rev = read_json_file(scores);
  std::reverse(rev["heads"].begin(), rev["heads"].end());
  const std::string reversed = write_tmp("heads_reversed.json", rev.dump());
  const HeadScores back = read_head_scores(reversed);
  for (std::size_t i = 0; i < s.ranked.size(); ++i) EXPECT_EQ(back.ranked[i].head, s.ranked[i].head);
  rev["heads"][0]["rank"] = 1;  // now two entries claim rank 1
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " +
                                write_tmp("heads_badrank.json", rev.dump()) + " --k 2 --out " + out + "_x"),
                        "rank");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 1,,2 --out " + out + "_x"),
                        "empty item");
  // `plot` redraws the figure from the JSON
  r = run_cli("plot " + out + "/mask_eval.json -o " + out + "/again.svg");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(out + "/again.svg"));
}

TEST(HeadsCli, PplWithMaskedHeads) {
  auto plain = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 200 --json");
  ASSERT_EQ(plain.status, 0) << plain.err;
  auto none = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 200 --json --mask-heads none");
  EXPECT_EQ(nlohmann::json::parse(none.out)["nll"], nlohmann::json::parse(plain.out)["nll"]);
  auto layer = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 200 --json --mask-heads L4");
  ASSERT_EQ(layer.status, 0) << layer.err;
  EXPECT_EQ(nlohmann::json::parse(layer.out)["masked_heads"], 8);
  EXPECT_GT(nlohmann::json::parse(layer.out)["nll"].get<double>(), nlohmann::json::parse(plain.out)["nll"].get<double>());
  const std::string means = write_tmp("heads_means.json", "");
  auto hm = run_cli("head-means --model " + kBin + " --data " + kData + " --docs 3 -o " + means);
  ASSERT_EQ(hm.status, 0) << hm.err;
  auto mean = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 200 --json --mask-heads L0H1 "
                      "--ablation mean --head-means " + means);
  ASSERT_EQ(mean.status, 0) << mean.err;
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L5Q0"), "L5Q0");
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L0H4"), "L0H4");
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L0 --ablation ones"), "ones");
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L0 --head-means " + means),
                        "--ablation mean");
  // means of another model (same shape) are refused by fingerprint
  nlohmann::json other = read_json_file(means);
  other["model_fingerprint"] = "0x0000000000000000";
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L0 --ablation mean "
                                "--head-means " + write_tmp("heads_other_means.json", other.dump())),
                        "not this model");
}

// Cognitive Mirrors' options: patching scores, scale ablation at the last positions, RandomK from
// the rest; scale 1 is the unmasked model; bad values and a resumed study with another choice are
// one-line errors.
TEST(HeadsCli, CognitiveMirrorsOptions) {
  const std::string tasks = task_file();
  const std::string scores = write_tmp("heads_cm_scores.json", "");
  auto r = run_cli("head-scores --model " + kBin + " --method patching --tasks " + tasks + " -o " + scores);
  ASSERT_EQ(r.status, 0) << r.err;
  const HeadScores s = read_head_scores(scores);
  EXPECT_EQ(s.method, "patching");
  EXPECT_EQ(s.items, 3);
  EXPECT_EQ(s.ranked.size(), 40u);
  EXPECT_GT(s.ranked[0].score, s.ranked[39].score);
  expect_one_line_error(run_cli("head-scores --model " + kBin + " --method patching --tasks " + tasks +
                                " --ablation scale:3 -o " + scores + "_x"),
                        "outside (0, 1]");
  expect_one_line_error(run_cli("head-scores --model " + kBin + " --method patching --tasks " + tasks +
                                " --ablation mean -o " + scores + "_x"),
                        "mean");

  // scale 1 at every position: TopK of all 40 heads answers as the unmasked model
  const std::string one = write_tmp("heads_cm_one", "");
  std::filesystem::remove_all(one);
  r = run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
              " --k 40 --random-seeds 1 --ablation scale:1 --mask-positions all --metric chrf,nll --out " + one);
  ASSERT_EQ(r.status, 0) << r.err;
  const MaskEvalResult m1 = mask_eval_from_json(read_json_file(one + "/mask_eval.json"), one);
  EXPECT_EQ(m1.ablation, "scale:1");
  EXPECT_EQ(m1.mask_positions, "all");
  for (const MaskEvalRow& row : m1.rows) {
    if (row.condition != "topk") continue;
    for (const MaskEvalRow& none : m1.rows) {
      if (none.condition == "none" && none.family == row.family && none.metric == row.metric) {
        EXPECT_EQ(row.mean, none.mean) << row.family << " " << row.metric;
      }
    }
  }

  // scale 1e-4 (default) at the last positions, RandomK outside the top K
  const std::string out = write_tmp("heads_cm_study", "");
  std::filesystem::remove_all(out);
  r = run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
              " --k 20 --random-seeds 2 --ablation scale --random-from rest --out " + out);
  ASSERT_EQ(r.status, 0) << r.err;
  const MaskEvalResult m = mask_eval_from_json(read_json_file(out + "/mask_eval.json"), out);
  EXPECT_EQ(m.ablation, "scale:0.0001");
  EXPECT_EQ(m.mask_positions, "last");
  EXPECT_EQ(m.random_from, "rest");
  std::vector<std::string> top20;
  for (int i = 0; i < 20; ++i) top20.push_back(query_head_name(s.ranked[i].head));
  for (int d = 0; d < 2; ++d) {  // K = 20 of 40: rest is exactly the other 20 heads
    const nlohmann::json u = read_json_file(out + "/units/mask_eval_randomk_k20_d" + std::to_string(d) + ".json");
    const nlohmann::json& res = u.contains("result") ? u["result"] : u;
    for (const auto& h : res["heads"]) EXPECT_EQ(std::count(top20.begin(), top20.end(), h.get<std::string>()), 0);
    EXPECT_EQ(res["heads"].size(), 20u);
  }
  // plot --metrics draws only the metrics named, in that order; an absent one is a one-line error
  r = run_cli("plot " + out + "/mask_eval.json --metrics chrf -o " + out + "/chrf_only.svg");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string svg = testing::head_of_file(out + "/chrf_only.svg", 1 << 20);
  EXPECT_NE(svg.find(">chrF / 100</text>"), std::string::npos);
  EXPECT_EQ(svg.find("accuracy (exact match)"), std::string::npos);
  expect_one_line_error(run_cli("plot " + out + "/mask_eval.json --metrics chrf,bleu -o " + out + "/x.svg"),
                        "has no metric \"bleu\"");

  // the same study with every prompt prefilled per condition (no prefix reuse): the same answers
  const std::string no_reuse = write_tmp("heads_cm_study_plain", "");
  std::filesystem::remove_all(no_reuse);
  r = run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
              " --k 20 --random-seeds 2 --ablation scale --random-from rest --prefix-cache-gb 0 --out " + no_reuse);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string unit : {"none", "topk_k20", "randomk_k20_d0", "randomk_k20_d1"}) {
    const nlohmann::json a = read_json_file(out + "/units/mask_eval_" + unit + ".json");
    const nlohmann::json b = read_json_file(no_reuse + "/units/mask_eval_" + unit + ".json");
    const nlohmann::json& ra = a.contains("result") ? a["result"] : a;
    const nlohmann::json& rb = b.contains("result") ? b["result"] : b;
    EXPECT_EQ(ra["answers"], rb["answers"]) << unit;
    EXPECT_EQ(ra["answers"].size(), 3u) << unit;
  }
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 20 --random-seeds 2 --ablation scale --random-from all --out " + out),
                        "random_from");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 21 --random-from rest --out " + out + "_x"),
                        "K = 21 leaves 19 heads");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --random-from some --out " + out + "_x"),
                        "\"some\"");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --ablation scale:0 --out " + out + "_x"),
                        "the scale factor 0 is outside (0, 1]");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --mask-positions first --out " + out + "_x"),
                        "\"first\"");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --metric meteor --out " + out + "_x"),
                        "\"meteor\"");
  expect_one_line_error(run_cli("mask-eval --model " + kBin + " --tasks " + tasks + " --scores " + scores +
                                " --k 2 --metric cm_accuracy --scorer-python /nonexistent/python --out " + out + "_x"),
                        "Python /nonexistent/python not found");
  // ppl: scale 1 is the plain NLL
  auto plain = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 100 --json");
  auto scaled = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 100 --json --mask-heads L2 --ablation scale:1");
  ASSERT_EQ(scaled.status, 0) << scaled.err;
  EXPECT_EQ(nlohmann::json::parse(scaled.out)["nll"], nlohmann::json::parse(plain.out)["nll"]);
  EXPECT_EQ(nlohmann::json::parse(scaled.out)["ablation"], "scale:1");
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + kData + " --mask-heads L0 --ablation scale:1.5"),
                        "1.5 is outside (0, 1]");
}

}}  // namespace
}  // namespace kvcompact
