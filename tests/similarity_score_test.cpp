// Similarity scorer runner (metrics/similarity_score.h) with a fake Python that answers like the
// scorer, its errors, and Cognitive Mirrors' accuracy rule (tasks/answer_scoring.h).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tasks/answer_scoring.h"
#include "metrics/similarity_score.h"
#include "core/error.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

std::string make_dir(const std::string& name) {
  const std::string dir = std::string(KVC_TEST_TMP) + "/" + std::to_string(static_cast<long>(getpid())) + "_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::string write_script(const std::string& dir, const std::string& body) {
  const std::string path = dir + "/python";
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(CognitiveMirrorsRule, AnyMetricAboveItsThresholdIsCorrect) {
  EXPECT_FALSE(cognitive_mirrors_correct(0.8, 0.6, 0.6));  // strict inequalities
  EXPECT_TRUE(cognitive_mirrors_correct(0.81, 0, 0));
  EXPECT_TRUE(cognitive_mirrors_correct(0, 0.61, 0));
  EXPECT_TRUE(cognitive_mirrors_correct(0, 0, 0.61));
  EXPECT_FALSE(cognitive_mirrors_correct(0.79, 0.59, -1));
  EXPECT_TRUE(cognitive_mirrors_correct(1, 1, 1));
}

TEST(SimilarityScore, RunsTheScriptAndParsesItsScores) {
  const std::string dir = make_dir("sim_fake");
  // The fake checks it was handed the embedded scorer and the requests, then answers.
  const std::string py = write_script(dir,
                                      "grep -q 'def rouge1' \"$1\" || exit 9\n"
                                      "grep -q '\"metric\":\"bleu\"' \"$2\" || exit 8\n"
                                      "grep -q '\"embedding_model\":\"/m\"' \"$2\" || exit 7\n"
                                      "echo '{\"scores\": [[1.0, 0.25], [0.5]]}'\n");
  SimilarityOptions o;
  o.python = py;
  o.embedding_model = "/m";
  const auto got = similarity_scores({{"bleu", {"a b c d", "x"}, {"a b c d", "y"}}, {"cosine", {"p"}, {"q"}}}, o);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (std::vector<double>{1.0, 0.25}));
  EXPECT_EQ(got[1], (std::vector<double>{0.5}));
  EXPECT_NE(std::string(similarity_scorer_source()).find("smooth_method=\"none\""), std::string::npos);
  EXPECT_TRUE(similarity_scores({}, o).empty());
}

TEST(SimilarityScore, ErrorsAreOneLine) {
  const std::string dir = make_dir("sim_err");
  SimilarityOptions o;
  o.python = dir + "/no_such_python";
  try {
    similarity_scores({{"bleu", {"a"}, {"a"}}}, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "similarity scorer: Python " + dir + "/no_such_python not found");
  }
  o.python = write_script(dir,
                          "echo 'similarity scorer: Python package sacrebleu==2.6.0 is not installed in x' >&2\n"
                          "exit 3\n");
  try {
    similarity_scores({{"bleu", {"a"}, {"a"}}}, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), o.python +
                                         " exited with status 3: similarity scorer: Python package sacrebleu==2.6.0 is "
                                         "not installed in x");
  }
  EXPECT_THROW(similarity_scores({{"meteor", {"a"}, {"a"}}}, o), Error);
  EXPECT_THROW(similarity_scores({{"bleu", {"a", "b"}, {"a"}}}, o), Error);
  EXPECT_THROW(parse_similarity_output("not json", {1}), Error);
  EXPECT_THROW(parse_similarity_output("{\"scores\": [[1, 2]]}", {1}), Error);
  EXPECT_THROW(parse_similarity_output("{\"scores\": [[\"x\"]]}", {1}), Error);
  EXPECT_THROW(parse_similarity_output("{\"scores\": []}", {1}), Error);
  EXPECT_EQ(parse_similarity_output("{\"scores\": [[0.5]]}", {1}), (std::vector<std::vector<double>>{{0.5}}));
}

}}  // namespace
}  // namespace kvcompact
