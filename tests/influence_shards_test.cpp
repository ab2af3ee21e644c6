// Sharded influence sweeps (issue #18): the partition of units, `influence --shard I/N` run as 3
// shards one after another, `merge` giving the same influence.{json,csv,svg} bytes as a
// one-process run on stories260K (the reference: the unsharded sweep, an independent code path
// that keeps per-document files), refusals of mixed studies and bad --shard, and the sbatch
// scripts of `slurm --dry-run`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "studies/influence_shards.h"
#include "cli_runner.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";
const std::string kData = kShared + "/data/tinystories/tinystories_val_head.txt";
const std::string kStudy = "--model " + kBin + " --data " + kData +
                           " --docs 2 --ratios 0.05,0.25,0.5 --baseline 0.05 --heads L0H0,L2H1,L4H3";

using testing::CliRun;
using testing::expect_one_line_error;
using testing::run_cli;

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_dir(const std::string& name) {
  const std::string d = std::string(KVC_TEST_TMP) + "/shards_" + name + "_" + std::to_string(static_cast<long>(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

TEST(InfluenceShards, PartitionCoversEveryUnitOnce) {
  for (std::size_t n = 0; n <= 30; ++n)
    for (int N = 1; N <= 7; ++N) {
      std::vector<int> seen(n, 0);
      std::size_t prev_end = 0;
      for (int i = 0; i < N; ++i) {
        const auto [b, e] = shard_range(n, ShardSpec{i, N});
        EXPECT_EQ(b, prev_end);
        EXPECT_LE(e - b, n / static_cast<std::size_t>(N) + 1);
        for (std::size_t u = b; u < e; ++u) ++seen[u];
        prev_end = e;
      }
      EXPECT_EQ(prev_end, n);
      for (std::size_t u = 0; u < n; ++u) EXPECT_EQ(seen[u], 1) << n << " units, " << N << " shards";
    }
}

TEST(InfluenceShards, ParseShardRefusesBadSpecs) {
  EXPECT_EQ(parse_shard("2/3").index, 2);
  EXPECT_EQ(parse_shard("0/1").count, 1);
  for (const char* bad : {"3/3", "0/0", "-1/2", "1/-2", "a/b", "1", "1/2/3", "", "1 /2"})
    EXPECT_THROW(parse_shard(bad), Error) << bad;
  const std::string out = tmp_dir("bad");
  expect_one_line_error(run_cli("influence " + kStudy + " --out " + out + " --shard 3/3"), "--shard");
  expect_one_line_error(run_cli("influence " + kStudy + " --out " + out + " --shard 0/0"), "--shard");
}

TEST(InfluenceShards, ThreeShardsMergeToTheOneProcessResult) {
  const std::string one = tmp_dir("one"), sh = tmp_dir("sh");
  CliRun r = run_cli("influence " + kStudy + " --out " + one);
  ASSERT_EQ(r.status, 0) << r.err;
  for (int i = 0; i < 3; ++i) {
    CliRun s = run_cli("influence " + kStudy + " --out " + sh + " --shard " + std::to_string(i) + "/3");
    ASSERT_EQ(s.status, 0) << s.err;
    EXPECT_NE(s.out.find("2/2 units done"), std::string::npos) << s.out;  // 6 units / 3 shards
    if (i == 0) {  // shards write no aggregate
      EXPECT_FALSE(std::filesystem::exists(sh + "/influence.json"));
    }
    if (i == 1) {  // a merge before the last shard: partial aggregate, missing units listed, exit 2
      CliRun m = run_cli("merge " + sh);
      EXPECT_EQ(m.status, 2) << m.err;
      EXPECT_NE(m.out.find("4/6 units"), std::string::npos) << m.out;
      EXPECT_NE(m.out.find("[doc 2 L2H1] [doc 2 L4H3]"), std::string::npos) << m.out;
      CliRun st = run_cli("slurm --status " + sh);
      ASSERT_EQ(st.status, 0) << st.err;
      EXPECT_NE(st.out.find("shard 1/3: units 2..4: 2 done, 0 missing"), std::string::npos) << st.out;
    }
  }
  std::size_t units = 0;
  for (const auto& e : std::filesystem::directory_iterator(sh + "/units")) units += e.path().extension() == ".json";
  EXPECT_EQ(units, 6u);
  // A rerun of a finished shard sweeps nothing.
  CliRun again = run_cli("influence " + kStudy + " --out " + sh + " --shard 0/3");
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.err.find("0 swept, 2 already done"), std::string::npos) << again.err;
  CliRun m = run_cli("merge " + sh);
  ASSERT_EQ(m.status, 0) << m.err;
  EXPECT_NE(m.out.find("6/6 units (2 documents x 3 heads)"), std::string::npos) << m.out;
  for (const char* f : {"/influence.json", "/influence.csv", "/influence.svg"}) {
    const std::string a = slurp(one + f), b = slurp(sh + f);
    EXPECT_FALSE(a.empty()) << f;
    EXPECT_EQ(a, b) << f << " of the merged shards differs from the one-process run";
  }
}

TEST(InfluenceShards, RefusesToMixStudies) {
  const std::string a = tmp_dir("mix_a"), b = tmp_dir("mix_b");
  ASSERT_EQ(run_cli("influence " + kStudy + " --out " + a + " --shard 0/3").status, 0);
  // Another grid into the same folder: refused before any unit is written.
  const std::string other = "--model " + kBin + " --data " + kData +
                            " --docs 2 --ratios 0.05,0.5 --baseline 0.05 --heads L0H0,L2H1,L4H3";
  CliRun r = run_cli("influence " + other + " --out " + a + " --shard 1/3");
  expect_one_line_error(r, "settings that differ: grid");
  // Merging the folders of two studies (another seed) is refused.
  ASSERT_EQ(run_cli("influence " + kStudy + " --seed 7 --out " + b + " --shard 1/3").status, 0);
  expect_one_line_error(run_cli("merge " + a + " " + b), "refusing to mix studies");
  // A unit file copied in from another study is refused by name.
  std::filesystem::copy_file(b + "/units/doc_00000_L4H3.json", a + "/units/doc_00000_L4H3.json");
  expect_one_line_error(run_cli("merge " + a), "doc_00000_L4H3.json: belongs to study");
  expect_one_line_error(run_cli("merge " + tmp_dir("empty")), "no shard manifests");
}

TEST(InfluenceShards, SlurmDryRunWritesTheArrayAndMergeScripts) {
  const std::string out = tmp_dir("slurm");
  CliRun r = run_cli("slurm influence " + kStudy + " --out " + out +
                     " --array 4 --cpus 2 --partition gpu --time 6:00:00 --mem 8G --dry-run");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string s = slurp(out + "/slurm/influence_array.sbatch");
  for (const char* want : {"#SBATCH --array=0-3", "#SBATCH --cpus-per-task=2", "#SBATCH --partition=gpu",
                           "#SBATCH --time=6:00:00", "#SBATCH --mem=8G", "#SBATCH --requeue", "'influence'",
                           "--shard \"${SLURM_ARRAY_TASK_ID}/4\" --threads \"${SLURM_CPUS_PER_TASK:-2}\""})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  const std::string m = slurp(out + "/slurm/merge.sbatch");
  EXPECT_NE(m.find("merge '"), std::string::npos) << m;
  expect_one_line_error(run_cli("slurm influence " + kStudy + " --out " + out + " --array 4 --shard 1/4 --dry-run"),
                        "--shard");
  expect_one_line_error(run_cli("slurm influence " + kStudy + " --dry-run"), "--array");
  expect_one_line_error(run_cli("slurm " + kStudy + " --array 2 --dry-run"), "slurm influence");
  // Without sbatch on PATH, submitting is refused with a clear message.
  const char* path = std::getenv("PATH");
  const std::string saved = path != nullptr ? path : "";
  setenv("PATH", "/nonexistent", 1);
  CliRun no = run_cli("slurm influence " + kStudy + " --out " + out + " --array 4");
  setenv("PATH", saved.c_str(), 1);
  expect_one_line_error(no, "sbatch not found");
}

// A line break in an #SBATCH value would end that line and let the rest run as a command.
TEST(InfluenceShards, SlurmRefusesLineBreaksInHeaderValues) {
  const std::string dir = tmp_dir("slurm_newline");
  expect_one_line_error(run_cli("slurm influence " + kStudy + " --out " + dir + " --array 2 --dry-run --time '1:00\nrm -rf x'"),
                        "--time holds a line break");
  EXPECT_FALSE(std::filesystem::exists(dir + "/slurm/influence_array.sbatch"));
}

// Blanks in #SBATCH values are quoted (sbatch splits directives at unquoted blanks), options the
// slurm subcommand shares with the study (--fast-quant) reach the tasks, a line break in --out is
// refused, and a missing input file is named before any task is queued.
TEST(InfluenceShards, SlurmQuotesBlanksKeepsFastQuantAndChecksInputs) {
  const std::string out = tmp_dir("slurm_blank") + "/my out";
  CliRun r = run_cli("slurm influence " + kStudy + " --out '" + out + "' --array 2 --job-name 'my job' --fast-quant --dry-run");
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string s = slurp(out + "/slurm/influence_array.sbatch");
  for (const std::string& want : {std::string("#SBATCH --job-name=\"my job\""),
                                 "#SBATCH --output=\"" + out + "/slurm/logs/shard_%a.log\"",
                                 std::string("' --fast-quant --shard \"${SLURM_ARRAY_TASK_ID}/2\"")})
    EXPECT_NE(s.find(want), std::string::npos) << want << "\n" << s;
  EXPECT_NE(slurp(out + "/slurm/merge.sbatch").find("#SBATCH --job-name=\"my job-merge\""), std::string::npos);
  const std::string dir = tmp_dir("slurm_inputs");
  expect_one_line_error(run_cli("slurm influence " + kStudy + " --out '" + dir + "/a\nb' --array 2 --dry-run"),
                        "holds a line break");
  expect_one_line_error(run_cli("slurm compact-eval --model " + dir + "/no_such.bin --data x --out " + dir +
                                " --array 2 --dry-run"),
                        "--model " + dir + "/no_such.bin: no such file or folder");
  EXPECT_FALSE(std::filesystem::exists(dir + "/slurm"));
}

}}  // namespace
}  // namespace kvcompact
