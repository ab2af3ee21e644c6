// The kvcompact CLI on bad input: one-line error naming the file or option, non-zero exit.
#include <gtest/gtest.h>

#include "cli_runner.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";

using kvcompact::testing::CliRun;
using kvcompact::testing::expect_one_line_error;
using kvcompact::testing::head_of_file;
using kvcompact::testing::run_cli;
using kvcompact::testing::write_tmp;

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

TEST(Cli, EmptyOrUnderflowingRatioIsRefused) {
  // "" and 1e-400 once read as 0 (strtod's underflow) and kept no entries, with exit 0.
  const std::string ctx = write_tmp("ratio_ctx.txt", "Once upon a time there was a cat. It liked to play.\n");
  const std::string out = std::string(KVC_TEST_TMP) + "/ratio_refused.kvc";
  for (const char* bad : {"''", "1e-400", "abc", "1.5"})
    expect_one_line_error(run_cli("compact --model " + kBin + " --context " + ctx + " --ratio " + bad + " -o " + out),
                          "--ratio");
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kData + " --docs 1 --ratios 0.1,1e-400"),
                        "1e-400");
  // A tiny but representable ratio keeps one entry per head (t = max(1, floor(r T))).
  const CliRun ok = run_cli("compact --model " + kBin + " --context " + ctx + " --ratio 1e-300 -o " + out);
  EXPECT_EQ(ok.status, 0) << ok.err;
  EXPECT_NE((ok.out + ok.err).find("20 of 360 entries kept"), std::string::npos) << ok.out << ok.err;
}

TEST(Cli, ContextLongerThanEveryDocumentIsNamed) {
  // Used to say "--skip 0 leaves no documents" though no --skip was given.
  expect_one_line_error(run_cli("compact-eval --model " + kBin + " --data " + kData +
                                " --context-tokens 100000 --continuation-tokens 5"),
                        "--context-tokens 100000");
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
  CliRun ppl = run_cli("ppl --model " + kBin + " --data " + kData + " --max-tokens 700 --json");
  ASSERT_EQ(ppl.status, 0) << ppl.err;
  EXPECT_NE(ppl.err.find("positions up to 700 run past the model's max_seq_len 512"), std::string::npos) << ppl.err;
  EXPECT_EQ(std::count(ppl.err.begin(), ppl.err.end(), '\n'), 1) << ppl.err;
}

TEST(Cli, InfluenceNeedsExactlyOneOfDataAndQa) {
  const std::string out = std::string(KVC_TEST_TMP) + "/cli_influence_args";
  expect_one_line_error(run_cli("influence --model " + kBin + " --out " + out), "--qa");
  CliRun both = run_cli("influence --model " + kBin + " --data " + kData + " --qa " + kData + " --out " + out);
  EXPECT_EQ(both.status, 1);
  expect_one_line_error(run_cli("influence --model " + kBin + " --data " + kData + " --chat --out " + out), "--chat");
}

}}  // namespace
