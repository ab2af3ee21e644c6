// The shared runner of sharded studies (studies/unit_study.h), driven with a hand-made unit
// function: shards together run each unit exactly once, a rerun skips finished units, a folder
// reads back in unit order with the missing units named, and another study, another kind or a
// tampered unit file is refused with a one-line error naming the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "studies/unit_study.h"
#include "cli_runner.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using nlohmann::json;

std::string tmp_dir(const std::string& name) { return testing::fresh_dir("unit_study_" + name); }

UnitStudy seven_units(const json& settings = {{"x", 1}}) {
  std::vector<std::string> names, hashes;
  for (int u = 0; u < 7; ++u) {
    names.push_back("doc_" + std::to_string(u));
    hashes.push_back(hash_hex("text of document " + std::to_string(u)));
  }
  return make_unit_study(study_kind("compact-eval"), settings, names, hashes);
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

using testing::read_json;

using Range = std::pair<std::size_t, std::size_t>;

TEST(UnitStudy, ShardRangesPartitionTheUnits) {
  // Hand-worked: 7 units over 3 shards are [0,2), [2,4), [4,7).
  EXPECT_EQ(shard_range(7, ShardSpec{0, 3}), (Range{0, 2}));
  EXPECT_EQ(shard_range(7, ShardSpec{1, 3}), (Range{2, 4}));
  EXPECT_EQ(shard_range(7, ShardSpec{2, 3}), (Range{4, 7}));
  EXPECT_EQ(shard_range(2, ShardSpec{0, 4}), (Range{0, 0}));  // an empty shard
  for (const char* bad : {"3/3", "x", "0/0", "-1/2", "1/", "/2", "1/2/3"})
    EXPECT_NE(error_of([&] { (void)parse_shard(bad); }).find("--shard '"), std::string::npos) << bad;
  EXPECT_EQ(parse_shard("2/5").index, 2);
  EXPECT_EQ(parse_shard("2/5").count, 5);
}

TEST(UnitStudy, ShardsRunEachUnitOnceAndReadBackInOrder) {
  const std::string dir = tmp_dir("once");
  const UnitStudy study = seven_units();
  std::vector<int> calls(7, 0);
  auto square = [&](int u) {
    ++calls[static_cast<std::size_t>(u)];
    return json{{"v", u * u}};
  };
  for (const char* s : {"2/3", "0/3", "1/3"}) {
    const UnitShardRun run = run_unit_shard(dir, study, parse_shard(s), square, {}, false);
    EXPECT_EQ(run.skipped, 0u) << s;
    EXPECT_EQ(run.evaluated, run.end - run.begin) << s;
  }
  EXPECT_EQ(calls, std::vector<int>(7, 1));
  const UnitShardRun again = run_unit_shard(dir, study, {2, 3}, square, {}, false);  // a requeued task
  EXPECT_EQ(again.evaluated, 0u);
  EXPECT_EQ(again.skipped, 3u);
  EXPECT_EQ(calls, std::vector<int>(7, 1));

  const UnitStudyState st = read_unit_study(dir, study_kind("compact-eval"));
  EXPECT_TRUE(st.complete());
  EXPECT_EQ(st.study.id, study.id);
  ASSERT_EQ(st.results.size(), 7u);
  for (int u = 0; u < 7; ++u) EXPECT_EQ(st.results[u].at("v"), u * u);
  ASSERT_EQ(st.shards.size(), 3u);
  EXPECT_EQ(st.shards[0].shard.index, 0);
  EXPECT_EQ(st.shards[2].end, 7u);
  EXPECT_EQ(st.shards[2].done, 3u);
  // The unit file names the study, the unit and its input.
  const json unit = read_json(dir + "/units/compact_eval_doc_3.json");
  EXPECT_EQ(unit.at("study"), study.id);
  EXPECT_EQ(unit.at("unit"), 3);
  EXPECT_EQ(unit.at("input_hash"), hash_hex("text of document 3"));
  EXPECT_EQ(study_kind_in(dir)->name, "compact-eval");
}

TEST(UnitStudy, APartialFolderNamesItsMissingUnits) {
  const std::string dir = tmp_dir("partial");
  const UnitStudy study = seven_units();
  (void)run_unit_shard(dir, study, {1, 3}, [](int u) { return json(u); }, {}, false);
  const UnitStudyState st = read_unit_study(dir, study_kind("compact-eval"));
  EXPECT_EQ(st.missing, (std::vector<int>{0, 1, 4, 5, 6}));
  EXPECT_EQ(st.done(), 2);
  EXPECT_TRUE(st.results[0].is_null());
  EXPECT_EQ(st.results[2], 2);
  EXPECT_EQ(unit_study_status_line(st),
            "compact-eval study " + study.id + ": 2/7 documents done; missing documents: 1 2 5 6 7");
}

TEST(UnitStudy, AnotherStudyOrKindIsRefused) {
  const std::string dir = tmp_dir("mixed");
  const UnitStudy a = seven_units();
  auto zero = [](int) { return json(0); };
  (void)run_unit_shard(dir, a, {0, 2}, zero, {}, false);
  const std::string e1 = error_of([&] { (void)run_unit_shard(dir, seven_units({{"x", 2}}), {1, 2}, zero, {}, false); });
  EXPECT_NE(e1.find("settings that differ: x"), std::string::npos) << e1;
  const UnitStudy qa = make_unit_study(study_kind("qa-eval"), {{"x", 1}}, {"article_0"}, {hash_hex("a")});
  const std::string e2 = error_of([&] { (void)run_unit_shard(dir, qa, {0, 1}, zero, {}, false); });
  EXPECT_NE(e2.find(dir + ": holds a compact-eval study; use another --out folder for the qa-eval study"),
            std::string::npos)
      << e2;
  const std::string e3 = error_of([&] { (void)read_unit_study(dir, study_kind("qa-eval")); });
  EXPECT_NE(e3.find("holds a compact-eval study"), std::string::npos) << e3;
  const std::string e4 = error_of([&] { (void)read_unit_study(tmp_dir("empty"), study_kind("qa-eval")); });
  EXPECT_NE(e4.find("no qa-eval shard manifests"), std::string::npos) << e4;
  EXPECT_EQ(study_kind_in(tmp_dir("empty2")), nullptr);
  // Two kinds' manifests in one folder (copied by hand) are named, never mixed.
  const std::string both = tmp_dir("both");
  (void)run_unit_shard(both, a, {0, 1}, zero, {}, false);
  std::filesystem::copy_file(both + "/shards/compact_eval_shard_0_of_1.json", both + "/shards/qa_eval_shard_0_of_1.json");
  const std::string e5 = error_of([&] { (void)study_kind_in(both); });
  EXPECT_NE(e5.find("holds shard manifests of a compact-eval study and of a qa-eval study"), std::string::npos) << e5;
}

TEST(UnitStudy, ARefusedRunLeavesTheFolderAsItFoundIt) {
  // Units without manifests (shards/ deleted by hand): another study's shard is refused by the
  // units it would skip, before it writes a manifest that would lock the rightful study out.
  const std::string dir = tmp_dir("lockout");
  const UnitStudy study = seven_units();
  auto zero = [](int) { return json(0); };
  (void)run_unit_shard(dir, study, {0, 1}, zero, {}, false);
  std::filesystem::remove_all(dir + "/shards");
  const std::string e = error_of([&] { (void)run_unit_shard(dir, seven_units({{"x", 3}}), {1, 3}, zero, {}, false); });
  EXPECT_NE(e.find("belongs to study " + study.id), std::string::npos) << e;
  EXPECT_FALSE(std::filesystem::exists(dir + "/shards/compact_eval_shard_1_of_3.json"));
  const UnitShardRun again = run_unit_shard(dir, study, {1, 3}, zero, {}, false);
  EXPECT_EQ(again.skipped, 2u);
}

TEST(UnitStudy, TamperedUnitFilesAreRefusedWithTheRemedy) {
  const std::string dir = tmp_dir("tamper");
  const UnitStudy study = seven_units();
  (void)run_unit_shard(dir, study, {0, 1}, [](int u) { return json{{"v", u}}; }, {}, false);
  const std::string u0 = dir + "/units/compact_eval_doc_0.json", u1 = dir + "/units/compact_eval_doc_1.json";
  const json original = read_json(u1);
  // Unit 0's file copied over unit 1 (and edited to claim it): its input hash gives it away.
  json copied = read_json(u0);
  copied["unit"] = 1;
  std::ofstream(u1) << copied.dump();
  const std::string e1 = error_of([&] { (void)read_unit_study(dir, study_kind("compact-eval")); });
  EXPECT_NE(e1.find(u1 + ": its input hash is not document 2's"), std::string::npos) << e1;
  EXPECT_NE(e1.find("delete it to have document 2 evaluated again"), std::string::npos) << e1;
  // Another study's unit.
  json other = original;
  other["study"] = "0123456789abcdef";
  std::ofstream(u1) << other.dump();
  EXPECT_NE(error_of([&] { (void)read_unit_study(dir, study_kind("compact-eval")); }).find("belongs to study 0123456789abcdef"),
            std::string::npos);
  // A truncated file: named by the rerun and by the reader, with the remedy.
  std::ofstream(u1) << "{\"version\": 1, \"stu";
  const std::string e3 = error_of([&] { (void)run_unit_shard(dir, study, {0, 1}, [](int) { return json(0); }, {}, false); });
  EXPECT_NE(e3.find(u1), std::string::npos) << e3;
  EXPECT_NE(e3.find("delete it to have document 2 evaluated again"), std::string::npos) << e3;
  std::ofstream(u1) << original.dump();
  // The kind's own check of a result runs on units already there.
  auto refuse_big = [](const json& r, int, const std::string& path) {
    if (r.at("v").get<int>() > 5) throw Error(path + ": v too big");
  };
  const std::string e4 = error_of([&] { (void)read_unit_study(dir, study_kind("compact-eval"), refuse_big); });
  EXPECT_NE(e4.find("compact_eval_doc_6.json: v too big"), std::string::npos) << e4;
  // An edited manifest no longer matches its id.
  const std::string m = dir + "/shards/compact_eval_shard_0_of_1.json";
  json man = read_json(m);
  man["settings"]["x"] = 9;
  std::ofstream(m) << man.dump();
  EXPECT_NE(error_of([&] { (void)read_unit_study(dir, study_kind("compact-eval")); }).find("does not match its settings"),
            std::string::npos);
}

TEST(UnitStudy, BadUnitListsAreErrors) {
  const StudyKind& k = study_kind("compact-eval");
  EXPECT_NE(error_of([&] { (void)make_unit_study(k, {}, {}, {}); }).find("no documents to evaluate"), std::string::npos);
  EXPECT_NE(error_of([&] { (void)make_unit_study(k, {}, {"a", "a"}, {"1", "2"}); }).find("'a' is repeated"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)make_unit_study(k, {}, {"../x"}, {"1"}); }).find("bad unit name '../x'"),
            std::string::npos);
  EXPECT_NE(error_of([&] { (void)make_unit_study(k, {}, {"a"}, {}); }).find("1 unit names but 0 input hashes"),
            std::string::npos);
  EXPECT_NE(error_of([] { (void)study_kind("nope"); }).find("unknown study kind 'nope'"), std::string::npos);
  // Settings differing in the inputs are named as such.
  EXPECT_EQ(differing_settings({{"unit_hashes", {"a"}}, {"seed", 1}}, {{"unit_hashes", {"b"}}, {"seed", 1}}),
            "input documents");
}

}}  // namespace
}  // namespace kvcompact
