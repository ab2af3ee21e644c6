// `kvcompact qa-eval --tokens-json` (the ids a peer needs to score the same questions,
// bench/peers/compare_kvpress_qa.py) through the CLI on stories260K: its per-question scores must
// aggregate to the table qa-eval prints (mean answer NLL, MC accuracy per row), its ids must be
// what was fed (BOS-led contexts of the reported mean length, one id list per option, non-empty
// reference answers), and misuse is a one-line error.
#include <gtest/gtest.h>

#include <cmath>
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
using testing::read_json;
using testing::run_cli;

TEST(QaTokensJson, ScoresAggregateToTheTableAndIdsAreTheFedOnes) {
  const std::string dir = testing::fresh_dir("qa_tokens");
  const std::string data = dir + "/cloze.jsonl", tokens = dir + "/tokens.json";
  ASSERT_EQ(run_cli("make-cloze --data " + kStories + " --articles 3 --questions 2 --seed 5 -o " + data).status, 0);
  const std::string eval = "qa-eval --model " + kBin + " --data " + data + " --ratios 0.3,0.6 --methods recent,knorm";
  const CliRun r = run_cli(eval + " --json --tokens-json " + tokens);
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json table = nlohmann::json::parse(r.out);
  const nlohmann::json t = read_json(tokens);
  ASSERT_EQ(t["rows"].size(), 5u);  // full + 2 methods x 2 ratios
  ASSERT_EQ(table["rows"].size(), t["rows"].size());
  EXPECT_EQ(t["rows"][0]["method"], "full");
  ASSERT_EQ(t["articles"].size(), 3u);

  double context_sum = 0;
  int questions = 0;
  for (const auto& art : t["articles"]) {
    const auto& ctx = art["context_ids"];
    ASSERT_GE(ctx.size(), 2u);
    EXPECT_EQ(ctx[0].get<int>(), 1) << "llama2.c BOS first";
    context_sum += static_cast<double>(ctx.size());
    for (const auto& q : art["questions"]) {
      ++questions;
      EXPECT_FALSE(q["prompt_ids"].empty());
      EXPECT_FALSE(q["answer_ids"].empty());
      ASSERT_GE(q["option_ids"].size(), 2u);
      const int gold = q["gold_label"].get<int>();
      EXPECT_TRUE(gold >= 1 && gold <= static_cast<int>(q["option_ids"].size()));
      ASSERT_EQ(q["scores"].size(), t["rows"].size());
    }
  }
  EXPECT_EQ(questions, table["questions"].get<int>());
  EXPECT_NEAR(context_sum / 3.0, table["mean_context_tokens"].get<double>(), 1e-9);

  for (std::size_t i = 0; i < t["rows"].size(); ++i) {
    const auto& row = table["rows"][i];
    EXPECT_EQ(t["rows"][i]["method"], row["method"]) << i;
    EXPECT_NEAR(t["rows"][i]["ratio"].get<double>(), row["ratio"].get<double>(), 1e-12) << i;
    double nll = 0, delta = 0;
    int correct = 0;
    for (const auto& art : t["articles"])
      for (const auto& q : art["questions"]) {
        nll += q["scores"][i]["answer_nll"].get<double>();
        delta += q["scores"][i]["answer_nll"].get<double>() - q["scores"][0]["answer_nll"].get<double>();
        correct += q["scores"][i]["mc_choice"].get<int>() == q["gold_label"].get<int>();
      }
    EXPECT_NEAR(nll / questions, row["answer_nll_mean"].get<double>(), 1e-4) << i;
    EXPECT_NEAR(delta / questions, row["delta_answer_nll_mean"].get<double>(), 1e-4) << i;
    EXPECT_NEAR(static_cast<double>(correct) / questions, row["mc_accuracy"].get<double>(), 1e-9) << i;
  }
  // Compaction changes some answer NLL (the scores are per row, not copies of the full one).
  bool differs = false;
  for (const auto& art : t["articles"])
    for (const auto& q : art["questions"])
      differs |= std::abs(q["scores"][1]["answer_nll"].get<double>() - q["scores"][0]["answer_nll"].get<double>()) > 1e-6;
  EXPECT_TRUE(differs);

  expect_one_line_error(run_cli(eval + " --tokens-json " + tokens + " --out " + dir + "/study"),
                        "--tokens-json: not with --out");
}

}}  // namespace
}  // namespace kvcompact
