// `kvcompact budget-eval` (issue #4 leftover): delta NLL vs total ratio for budget schedules on
// stories260K, its JSON points, the figure, and `plot` redrawing it from the JSON.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "cli_runner.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";

using testing::CliRun;
using testing::expect_one_line_error;
using testing::head_of_file;
using testing::run_cli;

TEST(BudgetEvalCli, WritesPointsAndPlotRedrawsThem) {
  const std::string dir = std::string(KVC_TEST_TMP) + "/cli_budget_eval_" + std::to_string(static_cast<long>(getpid()));
  std::filesystem::create_directories(dir);
  CliRun r = run_cli("budget-eval --model " + kBin + " --data " + kData + " --docs 2 --skip 1 --ratios 0.05,0.1 " +
                     "--schedules uniform,pyramid --out-json " + dir + "/f.json --plot " + dir + "/f.svg --json");
  ASSERT_EQ(r.status, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("kind"), "budget-frontier");
  EXPECT_EQ(j.at("documents"), 2);
  const auto& pts = j.at("points");
  ASSERT_EQ(pts.size(), 4u);  // 2 schedules x 2 ratios, schedule-major
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(pts[i].at("series"), "uniform");
    EXPECT_EQ(pts[i + 2].at("series"), "pyramid");
    // per_head_budgets: every schedule keeps the same total number of keys at a ratio.
    EXPECT_EQ(pts[i].at("kept_entries").get<double>(), pts[i + 2].at("kept_entries").get<double>());
    EXPECT_NE(pts[i].at("delta_nll_mean").get<double>(), pts[i + 2].at("delta_nll_mean").get<double>());
  }
  EXPECT_LT(pts[0].at("kept_entries").get<double>(), pts[1].at("kept_entries").get<double>());
  EXPECT_NE(head_of_file(dir + "/f.svg", 1 << 20).find("Budget schedules"), std::string::npos);
  CliRun plot = run_cli("plot " + dir + "/f.json -o " + dir + "/g.svg");
  ASSERT_EQ(plot.status, 0) << plot.err;
  EXPECT_NE(plot.out.find("budget frontier"), std::string::npos);
  EXPECT_NE(head_of_file(dir + "/g.svg", 1 << 20).find("pyramid"), std::string::npos);
  expect_one_line_error(run_cli("budget-eval --model " + kBin + " --data " + kData + " --schedules optimized"), "--budgets");
  expect_one_line_error(run_cli("budget-eval --model " + kBin + " --data " + kData + " --schedules flat"), "flat");
}

}}  // namespace
}  // namespace kvcompact
