// QA JSONL reader (QuALITY format) and the QA evaluation over compacted caches.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "metrics/continuation_nll.h"
#include "metrics/perplexity.h"
#include "studies/qa_eval.h"
#include "core/error.h"
#include "io/qa_dataset.h"
#include "io/text_documents.h"
#include "model/generate_from_cache.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/sampler.h"
#include "model/transformer.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

const std::string kShared = KVC_SHARED_DIR;
const std::string kBin = kShared + "/models/stories260K/stories260K.bin";

const Model& stories() {
  static const Model m = load_model(kBin);
  return m;
}

void expect_error(const std::string& text, const std::string& needle1, const std::string& needle2) {
  try {
    parse_qa_jsonl(text, "qa.jsonl");
    ADD_FAILURE() << "no error for " << text;
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find(needle1), std::string::npos) << msg;
    EXPECT_NE(msg.find(needle2), std::string::npos) << msg;
  }
}

TEST(QaDataset, ParsesQualityReleaseShape) {
  const std::string text =
      R"({"article_id": "a1", "title": "T", "article": "<p>Tom &amp; Sue</p><p>went<br/>home.</p>", "questions": [{"question": "Who?", "options": ["Tom", "Sue", "Max"], "gold_label": 2}]})"
      "\n\n"
      R"({"article": ["Plain ", "text."], "questions": [{"question": "Q", "options": ["a", "b"], "gold_label": "1"}]})"
      "\n";
  const auto arts = parse_qa_jsonl(text, "qa.jsonl");
  ASSERT_EQ(arts.size(), 2u);
  EXPECT_EQ(arts[0].id, "a1");
  EXPECT_EQ(arts[0].title, "T");
  EXPECT_EQ(arts[0].article, "Tom & Sue\n\nwent\n\nhome.");
  ASSERT_EQ(arts[0].questions.size(), 1u);
  EXPECT_EQ(arts[0].questions[0].options.size(), 3u);
  EXPECT_EQ(arts[0].questions[0].gold_label, 2);
  EXPECT_EQ(arts[1].line, 3);
  EXPECT_EQ(arts[1].id, "line 3");
  EXPECT_EQ(arts[1].article, "Plain text.");
  EXPECT_EQ(arts[1].questions[0].gold_label, 1);
  // Writer -> reader round trip.
  const auto back = parse_qa_jsonl(qa_article_to_jsonl(arts[0]), "x");
  EXPECT_EQ(back[0].article, arts[0].article);
  EXPECT_EQ(back[0].questions[0].options, arts[0].questions[0].options);
}

TEST(QaDataset, MissingOrBadFieldsNameTheLine) {
  const std::string ok = R"({"article": "x", "questions": [{"question": "q", "options": ["a", "b"], "gold_label": 1}]})";
  expect_error(ok + "\n" + R"({"questions": []})", "qa.jsonl:2", "missing field 'article'");
  expect_error(ok + "\n\n" + R"({"article": "x"})", "qa.jsonl:3", "missing field 'questions'");
  expect_error(R"({"article": "x", "questions": [{"question": "q", "options": ["a", "b"]}]})", "qa.jsonl:1",
               "questions[0].gold_label");
  expect_error(R"({"article": "x", "questions": [{"question": "q", "gold_label": 1}]})", ":1", "questions[0].options");
  expect_error(R"({"article": "x", "questions": [{"options": ["a", "b"], "gold_label": 1}]})", ":1", "questions[0].question");
  expect_error(R"({"article": "x", "questions": [{"question": "q", "options": ["a", "b"], "gold_label": 3}]})", ":1",
               "not in 1..2");
  expect_error(R"({"article": "x", "questions": [{"question": "q", "options": ["a"], "gold_label": 1}]})", ":1",
               "at least 2 options");
  expect_error(R"({"article": "x", "question1": "q", "question1option1": "a", "question1option2": "b"})", ":1",
               "question1_gold_label");
  expect_error("{\"article\": ", "qa.jsonl:1", "invalid JSON");
  expect_error("\n\n", "qa.jsonl", "no article");
}

TEST(QaDataset, ReadsTheQualityExampleFile) {
  const auto arts = read_qa_jsonl(kShared + "/data/quality/quality_example_one_article.jsonl");
  ASSERT_EQ(arts.size(), 1u);
  EXPECT_EQ(arts[0].id, "52845");
  EXPECT_EQ(arts[0].title, "The Girl in His Mind");
  EXPECT_EQ(arts[0].article.rfind("THE GIRL IN HIS MIND\n\nBy ROBERT F. YOUNG", 0), 0u) << arts[0].article.substr(0, 80);
  EXPECT_EQ(arts[0].article.find('<'), std::string::npos);
  ASSERT_EQ(arts[0].questions.size(), 5u);
  const int gold[5] = {2, 3, 4, 1, 4};  // question{1..5}_gold_label in the file
  for (int q = 0; q < 5; ++q) {
    EXPECT_EQ(arts[0].questions[q].gold_label, gold[q]);
    EXPECT_EQ(arts[0].questions[q].options.size(), 4u);
  }
  EXPECT_EQ(arts[0].questions[3].question, "Sabrina York is ");
  EXPECT_EQ(arts[0].questions[3].options[0], "a criminal that Blake is hunting");
}

TEST(QaEval, OptionLogLikelihoodsMatchPlainScoring) {
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  const std::vector<int> ctx = m.tokenizer->encode("Lily had a red ball. She liked to play.", true);
  KVCache cache = tr.make_cache();
  const std::vector<float> last = tr.forward(ctx, cache);
  const std::vector<int> prompt = m.tokenizer->encode("Lily had a red", false);
  const std::vector<std::string> opts = {"ball", "cat"};
  const std::vector<double> ll = option_log_likelihoods(tr, *m.tokenizer, cache, last, prompt, opts);
  ASSERT_EQ(ll.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    // Reference: score context + prompt + option from scratch, subtract context + prompt.
    std::vector<int> all = ctx;
    all.insert(all.end(), prompt.begin(), prompt.end());
    const double base = score_tokens(tr, all).total_nll;
    const std::vector<int> o = m.tokenizer->encode(opts[i], false);
    all.insert(all.end(), o.begin(), o.end());
    EXPECT_NEAR(ll[i], -(score_tokens(tr, all).total_nll - base), 1e-3);
  }
  EXPECT_GT(ll[0], ll[1]);  // "ball" was said a sentence ago
  EXPECT_EQ(best_option({-3.0, -1.0, -1.0, -2.0}), 1);
  EXPECT_THROW(best_option({}), Error);
}

/// One article whose gold option is the full model's own greedy continuation of the question
/// and whose distractors are letter salad: the answer is forced.
QaArticle forced_article(int gold_label) {
  const Model& m = stories();
  Transformer tr(m.config, m.weights);
  QaArticle a;
  a.id = "forced";
  a.article = "Once upon a time, there was a little girl named Lily. She had a big red ball. "
              "Lily liked to play with her ball in the park every day.";
  a.prompt_template = "{question}";
  const std::vector<std::string> qs = {"One day, Lily went to the", "Lily had a big red"};
  for (const auto& qtext : qs) {
    const std::vector<int> ids = m.tokenizer->encode(a.article, true);
    KVCache c = tr.make_cache();
    const std::vector<float> last = tr.forward(ids, c);
    Sampler greedy(m.config.vocab_size, 0.0f, 1.0f, 1);
    ContinueOptions o;
    o.max_new_tokens = 3;
    const GenerationResult g = generate_from_cache(tr, *m.tokenizer, c, last, ids.back(), qtext, greedy, o);
    QaQuestion q;
    q.question = qtext;
    q.options = {"zqxj vvkp", "qqjx zzv", "xkvq jjzq"};
    q.options.insert(q.options.begin() + (gold_label - 1), m.tokenizer->decode(g.generated));
    q.gold_label = gold_label;
    a.questions.push_back(q);
  }
  return a;
}

TEST(QaEval, ForcedAnswerIsChosenAndFullRatioRecentIsExact) {
  QaEvalOptions opt;
  opt.methods = {"recent", "am"};
  opt.ratios = {1.0, 0.25};
  opt.max_answer_tokens = 8;
  opt.progress = false;
  const QaEvalResult r = run_qa_eval(stories(), {forced_article(3)}, opt);
  ASSERT_EQ(r.rows.size(), 5u);
  EXPECT_EQ(r.questions, 2);
  EXPECT_EQ(r.rows[0].method, "full");
  EXPECT_EQ(r.rows[0].mc_accuracy, 1.0);
  EXPECT_EQ(r.rows[0].delta_answer_nll_mean, 0.0);
  EXPECT_GT(r.rows[0].answer_nll_mean, 0.0);
  // recent at ratio 1 keeps every entry: the same numbers as the full cache.
  EXPECT_EQ(r.rows[1].method, "recent");
  EXPECT_EQ(r.rows[1].ratio, 1.0);
  EXPECT_DOUBLE_EQ(r.rows[1].answer_nll_mean, r.rows[0].answer_nll_mean);
  EXPECT_EQ(r.rows[1].delta_answer_nll_mean, 0.0);
  EXPECT_EQ(r.rows[1].mc_accuracy, 1.0);
  EXPECT_EQ(r.rows[1].kept_entries, r.rows[0].kept_entries);
  // recent at 0.25 keeps a quarter of the entries and costs NLL on the greedy answers.
  EXPECT_LT(r.rows[2].kept_entries, r.rows[0].kept_entries / 3);
  EXPECT_NE(r.rows[2].delta_answer_nll_mean, 0.0);
  for (const auto& row : r.rows) EXPECT_EQ(row.questions, 2);
  // Reference answers: the greedy continuation of the full model (first 3 tokens are the gold option).
  ASSERT_EQ(r.reference_answers.size(), 2u);
  EXPECT_EQ(r.reference_answers[0].text.rfind(forced_article(3).questions[0].options[2], 0), 0u)
      << r.reference_answers[0].text;

  // A wrong gold label (pointing at letter salad) gives accuracy 0: the metric can fail.
  QaArticle wrong = forced_article(3);
  for (auto& q : wrong.questions) q.gold_label = 1;
  opt.methods = {"recent"};
  opt.ratios = {1.0};
  const QaEvalResult w = run_qa_eval(stories(), {wrong}, opt);
  EXPECT_EQ(w.rows[0].mc_accuracy, 0.0);
  EXPECT_EQ(w.rows[0].mc_correct, 0);
}

TEST(QaEval, ReferenceAnswersAreCachedOnDiskAndReused) {
  const std::string dir = std::string(KVC_TEST_TMP) + "/qa_answers";
  std::filesystem::remove_all(dir);
  QaEvalOptions opt;
  opt.methods = {"am"};
  opt.ratios = {0.5};
  opt.max_answer_tokens = 6;
  opt.answers_cache_dir = dir;
  opt.progress = false;
  const QaArticle a = forced_article(1);
  const QaEvalResult r1 = run_qa_eval(stories(), {a}, opt);
  EXPECT_EQ(r1.answers_generated, 2);
  EXPECT_EQ(r1.answers_reused, 0);
  const QaEvalResult r2 = run_qa_eval(stories(), {a}, opt);
  EXPECT_EQ(r2.answers_generated, 0);
  EXPECT_EQ(r2.answers_reused, 2);
  ASSERT_EQ(r1.rows.size(), r2.rows.size());
  for (std::size_t i = 0; i < r1.rows.size(); ++i)
    EXPECT_EQ(r1.rows[i].answer_nll_mean, r2.rows[i].answer_nll_mean);
  // A different answer length is a different key: generated again.
  opt.max_answer_tokens = 5;
  EXPECT_EQ(run_qa_eval(stories(), {a}, opt).answers_generated, 2);
  // A corrupt cache file is refused, naming it.
  for (const auto& e : std::filesystem::directory_iterator(dir)) std::ofstream(e.path()) << "{not json";
  EXPECT_THROW(run_qa_eval(stories(), {a}, opt), Error);
}

TEST(QaEval, LongArticleIsTruncatedWithANote) {
  QaArticle a = forced_article(1);
  QaEvalOptions opt;
  opt.methods = {"am"};
  opt.ratios = {0.5};
  opt.max_context_tokens = 12;
  opt.progress = false;
  const QaEvalResult r = run_qa_eval(stories(), {a}, opt);
  EXPECT_EQ(r.mean_context_tokens, 12.0);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("truncated"), std::string::npos);
  opt.methods = {"nope"};
  EXPECT_THROW(run_qa_eval(stories(), {a}, opt), Error);
}

// An option that encodes to no tokens (here the empty string) names the file, the line, the
// article, the question and the option.
TEST(QaEval, OptionWithoutTokensNamesFileAndLine) {
  const auto arts = parse_qa_jsonl(
      "\n" R"({"article_id": "a9", "article": "Lily saw a cat.", "questions": [{"question": "Who?", "options": ["Lily", "Tom"], "gold_label": 1}, {"question": "What?", "options": ["cat", ""], "gold_label": 1}]})",
      "data/qa_empty_option.jsonl");
  ASSERT_EQ(arts.size(), 1u);
  QaEvalOptions opt;
  opt.progress = false;
  try {
    tokenize_qa_article(stories(), arts[0], opt);
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("data/qa_empty_option.jsonl:2:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("article a9 question 2"), std::string::npos) << msg;
    EXPECT_NE(msg.find("option 2 (\"\") encodes to no tokens"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

TEST(QaEval, BudgetsShareTheTotalKeysByTheirProportions) {
  const ModelConfig& c = stories().config;
  const int heads = c.n_layers * c.n_kv_heads;
  QaEvalOptions opt;
  opt.methods = {"am"};
  opt.ratios = {0.25};
  opt.max_answer_tokens = 8;
  opt.progress = false;
  const QaArticle art = forced_article(3);
  const QaEvalResult plain = run_qa_eval(stories(), {art}, opt);
  const int T = plain.rows[0].kept_entries / heads;  // full cache: every head holds the context
  ASSERT_EQ(plain.rows[0].kept_entries, static_cast<double>(T) * heads);
  // Uniform proportions: the heads share round(0.25 * T * heads) keys.
  opt.budget_proportions.assign(static_cast<std::size_t>(heads), 1.0 / heads);
  const QaEvalResult uni = run_qa_eval(stories(), {art}, opt);
  EXPECT_EQ(uni.rows[1].kept_entries, std::round(0.25 * T * heads));
  // Everything on the last layer's heads: same total keys, other layers empty, another NLL.
  std::fill(opt.budget_proportions.begin(), opt.budget_proportions.end(), 0.0);
  for (int h = 0; h < c.n_kv_heads; ++h)
    opt.budget_proportions[static_cast<std::size_t>((c.n_layers - 1) * c.n_kv_heads + h)] = 1.0 / c.n_kv_heads;
  const QaEvalResult top = run_qa_eval(stories(), {art}, opt);
  EXPECT_EQ(top.rows[1].kept_entries, uni.rows[1].kept_entries);
  EXPECT_NE(top.rows[1].answer_nll_mean, uni.rows[1].answer_nll_mean);
  EXPECT_EQ(top.rows[0].answer_nll_mean, uni.rows[0].answer_nll_mean);  // the full row does not move
  // Proportions for another shape are refused, naming both sizes.
  opt.budget_proportions.pop_back();
  try {
    run_qa_eval(stories(), {art}, opt);
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fmt::format("list {} heads, the model has {}", heads - 1, heads)),
              std::string::npos) << e.what();
  }
}

}}  // namespace
}  // namespace kvcompact
