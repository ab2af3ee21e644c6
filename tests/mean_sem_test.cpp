// mean_sem (metrics/mean_sem.h), the one mean / std / SEM of every study, against values worked
// out by hand; and the log sink (core/log.h) that library progress lines go to.
#include "metrics/mean_sem.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/log.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

TEST(MeanSem, HandWorked) {
  // {1, 2, 3, 4}: mean 2.5, sum of squares 5, std sqrt(5/3), sem sqrt(5/3)/2.
  const std::vector<double> x{1, 2, 3, 4};
  const MeanSem s = mean_sem(x);
  EXPECT_EQ(s.n, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.std, std::sqrt(5.0 / 3.0));
  EXPECT_DOUBLE_EQ(s.sem, std::sqrt(5.0 / 3.0) / 2.0);
  const std::vector<double> one{7.25};
  EXPECT_EQ(mean_sem(one).mean, 7.25);
  EXPECT_EQ(mean_sem(one).std, 0.0);
  EXPECT_EQ(mean_sem(one).sem, 0.0);
  const MeanSem none = mean_sem(std::vector<double>{});
  EXPECT_EQ(none.n, 0);
  EXPECT_EQ(none.mean, 0.0);
}

TEST(Log, LinesGoToTheSinkUntilItIsReset) {
  std::vector<std::string> got;
  set_log_sink([&](std::string_view line) { got.emplace_back(line); });
  log_line("compact-eval: document 1/2");
  log_line("kvcompact: warning: x");
  set_log_sink({});
  log_line("to stderr, not captured");
  EXPECT_EQ(got, (std::vector<std::string>{"compact-eval: document 1/2", "kvcompact: warning: x"}));
}

}}  // namespace
}  // namespace kvcompact
