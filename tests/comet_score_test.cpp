// COMET runner (metrics/comet_score.h): a missing comet-score is a clear error; a fake comet-score
// on PATH that prints COMET's output format gives the parsed per-segment scores.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "metrics/comet_score.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

/// Sets PATH for the scope of a test and restores it afterwards.
class PathGuard {
 public:
  explicit PathGuard(const std::string& value) {
    const char* old = std::getenv("PATH");
    had_ = old != nullptr;
    if (had_) old_ = old;
    setenv("PATH", value.c_str(), 1);
  }
  ~PathGuard() {
    if (had_)
      setenv("PATH", old_.c_str(), 1);
    else
      unsetenv("PATH");
  }

 private:
  bool had_ = false;
  std::string old_;
};

std::string make_dir(const std::string& name) {
  const std::string dir = std::string(KVC_TEST_TMP) + "/" + std::to_string(static_cast<long>(getpid())) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void write_script(const std::string& path, const std::string& body) {
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
}

TEST(CometScore, MissingExecutableIsAClearError) {
  PathGuard path(make_dir("comet_empty"));
  try {
    comet_score({"s"}, {"h"}, {"r"});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()),
              "comet-score not found on PATH: install unbabel-comet (pip install unbabel-comet) or use --metric chrf");
  }
}

TEST(CometScore, ParsesScoresOfAFakeCometScore) {
  const std::string dir = make_dir("comet_fake");
  // Checks the arguments it gets, counts the lines of the hypothesis file and prints COMET 2.x's
  // format: "FILE\tSegment I\tscore: X" per segment, then "FILE\tscore: X".
  write_script(dir + "/comet-score",
               "set -e\n"
               "[ \"$1\" = -s ] && [ \"$3\" = -t ] && [ \"$5\" = -r ] && [ \"$7\" = --model ] || exit 3\n"
               "[ \"$8\" = 'my model' ] || exit 4\n"
               "n=$(wc -l < \"$4\")\n"
               "echo 'Lightning noise on stdout'\n"
               "i=0\n"
               "while [ $i -lt $n ]; do printf '%s\\tSegment %d\\tscore: 0.%d500\\n' \"$4\" $i $((i + 1)); i=$((i + 1)); done\n"
               "printf '%s\\tscore: 0.2000\\n' \"$4\"\n");
  PathGuard path(dir + ":/usr/bin:/bin");
  CometOptions opt;
  opt.model = "my model";
  // A line break inside a segment must not add a line to the input files.
  const std::vector<double> s = comet_score({"a", "b", "c"}, {"x\ny", "y", "z"}, {"p", "q", "r"}, opt);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_DOUBLE_EQ(s[0], 0.15);
  EXPECT_DOUBLE_EQ(s[1], 0.25);
  EXPECT_DOUBLE_EQ(s[2], 0.35);
}

TEST(CometScore, FailingCometScoreReportsItsLastStderrLine) {
  const std::string dir = make_dir("comet_fail");
  write_script(dir + "/comet-score", "echo 'Traceback ...' >&2\necho 'OSError: model not found' >&2\nexit 2\n");
  PathGuard path(dir + ":/usr/bin:/bin");
  try {
    comet_score({"s"}, {"h"}, {"r"});
    FAIL() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("exited with status 2: OSError: model not found"), std::string::npos) << msg;
  }
}

TEST(CometScore, ParseCometOutputChecksEverySegment) {
  // COMET 1.x format (no file name).
  EXPECT_EQ(parse_comet_output("Segment 1\tscore: -0.5\nSegment 0\tscore: 0.75\nSystem score: 0.125\n", 2),
            (std::vector<double>{0.75, -0.5}));
  EXPECT_THROW(parse_comet_output("Segment 0\tscore: 0.1\n", 2), Error);                       // one missing
  EXPECT_THROW(parse_comet_output("Segment 0\tscore: 0.1\nSegment 0\tscore: 0.2\n", 1), Error);  // repeated
  EXPECT_THROW(parse_comet_output("Segment 5\tscore: 0.1\n", 1), Error);                       // out of range
  EXPECT_THROW(parse_comet_output("Segment 0\tscore: nope\n", 1), Error);                      // not a number
}

TEST(CometScore, MismatchedListsAreRejected) {
  const std::string dir = make_dir("comet_ok");
  write_script(dir + "/comet-score", "exit 0\n");
  PathGuard path(dir + ":/usr/bin:/bin");
  EXPECT_THROW(comet_score({"s"}, {"h", "i"}, {"r", "q"}), Error);
  EXPECT_THROW(comet_score({}, {}, {}), Error);
}

}}  // namespace
}  // namespace kvcompact
