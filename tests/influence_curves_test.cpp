#include "budgets/influence_curves.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "test_util.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::string tmp_dir() {
  std::string d = std::string(KVC_TEST_TMP) + "/influence_curves";
  std::filesystem::create_directories(d);
  return d;
}

using testing::expect_error;

InfluenceCurves sample_curves() {
  InfluenceCurves c;
  c.model_fingerprint = "0x0123456789abcdef";
  c.method = "am";
  c.grid = {0.0, 0.05, 0.1, 0.5};
  c.baseline_ratio = 0.1;
  c.n_layers = 2;
  c.n_kv_heads = 2;
  HeadCurve a;
  a.layer = 0;
  a.kv_head = 1;
  a.ratios = c.grid;
  a.mean = {0.5, 0.125, 0.0, -0.015625};
  a.sem = {0.1, 0.05, 0.0, 0.01};
  a.std = {0.3, 0.15, 0.0, 0.03};
  a.documents = 9;
  HeadCurve b = a;
  b.layer = 1;
  b.kv_head = 0;
  b.mean = {2.0, 1.0, 0.0, -0.25};
  c.heads = {a, b};
  return c;
}

TEST(InfluenceCurves, HeadNames) {
  EXPECT_EQ(head_name(3, 1), "L3H1");
  HeadCurve h;
  h.layer = 12;
  h.kv_head = 7;
  EXPECT_EQ(h.name(), "L12H7");
  auto ids = parse_head_names("L0H0, L3H1", 5, 4);
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids[0], (HeadId{0, 0}));
  EXPECT_EQ(ids[1], (HeadId{3, 1}));
  auto all = parse_head_names("all", 2, 3);
  ASSERT_EQ(all.size(), 6u);
  EXPECT_EQ(all[0], (HeadId{0, 0}));
  EXPECT_EQ(all[2], (HeadId{0, 2}));
  EXPECT_EQ(all[3], (HeadId{1, 0}));
  EXPECT_EQ(all[5], (HeadId{1, 2}));
}

TEST(InfluenceCurves, BadHeadNamesNameTheToken) {
  expect_error([] { parse_head_names("L0H0,L5H0", 5, 4); }, {"L5H0"});
  expect_error([] { parse_head_names("L0H4", 5, 4); }, {"L0H4"});
  expect_error([] { parse_head_names("L0H0,X1", 5, 4); }, {"X1"});
  expect_error([] { parse_head_names("L1H", 5, 4); }, {"L1H"});
  expect_error([] { parse_head_names("L-1H0", 5, 4); }, {"L-1H0"});
  expect_error([] { parse_head_names("l0h0", 5, 4); }, {"l0h0"});
  expect_error([] { parse_head_names("L1H1,L1H1", 5, 4); }, {"L1H1", "twice"});
  expect_error([] { parse_head_names("", 5, 4); }, {"--heads"});
  expect_error([] { parse_head_names("L0H0,", 5, 4); }, {"--heads"});
}

TEST(InfluenceCurves, RatioGrid) {
  auto g = parse_ratio_grid("0:0.5:51");
  ASSERT_EQ(g.size(), 51u);
  EXPECT_EQ(g.front(), 0.0);
  EXPECT_EQ(g.back(), 0.5);
  EXPECT_NEAR(g[10], 0.1, 1e-15);
  EXPECT_NEAR(g[37], 0.37, 1e-15);
  for (std::size_t i = 1; i < g.size(); ++i) EXPECT_GT(g[i], g[i - 1]);
  auto l = parse_ratio_grid("0.01, 0.05,0.1,1");
  EXPECT_EQ(l, (std::vector<double>{0.01, 0.05, 0.1, 1.0}));
  EXPECT_EQ(parse_ratio_grid("0.3:0.3:1"), (std::vector<double>{0.3}));
  EXPECT_EQ(parse_ratio_grid("0.25"), (std::vector<double>{0.25}));
}

TEST(InfluenceCurves, BadRatioGrids) {
  for (const char* bad : {"0.5,0.2", "0.1,0.1", "0:1.5:3", "-0.1,0.5", "1:0:3", "0:1:0", "0:1", "a,b", "0.1,,0.2",
                          "0:1:2.5", "0.1,nan", "0.1,inf", "0:0.5:1", ""}) {
    expect_error([&] { parse_ratio_grid(bad); }, {"--ratios"});
  }
}

TEST(InfluenceCurves, BaselineOnGrid) {
  auto g = parse_ratio_grid("0:0.5:51");
  EXPECT_EQ(baseline_index(0.1, g), 10u);
  EXPECT_EQ(baseline_index(0.1 + 5e-10, g), 10u);
  EXPECT_EQ(baseline_index(0.5, g), 50u);
  expect_error([&] { baseline_index(0.105, g); }, {"--baseline", "0.105"});
  expect_error([&] { baseline_index(0.1 + 1e-8, g); }, {"--baseline"});
}

TEST(InfluenceCurves, AggregateHandWorked) {
  // Column 0: 1, 3, 5 -> mean 3, sample std 2, sem 2/sqrt(3); column 1: 2, 6, 10 -> 6, 4, 4/sqrt(3).
  auto s = aggregate_documents({{1, 2}, {3, 6}, {5, 10}});
  EXPECT_EQ(s.documents, 3);
  EXPECT_DOUBLE_EQ(s.mean[0], 3.0);
  EXPECT_DOUBLE_EQ(s.mean[1], 6.0);
  EXPECT_DOUBLE_EQ(s.std[0], 2.0);
  EXPECT_DOUBLE_EQ(s.std[1], 4.0);
  EXPECT_DOUBLE_EQ(s.sem[0], 2.0 / std::sqrt(3.0));
  EXPECT_DOUBLE_EQ(s.sem[1], 4.0 / std::sqrt(3.0));
  auto one = aggregate_documents({{0.25, -1.5}});
  EXPECT_EQ(one.mean, (std::vector<double>{0.25, -1.5}));
  EXPECT_EQ(one.sem, (std::vector<double>{0.0, 0.0}));
  EXPECT_EQ(one.std, (std::vector<double>{0.0, 0.0}));
  EXPECT_THROW(aggregate_documents({}), Error);
  EXPECT_THROW(aggregate_documents({{}}), Error);
  expect_error([] { aggregate_documents({{1, 2}, {3}}); }, {"document 2"});
  expect_error([] { aggregate_documents({{1, 2}, {3, std::nan("")}}); }, {"document 2"});
}

TEST(InfluenceCurves, JsonRoundTrip) {
  const auto c = sample_curves();
  const std::string path = tmp_dir() + "/curves.json";
  write_influence_curves_json(path, c);
  const auto r = read_influence_curves_json(path);
  EXPECT_EQ(r.model_fingerprint, c.model_fingerprint);
  EXPECT_EQ(r.method, "am");
  EXPECT_EQ(r.baseline_ratio, 0.1);
  EXPECT_EQ(r.grid, c.grid);
  EXPECT_EQ(r.n_layers, 2);
  EXPECT_EQ(r.n_kv_heads, 2);
  ASSERT_EQ(r.heads.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(r.heads[i].layer, c.heads[i].layer);
    EXPECT_EQ(r.heads[i].kv_head, c.heads[i].kv_head);
    EXPECT_EQ(r.heads[i].ratios, c.heads[i].ratios);
    EXPECT_EQ(r.heads[i].mean, c.heads[i].mean);
    EXPECT_EQ(r.heads[i].sem, c.heads[i].sem);
    EXPECT_EQ(r.heads[i].std, c.heads[i].std);
    EXPECT_EQ(r.heads[i].documents, 9);
  }
  ASSERT_NE(r.find(1, 0), nullptr);
  EXPECT_EQ(r.find(1, 0)->mean[0], 2.0);
  EXPECT_EQ(r.find(1, 1), nullptr);
  auto j = influence_curves_to_json(c);
  EXPECT_EQ(j["heads"][0]["name"], "L0H1");
  EXPECT_EQ(j["heads"][1]["delta_nll_mean"][3], -0.25);
}

TEST(InfluenceCurves, Csv) {
  const std::string csv = influence_curves_csv(sample_curves());
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start < csv.size()) {
    auto e = csv.find('\n', start);
    lines.push_back(csv.substr(start, e - start));
    start = e + 1;
  }
  ASSERT_EQ(lines.size(), 1u + 2u * 4u);
  EXPECT_EQ(lines[0], "head,layer,kv_head,ratio,delta_nll_mean,delta_nll_sem,delta_nll_std,documents");
  EXPECT_EQ(lines[1], "L0H1,0,1,0,0.5,0.1,0.3,9");
  EXPECT_EQ(lines[2], "L0H1,0,1,0.05,0.125,0.05,0.15,9");
  EXPECT_EQ(lines[8], "L1H0,1,0,0.5,-0.25,0.01,0.03,9");
}

TEST(InfluenceCurves, InvalidCurvesRejectedOnWrite) {
  auto c = sample_curves();
  c.heads[1].sem[2] = -0.1;
  expect_error([&] { influence_curves_to_json(c); }, {"heads[1].delta_nll_sem[2]"});
  c = sample_curves();
  c.heads[0].mean[1] = std::nan("");
  expect_error([&] { influence_curves_csv(c); }, {"heads[0].delta_nll_mean[1]"});
  c = sample_curves();
  c.heads[1].layer = 0;
  c.heads[1].kv_head = 1;
  expect_error([&] { influence_curves_to_json(c); }, {"L0H1", "twice"});
  c = sample_curves();
  c.heads[1].kv_head = 2;
  expect_error([&] { influence_curves_to_json(c); }, {"L1H2"});
  c = sample_curves();
  c.baseline_ratio = 0.2;
  expect_error([&] { influence_curves_to_json(c); }, {"baseline_ratio"});
  c = sample_curves();
  c.heads[0].std.pop_back();
  expect_error([&] { influence_curves_to_json(c); }, {"heads[0]", "lengths"});
}

TEST(InfluenceCurves, BadFilesNameFileAndField) {
  const std::string dir = tmp_dir();
  const auto good = influence_curves_to_json(sample_curves());
  auto write = [&](const std::string& name, const std::string& text) {
    std::string p = dir + "/" + name;
    std::ofstream(p) << text;
    return p;
  };
  {
    auto j = good;
    j["heads"][0].erase("delta_nll_sem");
    auto p = write("missing_sem.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "heads[0].delta_nll_sem", "missing"});
  }
  {
    auto j = good;
    j["heads"][1]["delta_nll_mean"][2] = nullptr;  // how NaN would be written
    auto p = write("null.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "heads[1].delta_nll_mean[2]"});
  }
  {
    auto j = good;
    j["heads"][0]["name"] = "L1H1";
    auto p = write("name.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "heads[0].name"});
  }
  {
    auto j = good;
    j["grid"] = {0.0, 0.5, 0.1};
    auto p = write("grid.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "grid"});
  }
  {
    auto j = good;
    j["n_layers"] = "2";
    auto p = write("type.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "n_layers"});
  }
  {
    auto j = good;
    j.erase("method");
    auto p = write("method.json", j.dump());
    expect_error([&] { read_influence_curves_json(p); }, {p, "method", "missing"});
  }
  {
    auto p = write("trunc.json", good.dump().substr(0, 40));
    expect_error([&] { read_influence_curves_json(p); }, {p, "JSON"});
  }
  {
    auto p = write("array.json", "[1, 2]");
    expect_error([&] { read_influence_curves_json(p); }, {p});
  }
  expect_error([&] { read_influence_curves_json(dir + "/does_not_exist.json"); }, {"does_not_exist.json"});
}

}}  // namespace
}  // namespace kvcompact

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

// The trapezoid area the head rankings use (cmd_influence's listing, head_scores' influence
// scores), worked by hand: 0.5*(2+1)*0.5 + 0.5*(1+0)*0.5 = 1.0; uneven spacing 0.5*(1+3)*0.2 +
// 0.5*(3+3)*0.8 = 2.8.
TEST(InfluenceCurves, AreaIsTheTrapezoidOverTheRatios) {
  HeadCurve c;
  c.ratios = {0.0, 0.5, 1.0};
  c.mean = {2.0, 1.0, 0.0};
  EXPECT_DOUBLE_EQ(c.area(), 1.0);
  c.ratios = {0.0, 0.2, 1.0};
  c.mean = {1.0, 3.0, 3.0};
  EXPECT_DOUBLE_EQ(c.area(), 2.8);
  c.ratios = {0.3};
  c.mean = {5.0};
  EXPECT_EQ(c.area(), 0.0);
}

}}  // namespace
}  // namespace kvcompact
