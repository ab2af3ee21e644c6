// Reference-query sources on the real stories260K model: counts, caps, reproducibility.
#include "compaction/reference_queries.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/error.h"
#include "io/text_documents.h"
#include "loaders/model_loader.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

class ReferenceQueriesTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(load_model(std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.bin"));
    auto docs = read_documents(std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt", 3);
    ids_ = new std::vector<int>(model_->tokenizer->encode(docs[2], true));
    ids_->resize(30);
  }
  static void TearDownTestSuite() {
    delete model_;
    delete ids_;
  }
  static Model* model_;
  static std::vector<int>* ids_;
};
Model* ReferenceQueriesTest::model_ = nullptr;
std::vector<int>* ReferenceQueriesTest::ids_ = nullptr;

double row_norm(const std::vector<float>& rows, int i, int d) {
  double ss = 0;
  for (int j = 0; j < d; ++j) ss += double(rows[i * d + j]) * rows[i * d + j];
  return std::sqrt(ss);
}

TEST_F(ReferenceQueriesTest, ContextAndRepeatCounts) {
  Transformer tr(model_->config, model_->weights);
  QueryPlan plan;
  plan.spec.sources = {{QuerySourceKind::Repeat, 0}, {QuerySourceKind::Context, 0}};
  ContextPrefill p = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  for (int l = 0; l < 5; ++l)
    for (int h = 0; h < 4; ++h) {
      EXPECT_EQ(p.context_queries.count(l, h), 2 * 30);
      EXPECT_EQ(p.queries.count(l, h), 2 * 29 + 2 * 30);
    }
  // The context source's rows are the context queries, appended after the repeat rows.
  const auto& all = p.queries.at(3, 1);
  const auto& ctx = p.context_queries.at(3, 1);
  EXPECT_TRUE(std::equal(ctx.begin(), ctx.end(), all.end() - ctx.size()));
  // Same as repeat_prefill for the repeat part.
  ContextPrefill r = repeat_prefill(tr, *model_->tokenizer, *ids_);
  EXPECT_TRUE(std::equal(r.queries.at(3, 1).begin(), r.queries.at(3, 1).end(), all.begin()));
}

TEST_F(ReferenceQueriesTest, CapsSubsampleRowsInOrder) {
  Transformer tr(model_->config, model_->weights);
  QueryPlan plan;
  plan.spec.sources = {{QuerySourceKind::Context, 0}};
  plan.spec.total_cap = 0;
  ContextPrefill full = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  plan.spec.sources = {{QuerySourceKind::Context, 25}};
  plan.seed = 3;
  ContextPrefill capped = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  const int d = 8;
  for (int l = 0; l < 5; ++l)
    for (int h = 0; h < 4; ++h) {
      ASSERT_EQ(capped.queries.count(l, h), 25);
      // every kept row is an original row, and they appear in increasing original order
      const auto& a = full.queries.at(l, h);
      const auto& b = capped.queries.at(l, h);
      int last = -1;
      for (int i = 0; i < 25; ++i) {
        int found = -1;
        for (int j = last + 1; j < 60 && found < 0; ++j)
          if (std::equal(b.begin() + i * d, b.begin() + (i + 1) * d, a.begin() + j * d)) found = j;
        ASSERT_GE(found, 0) << "row " << i << " of L" << l << "H" << h;
        last = found;
      }
    }
  plan.spec.sources = {{QuerySourceKind::Context, 0}, {QuerySourceKind::Repeat, 0}};
  plan.spec.total_cap = 40;
  ContextPrefill total = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  EXPECT_EQ(total.queries.count(0, 0), 40);
}

TEST_F(ReferenceQueriesTest, RandomQueriesTakeRealNorms) {
  Transformer tr(model_->config, model_->weights);
  QueryPlan plan;
  plan.spec.sources = {{QuerySourceKind::Random, 0}};
  plan.random_count = 50;
  plan.seed = 9;
  ContextPrefill p = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  const int d = 8;
  const auto& real = p.context_queries.at(2, 3);
  std::set<long long> real_norms;
  for (int i = 0; i < 60; ++i) real_norms.insert(std::llround(row_norm(real, i, d) * 1e4));
  ASSERT_EQ(p.queries.count(2, 3), 50);
  for (int i = 0; i < 50; ++i)
    EXPECT_TRUE(real_norms.count(std::llround(row_norm(p.queries.at(2, 3), i, d) * 1e4))) << i;
  ContextPrefill again = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  EXPECT_EQ(again.queries.at(2, 3), p.queries.at(2, 3));
}

TEST_F(ReferenceQueriesTest, SelfStudyIsSeededAndBounded) {
  Transformer tr(model_->config, model_->weights);
  QueryPlan plan;
  plan.spec.sources = {{QuerySourceKind::SelfStudy, 0}};
  plan.self_study.count = 2;
  plan.self_study.length = 10;
  plan.self_study.prompts = {"", " Then"};
  plan.seed = 5;
  ContextPrefill a = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  ContextPrefill b = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  const int n = a.queries.count(1, 1);
  EXPECT_GT(n, 0);
  // group size 2 x (2 generations x 10 sampled tokens fed + the prompt " Then" of the second)
  const int prompt = static_cast<int>(model_->tokenizer->encode(" Then", false).size());
  EXPECT_LE(n, 2 * (2 * 10 + prompt));
  EXPECT_GE(n, 2 * prompt);
  EXPECT_EQ(a.queries.at(1, 1), b.queries.at(1, 1));
  plan.seed = 6;
  ContextPrefill c = collect_reference_queries(tr, *model_->tokenizer, *ids_, plan);
  EXPECT_NE(a.queries.at(4, 0), c.queries.at(4, 0));
}

TEST_F(ReferenceQueriesTest, BadPlansThrow) {
  Transformer tr(model_->config, model_->weights);
  QueryPlan plan;
  plan.spec.sources.clear();
  EXPECT_THROW(collect_reference_queries(tr, *model_->tokenizer, *ids_, plan), Error);
  plan.spec.sources = {{QuerySourceKind::Context, -1}};
  EXPECT_THROW(collect_reference_queries(tr, *model_->tokenizer, *ids_, plan), Error);
  EXPECT_EQ(query_source_name(QuerySourceKind::SelfStudy), "self-study");
}

}}  // namespace
}  // namespace kvcompact
