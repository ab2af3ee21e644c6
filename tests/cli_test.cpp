// The kvcompact CLI on bad input: one-line error naming the file or option, non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";

struct CliRun {
  int status = -1;
  std::string out, err;
};

CliRun run_cli(const std::string& args) {
  const std::string dir = KVC_TEST_TMP;
  std::filesystem::create_directories(dir);
  // Per-process file names: ctest runs the tests of this file in parallel processes.
  const std::string tag = std::to_string(static_cast<long>(getpid()));
  const std::string out = dir + "/cli_out_" + tag + ".txt", err = dir + "/cli_err_" + tag + ".txt";
  const std::string cmd = std::string(KVC_CLI_PATH) + " " + args + " --threads 1 >" + out + " 2>" + err;
  CliRun r;
  int raw = std::system(cmd.c_str());
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

std::string write_tmp(const std::string& name, const std::string& bytes) {
  const std::string path = std::string(KVC_TEST_TMP) + "/" + std::to_string(static_cast<long>(getpid())) + "_" + name;
  std::filesystem::create_directories(KVC_TEST_TMP);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

std::string head_of_file(const std::string& path, std::size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s(n, '\0');
  in.read(s.data(), static_cast<std::streamsize>(n));
  s.resize(static_cast<std::size_t>(in.gcount()));
  return s;
}

// Exit status 1 and exactly one line on stderr that contains `needle`.
void expect_one_line_error(const CliRun& r, const std::string& needle) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_NE(r.err.find("kvcompact: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(Cli, GreedyGenerateJson) {
  CliRun r = run_cli("generate --model " + kBin + " --temperature 0 --steps 20 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"text\": \"Once upon a time, there was a little girl named Lily."), std::string::npos) << r.out;
}

TEST(Cli, PplJsonKeys) {
  CliRun r = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 511 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"tokens\": 511"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"nll\": 1.31"), std::string::npos) << r.out;
}

TEST(Cli, MissingModelFile) {
  expect_one_line_error(run_cli("info --model /nonexistent/model.bin"), "/nonexistent/model.bin");
}

TEST(Cli, TruncatedModelFile) {
  const std::string p = write_tmp("truncated_model.bin", head_of_file(kBin, 5000));
  expect_one_line_error(run_cli("info --model " + p + " --tokenizer " + kShared + "/models/stories260K/tok512.bin"),
                        "truncated_model.bin");
}

TEST(Cli, TruncatedGguf) {
  const std::string p = write_tmp("truncated.gguf", head_of_file(kShared + "/models/stories260K/stories260K.gguf", 3000));
  expect_one_line_error(run_cli("info --model " + p), "truncated.gguf");
}

TEST(Cli, WrongFormatModelFile) {
  const std::string p = write_tmp("not_a_model.gguf", "this is plain text, not a GGUF file at all\n");
  expect_one_line_error(run_cli("info --model " + p), "not_a_model.gguf");
}

TEST(Cli, MissingTokenizer) {
  expect_one_line_error(run_cli("info --model " + kBin + " --tokenizer /nonexistent/tok.bin"), "/nonexistent/tok.bin");
}

TEST(Cli, RatioOutsideUnitInterval) {
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kData + " --docs 1 --ratios 0.1,1.5"), "1.5");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kData + " --docs 1 --ratios -0.1"), "-0.1");
}

TEST(Cli, UnknownMethodListsTheValidOnes) {
  CliRun r = run_cli("compact-eval --model " + kBin + " --data " + kData + " --docs 1 --methods h3o,am");
  expect_one_line_error(r, "h3o");
  EXPECT_NE(r.err.find("attn-nofit"), std::string::npos);
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kData +
                                " --docs 1 --methods am:select=omq"),
                        "omq");
}

TEST(Cli, EmptyDataFile) {
  const std::string p = write_tmp("empty.txt", "\n  \n");
  expect_one_line_error(run_cli("ppl --model " + kBin + " --data " + p), "empty.txt");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + p), "empty.txt");
}

TEST(Cli, DocumentTooShortForAContext) {
  const std::string p = write_tmp("short_docs.txt", "A\n\nOnce upon a time there was a cat.\n");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + p), "document 1");
}

TEST(Cli, CompactEvalJsonRows) {
  CliRun r = run_cli("compact-eval --model " + kBin + " --data " + kData +
                  " --docs 2 --ratios 0.5 --methods am,recent --json");
  ASSERT_EQ(r.status, 0) << r.err;
  for (const char* key : {"\"rows\"", "\"delta_nll_mean\"", "\"delta_nll_sem\"", "\"cache_bytes\"",
                          "\"compaction_seconds\"", "\"method\": \"recent\""})
    EXPECT_NE(r.out.find(key), std::string::npos) << key;
}


TEST(Cli, GenerateRejectsTopPOutsideZeroOne) {
  for (const char* p : {"0", "-0.5", "1.5"})
    expect_one_line_error(run_cli("generate --model " + kBin + " --steps 5 --top-p " + std::string(p)), "--top-p");
  CliRun ok = run_cli("generate --model " + kBin + " --steps 5 --top-p 1 --seed 3 --json");
  EXPECT_EQ(ok.status, 0) << ok.err;
}

TEST(Cli, GenerateWarnsOncePastMaxSeqLen) {
  CliRun r = run_cli("generate --model " + kBin + " --temperature 0 --steps 600 --json");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.err.find("max_seq_len 512"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  CliRun quiet = run_cli("generate --model " + kBin + " --temperature 0 --steps 100 --json");
  EXPECT_EQ(quiet.err.find("max_seq_len"), std::string::npos) << quiet.err;
}

TEST(Cli, InfluenceNeedsExactlyOneOfDataAndQa) {
  const std::string out = std::string(KVC_TEST_TMP) + "/cli_influence_args";
  expect_one_line_error(run_cli("influence --model " + kBin + " --out " + out), "--qa");
  CliRun both = run_cli("influence --model " + kBin + " --data " + kData + " --qa " + kData + " --out " + out);
  EXPECT_EQ(both.status, 1);
  expect_one_line_error(run_cli("influence --model " + kBin + " --data " + kData + " --chat --out " + out), "--chat");
}

}  // namespace
