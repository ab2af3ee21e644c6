// Influence sweeps on the real stories260K model: the fast sweep (prefix reuse) against a plain
// recomputation, the exact zero at the baseline ratio, and resuming an interrupted run.
#include "studies/influence.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

class InfluenceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
    docs_ = new std::vector<std::string>(
        read_documents(std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt", 3));
  }
  static void TearDownTestSuite() {
    delete model_;
    delete docs_;
  }
  static InfluenceOptions options() {
    InfluenceOptions o;
    o.grid = {0.0, 0.05, 0.2, 0.5};
    o.baseline_ratio = 0.05;
    o.heads = parse_head_names("L0H0,L2H3,L4H1", 5, 4);
    o.progress = false;
    return o;
  }
  static Model* model_;
  static std::vector<std::string>* docs_;
};
Model* InfluenceTest::model_ = nullptr;
std::vector<std::string>* InfluenceTest::docs_ = nullptr;

TEST_F(InfluenceTest, PrefixReuseMatchesPlainRecomputationAndBaselineIsExactlyZero) {
  const std::vector<int> ids = model_->tokenizer->encode((*docs_)[2], true);
  InfluenceOptions fast = options(), plain = options();
  plain.reuse_prefix = false;
  const DocumentInfluence a = sweep_document(*model_, ids, 2, fast);
  const DocumentInfluence b = sweep_document(*model_, ids, 2, plain);
  ASSERT_EQ(a.delta.size(), 3u);
  EXPECT_EQ(a.baseline_nll, b.baseline_nll);
  bool any_nonzero = false;
  for (std::size_t h = 0; h < 3; ++h) {
    ASSERT_EQ(a.delta[h].size(), 4u);
    EXPECT_EQ(a.delta[h][1], 0.0) << "baseline point, head " << h;
    EXPECT_EQ(b.delta[h][1], 0.0) << "baseline point, head " << h;
    for (std::size_t i = 0; i < 4; ++i) {
      // Batched points vs the baseline run alone: float32 summation order only (see influence_qa_test).
      EXPECT_NEAR(a.delta[h][i], b.delta[h][i], 1e-5) << "head " << h << " point " << i;
      any_nonzero |= std::fabs(a.delta[h][i]) > 1e-4;
    }
  }
  EXPECT_TRUE(any_nonzero);  // the sweep measures something
}

TEST_F(InfluenceTest, RunWritesAggregatesAndResumes) {
  namespace fs = std::filesystem;
  const std::string dir = std::string(KVC_TEST_TMP) + "/influence_run";
  fs::remove_all(dir);
  InfluenceOptions o = options();
  std::vector<std::string> docs(docs_->begin(), docs_->begin() + 2);
  // Interrupted run: only the first head of each document was finished.
  InfluenceOptions first = o;
  first.heads = {o.heads[0]};
  run_influence(*model_, docs, first, dir);
  ASSERT_TRUE(fs::exists(dir + "/docs/doc_00000.json"));
  const auto stamp = fs::last_write_time(dir + "/docs/doc_00000.json");
  const InfluenceCurves full = run_influence(*model_, docs, o, dir);
  ASSERT_EQ(full.heads.size(), 3u);
  EXPECT_EQ(full.heads[0].documents, 2);
  EXPECT_EQ(full.heads[1].mean[1], 0.0);
  EXPECT_TRUE(fs::exists(dir + "/influence.json"));
  EXPECT_TRUE(fs::exists(dir + "/influence.csv"));
  // A finished run is not redone: the files stay as they are.
  const auto stamp2 = fs::last_write_time(dir + "/docs/doc_00000.json");
  EXPECT_NE(stamp, stamp2);  // it was extended by the second run
  const InfluenceCurves again = run_influence(*model_, docs, o, dir);
  EXPECT_EQ(fs::last_write_time(dir + "/docs/doc_00000.json"), stamp2);
  EXPECT_EQ(again.heads[2].mean, full.heads[2].mean);
  // Same numbers as a fresh run of the same documents.
  const std::string dir2 = dir + "_fresh";
  fs::remove_all(dir2);
  const InfluenceCurves fresh = run_influence(*model_, docs, o, dir2);
  for (int h = 0; h < 3; ++h) EXPECT_EQ(fresh.heads[h].mean, full.heads[h].mean);
  // Files from another baseline are refused.
  InfluenceOptions other = o;
  other.baseline_ratio = 0.2;
  EXPECT_THROW(run_influence(*model_, docs, other, dir), Error);
  // So are files made from other documents (same settings, different text).
  std::vector<std::string> swapped = {docs[1], docs[0]};
  EXPECT_THROW(run_influence(*model_, swapped, o, dir), Error);
}

TEST_F(InfluenceTest, BaselineOffTheGridIsRefused) {
  InfluenceOptions o = options();
  o.baseline_ratio = 0.07;
  const std::vector<int> ids = model_->tokenizer->encode((*docs_)[2], true);
  EXPECT_THROW(sweep_document(*model_, ids, 0, o), Error);
}

// On a model with sliding-window layers "all" is the global layers' heads; a listed sliding head is
// refused, naming it.
TEST(InfluenceHeads, AllMeansTheGlobalLayersHeads) {
  ModelConfig c;
  c.n_layers = 4;
  c.n_kv_heads = 2;
  LayerSpec local;
  local.attention = AttentionKind::Sliding;
  local.window = 8;
  c.layers = {local, LayerSpec{}, local, LayerSpec{}};
  const std::vector<HeadId> all = influence_heads("all", c);
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0], (HeadId{1, 0}));
  EXPECT_EQ(all[3], (HeadId{3, 1}));
  EXPECT_EQ(influence_heads("L3H1,L1H0", c), (std::vector<HeadId>{{3, 1}, {1, 0}}));
  try {
    influence_heads("L1H0,L2H1", c);
    FAIL() << "a sliding head was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("L2H1 is in sliding-window layer 2"), std::string::npos) << e.what();
  }
  c.layers = {};
  EXPECT_EQ(influence_heads("all", c).size(), 8u);
}

}}  // namespace
}  // namespace kvcompact
