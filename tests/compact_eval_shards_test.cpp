// Sharded compact-eval (issue #18): `compact-eval --out DIR --shard I/N` run as 3 shards one after
// another (one of them twice: the rerun skips its finished documents), then `merge DIR`, must give
// the numbers of a one-process `compact-eval` on stories260K exactly (the reference: the unsharded
// run, which never writes or reads unit files); a partial study merges with exit 2 naming the
// missing documents; mixed studies, --shard without --out and a broken unit are one-line errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "cli_runner.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kEval = "compact-eval --model " + kShared + "/models/stories260K/stories260K.bin --data " + kShared +
                          "/data/tinystories/tinystories_val_head.txt --docs 7 --ratios 0.1,0.5 --methods am,snapkv,random";

using testing::CliRun;
using testing::expect_one_line_error;
using testing::run_cli;

std::string tmp_dir(const std::string& name) { return testing::fresh_dir("ce_shards_" + name); }
using testing::read_json;

TEST(CompactEvalShards, MergedShardsEqualOneProcess) {
  const std::string dir = tmp_dir("merge");
  const CliRun one = run_cli(kEval + " --out-json " + dir + "/one.json");
  ASSERT_EQ(one.status, 0) << one.err;
  const std::string study = dir + "/study";
  for (const char* s : {"2/3", "0/3"}) {
    const CliRun r = run_cli(kEval + " --out " + study + " --shard " + s);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_NE(r.out.find("documents done"), std::string::npos) << r.out;  // incomplete: no table yet
  }
  const CliRun partial = run_cli("merge " + study);
  EXPECT_EQ(partial.status, 2) << partial.err;
  EXPECT_NE(partial.err.find("2 of 7 documents missing"), std::string::npos) << partial.err;
  EXPECT_FALSE(std::filesystem::exists(study + "/compact_eval.csv"));  // only a complete study is written
  const CliRun again = run_cli(kEval + " --out " + study + " --shard 0/3");  // everything already done
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("0 evaluated, 2 already done"), std::string::npos) << again.out;
  const CliRun last = run_cli(kEval + " --out " + study + " --shard 1/3");  // completes the study: the table
  ASSERT_EQ(last.status, 0) << last.err;
  EXPECT_NE(last.out.find("delta_nll_mean"), std::string::npos) << last.out;
  ASSERT_TRUE(std::filesystem::exists(study + "/compact_eval.json"));  // written by the completing shard
  const std::string by_shard = read_json(study + "/compact_eval.json")["rows"].dump();
  const CliRun merged = run_cli("merge " + study);
  ASSERT_EQ(merged.status, 0) << merged.err;
  EXPECT_EQ(read_json(study + "/compact_eval.json")["rows"].dump(), by_shard);

  const nlohmann::json a = read_json(dir + "/one.json"), b = read_json(study + "/compact_eval.json");
  ASSERT_EQ(a["rows"].size(), 6u);
  ASSERT_EQ(b["rows"].size(), a["rows"].size());
  EXPECT_EQ(b["documents"], 7);
  EXPECT_EQ(a["full_nll_mean"].get<double>(), b["full_nll_mean"].get<double>());
  for (std::size_t i = 0; i < a["rows"].size(); ++i)
    for (const char* k : {"method", "ratio", "delta_nll_mean", "delta_nll_sem", "nll_mean", "kept_entries",
                          "cache_bytes", "full_cache_bytes", "delta_nll_per_document"})
      EXPECT_EQ(a["rows"][i][k], b["rows"][i][k]) << "row " << i << " " << k;
  for (std::size_t d = 0; d < 7; ++d) EXPECT_EQ(a["per_document"][d]["tokens"], b["per_document"][d]["tokens"]);
  EXPECT_TRUE(std::filesystem::exists(study + "/compact_eval.csv"));
}

TEST(CompactEvalShards, BadInputIsAOneLineError) {
  const std::string dir = tmp_dir("bad");
  const std::string study = dir + "/study";
  ASSERT_EQ(run_cli(kEval + " --out " + study + " --shard 0/4").status, 0);
  // Another study into the same folder: refused, naming the settings that differ.
  expect_one_line_error(run_cli(kEval + " --seed 5 --out " + study + " --shard 1/4"), "settings that differ: seed");
  expect_one_line_error(run_cli(kEval + " --shard 1/4"), "--shard: needs --out DIR");
  expect_one_line_error(run_cli(kEval + " --out " + study + " --shard 4/4"), "--shard '4/4'");
  expect_one_line_error(run_cli(kEval + " --out " + study + " --shard x"), "--shard 'x'");
  // A shard without documents (7 documents, 8 shards) is no error.
  const CliRun none = run_cli(kEval + " --out " + study + " --shard 0/8");
  EXPECT_EQ(none.status, 0) << none.err;
  // A unit copied to another document's name (and edited to claim it) is refused by its input hash.
  const std::string unit = study + "/units/compact_eval_doc_0.json";
  ASSERT_TRUE(std::filesystem::exists(unit));
  {
    std::ifstream in(unit);
    std::stringstream ss;
    ss << in.rdbuf();
    nlohmann::json j = nlohmann::json::parse(ss.str());
    j["unit"] = 5;
    std::ofstream(study + "/units/compact_eval_doc_5.json") << j.dump();
  }
  expect_one_line_error(run_cli("merge " + study), "compact_eval_doc_5.json: its input hash is not document 6's");
  std::filesystem::remove(study + "/units/compact_eval_doc_5.json");
  // Numbers a run cannot produce (negative bytes, a fractional entry count, an infinite NLL) are
  // refused by name, never printed.
  {
    std::ifstream in(unit);
    std::stringstream ss;
    ss << in.rdbuf();
    const nlohmann::json good = nlohmann::json::parse(ss.str());
    for (const auto& [cell, value] : {std::pair<int, double>{1, -1e20}, {5, 0.5}, {0, -0.5}}) {
      nlohmann::json bad = good;
      bad["result"]["cells"][0][cell] = value;
      std::ofstream(unit) << bad.dump();
      expect_one_line_error(run_cli("merge " + study), "compact_eval_doc_0.json: cells");
    }
    nlohmann::json none = good;
    none["result"] = nullptr;
    std::ofstream(unit) << none.dump();
    expect_one_line_error(run_cli("merge " + study), "compact_eval_doc_0.json: holds no result");
    std::ofstream(unit) << good.dump();
  }
  // A broken unit: named with the problem and the remedy, by the rerun and by merge.
  std::ofstream(unit) << "{\"study\": 3";
  expect_one_line_error(run_cli(kEval + " --out " + study + " --shard 0/4"), "delete it to have document 1 evaluated again");
  expect_one_line_error(run_cli("merge " + study), unit);
  // An influence sweep and a compact-eval study never share a folder.
  const std::string inf = dir + "/influence";
  ASSERT_EQ(run_cli("influence --model " + kShared + "/models/stories260K/stories260K.bin --data " + kShared +
                    "/data/tinystories/tinystories_val_head.txt --docs 1 --ratios 0.1,0.5 --baseline 0.1 --heads L0H0 "
                    "--out " + inf + " --shard 0/1").status, 0);
  expect_one_line_error(run_cli(kEval + " --out " + inf + " --shard 0/2"), "holds an influence sweep");
  expect_one_line_error(run_cli("influence --model " + kShared + "/models/stories260K/stories260K.bin --data " + kShared +
                                "/data/tinystories/tinystories_val_head.txt --docs 1 --ratios 0.1,0.5 --baseline 0.1 "
                                "--heads L0H0 --out " + study + " --shard 0/1"),
                        "holds a compact-eval study");
  expect_one_line_error(run_cli("merge " + inf + " " + dir), "no influence shard manifests");
}

}}  // namespace
}  // namespace kvcompact
