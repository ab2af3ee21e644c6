// Test helper: run the kvcompact binary of this build and check its one-line error contract.
// Header-only so any CLI test file can include it ("cli_runner.h").
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

namespace kvcompact::testing {

/// Exit status and captured output of one CLI run.
struct CliRun {
  int status = -1;
  std::string out, err;
};

/// Runs `kvcompact ARGS --threads 1` (ARGS is passed through the shell) and captures stdout and
/// stderr in per-process files under KVC_TEST_TMP (ctest runs tests in parallel processes).
inline CliRun run_cli(const std::string& args) {
  const std::string dir = KVC_TEST_TMP;
  std::filesystem::create_directories(dir);
  const std::string tag = std::to_string(static_cast<long>(getpid()));
  const std::string out = dir + "/cli_out_" + tag + ".txt", err = dir + "/cli_err_" + tag + ".txt";
  const std::string cmd = std::string(KVC_CLI_PATH) + " " + args + " --threads 1 >" + out + " 2>" + err;
  CliRun r;
  const int raw = std::system(cmd.c_str());
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  auto slurp = [](const std::string& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  };
  r.out = slurp(out);
  r.err = slurp(err);
  return r;
}

/// Writes `bytes` to a per-process file KVC_TEST_TMP/<pid>_<name> and returns its path.
inline std::string write_tmp(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(KVC_TEST_TMP) + "/" + std::to_string(static_cast<long>(getpid())) + "_" + name;
  std::filesystem::create_directories(KVC_TEST_TMP);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

/// An empty per-process folder KVC_TEST_TMP/<prefix>_<pid> (removed first when it exists).
inline std::string fresh_dir(const std::string& prefix) {
  const std::string d = std::string(KVC_TEST_TMP) + "/" + prefix + "_" + std::to_string(static_cast<long>(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

/// A file's JSON (the test fails with an exception when it is not JSON).
inline nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

/// Three hand-written task items for mask-eval on stories260K: two copy items (the answer occurs
/// in the prompt) and one knowledge item; written to KVC_TEST_TMP/<pid>_<name>.
inline std::string hand_made_task_file(const std::string& name) {
  const std::string a =
      R"({"id":"c1","family":"copy","prompt":"Tom had a red ball and a blue hat. Lily saw a big dog.\nTom had a red","reference":"ball and a blue hat.","answer_type":"text","max_new_tokens":8})";
  const std::string b =
      R"({"id":"c2","family":"copy","prompt":"Once upon a time there was a little cat named Kitty. The sun was hot.\nOnce upon a time there was","reference":"a little cat named Kitty.","answer_type":"text","max_new_tokens":8})";
  const std::string c =
      R"({"id":"k1","family":"knowledge","prompt":"The capital of France is Paris.\nThe capital of Italy is","reference":"Rome","answer_type":"word","max_new_tokens":4})";
  return write_tmp(name, a + "\n" + b + "\n" + c + "\n");
}

/// The first n bytes of a file (fewer when it is shorter).
inline std::string head_of_file(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

/// Exit status 1 and exactly one line on stderr, "kvcompact: error: ..." containing `needle`.
inline void expect_one_line_error(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("kvcompact: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace kvcompact::testing
