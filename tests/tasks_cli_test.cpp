// `kvcompact tasks`: writes a task file that read_task_suite reads back; bad input -> exit 1 with
// one line naming the option or the file and line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tasks/task_suite.h"
#include "cli_runner.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kTok = kShared + "/models/stories260K/tok512.bin";
const std::string kData = kShared + "/data";

std::string tmp(const std::string& name) {
  std::filesystem::create_directories(KVC_TEST_TMP);
  return std::string(KVC_TEST_TMP) + "/tasks_cli_" + std::to_string(static_cast<long>(getpid())) + "_" + name;
}

using testing::CliRun;
using testing::expect_one_line_error;
using testing::run_cli;

class TasksCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(kBin) || !std::filesystem::is_directory(kData)) GTEST_SKIP() << "shared data missing";
  }
};

TEST_F(TasksCli, WritesAFileThatReadsBack) {
  const std::string path = tmp("knowledge.jsonl");
  std::filesystem::remove(path);
  const CliRun r = run_cli("tasks --family knowledge --tokenizer " + kTok + " --n 7 --shots 2 --seed 4 --data-dir " +
                           kData + " -o " + path);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("7 knowledge items (seed 4)"), std::string::npos) << r.out;
  const std::vector<TaskItem> items = read_task_suite(path);
  ASSERT_EQ(items.size(), 7u);
  for (const TaskItem& item : items) {
    EXPECT_EQ(item.family, "knowledge");
    EXPECT_EQ(std::count(item.prompt.begin(), item.prompt.end(), '\n'), 2);  // 2 shots
  }
}

TEST_F(TasksCli, ModelLimitsPromptsToItsContextAndJsonSummary) {
  const std::string path = tmp("retrieval.jsonl");
  const CliRun r = run_cli("tasks --family retrieval --model " + kBin + " --n 3 --context-tokens 300 --depth 0.5 --data-dir " +
                           kData + " -o " + path + " --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"items\": 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"max_prompt_tokens\": 512"), std::string::npos) << r.out;  // stories260K max_seq_len
  const std::vector<TaskItem> items = read_task_suite(path);
  ASSERT_EQ(items.size(), 3u);
  EXPECT_DOUBLE_EQ(items[0].depth, 0.5);
  // 600 context tokens cannot fit the model's 512 positions.
  expect_one_line_error(run_cli("tasks --family retrieval --model " + kBin + " --context-tokens 600 --data-dir " + kData +
                                " -o " + tmp("x.jsonl")),
                        "exceeds the prompt limit of 512 tokens");
}

TEST_F(TasksCli, BadOptionsAreOneLineErrors) {
  const std::string out = " -o " + tmp("bad.jsonl") + " --data-dir " + kData;
  expect_one_line_error(run_cli("tasks --family poetry --tokenizer " + kTok + out), "unknown task family");
  expect_one_line_error(run_cli("tasks --family math --tokenizer " + kTok + " --n 0" + out), "--n 0");
  expect_one_line_error(run_cli("tasks --family math" + out), "--model or --tokenizer");
  expect_one_line_error(run_cli("tasks --family math --tokenizer /nonexistent/tok.bin" + out), "/nonexistent/tok.bin");
  expect_one_line_error(run_cli("tasks --family math --tokenizer " + kTok + " -o " + tmp("bad.jsonl") +
                                " --data-dir /nonexistent/data"),
                        "/nonexistent/data");
}

TEST_F(TasksCli, CheckNamesTheMalformedLine) {
  const std::string path = tmp("malformed.jsonl");
  std::ofstream(path) << R"({"id":"a","family":"math","prompt":"1 + 1 =","reference":"2","answer_type":"number"})"
                      << "\n\n"
                      << R"({"id":"b","family":"math","reference":"3","answer_type":"number"})" << "\n";
  expect_one_line_error(run_cli("tasks --check " + path), path + ":3: missing field \"prompt\"");
  std::ofstream(path) << R"({"id":"a","family":"math","prompt":"1 + 1 =","reference":"2","answer_type":"number"})"
                      << "\n"
                      << R"({"id":"b","family":"copy","prompt":"x y","reference":"z","answer_type":"text"})" << "\n";
  const CliRun ok = run_cli("tasks --check " + path);
  ASSERT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE(ok.out.find("2 items (copy 1, math 1)"), std::string::npos) << ok.out;
}

}}  // namespace
}  // namespace kvcompact
