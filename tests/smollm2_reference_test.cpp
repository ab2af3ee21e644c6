// SmolLM2-135M-Instruct (the real Q4_1 GGUF fetched by scripts/fetch_models.sh) against peers
// nobody here wrote, in the same run on the same file:
//  - llama.cpp (llama-cpp-python, vocab only): token ids on every WikiText-2 test line, the
//    needle essays, 3,000 bAbI lines and the edge cases (incl. invalid UTF-8, special tokens in
//    text);
//  - Hugging Face transformers loading the same GGUF (dequantized to float32): logits on prompts
//    of 16 to 2048 tokens (one in chat form) within 1e-3 of the largest logit, greedy 64-token
//    continuations identical, and the perplexity of the first 4096 WikiText-2 test tokens in
//    1024-token windows within 1e-3 nats/token; llama.cpp's perplexity on the same windows is
//    printed beside them (its Q4_1 kernels quantize activations to 8 bits, so it is looser).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "metrics/perplexity.h"
#include "io/gguf.h"
#include "io/gguf_tokenizer.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "python_ref.h"
#include "real_gguf_reference.h"
#include "tokenizer_cases.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::kPython;
using testing::python_ready;
using testing::run_python_ref;
using testing::slurp;
using testing::hex;

const std::string kShared = KVC_SHARED_DIR;

const testing::RealGguf kModel{"SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2"};
std::string scratch(const std::string& name) { return kModel.scratch(name); }
std::string model_path() { return kModel.model_path(); }
std::vector<int> wiki_tokens(const Tokenizer& tok, std::size_t n) { return kModel.wiki_tokens(tok, n); }

TEST(SmolLM2Reference, TokenIdsEqualLlamaCpp) { testing::expect_token_ids_equal_llama_cpp(kModel); }

/// One transformers run for the logits, greedy and perplexity comparisons (loading the GGUF
/// through transformers costs more than the forwards).
class SmolLM2Transformers : public ::testing::Test {
 protected:
  struct LogitsCase {
    std::string name;
    std::vector<int> ids;
    std::vector<int> positions;
  };

  static void SetUpTestSuite() {
    if (!python_ready("transformers torch gguf accelerate")) return;
    path_ = testing::real_model(kModel.file);
    if (path_.empty()) return;
    model_ = std::make_unique<Model>(load_model(path_));
    const Tokenizer& tok = *model_->tokenizer;
    const std::vector<int> wiki = wiki_tokens(tok, 4096);
    for (int n : {16, 64, 256, 2048}) {  // causal: the 2048 case's rows at 256, 512, ... stand for shorter forwards
      LogitsCase c{"wiki" + std::to_string(n), std::vector<int>(wiki.begin() + 7, wiki.begin() + 7 + n), {}};
      for (int k = 1; k <= 8; ++k) c.positions.push_back(n * k / 8 - 1);
      c.positions.push_back(0);
      cases_.push_back(std::move(c));
    }
    const std::string chat =
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is the capital of France? Answer in one sentence.<|im_end|>\n<|im_start|>assistant\n";
    LogitsCase c{"chat", tok.encode(chat, true), {}};
    for (int p = 0; p < static_cast<int>(c.ids.size()); p += 4) c.positions.push_back(p);
    c.positions.push_back(static_cast<int>(c.ids.size()) - 1);
    cases_.push_back(std::move(c));

    greedy_prompts_ = {cases_.back().ids, tok.encode("Once upon a time, in a small village by the sea,", true),
                       std::vector<int>(wiki.begin(), wiki.begin() + 100)};
    for (int w = 0; w < 2; ++w) windows_.emplace_back(wiki.begin() + w * 1024, wiki.begin() + (w + 1) * 1024);

    json req = {{"logits", json::array()}, {"greedy", json::array()}, {"windows", windows_}};
    for (const auto& lc : cases_) req["logits"].push_back({{"ids", lc.ids}, {"positions", lc.positions}});
    for (const auto& g : greedy_prompts_) req["greedy"].push_back({{"ids", g}, {"steps", 64}});
    const std::string in = scratch("hf_in.json");
    prefix_ = scratch("hf_out");
    std::ofstream(in) << req.dump();
    rc_ = run_python_ref("hf_gguf_forward.py", "'" + path_ + "' '" + in + "' '" + prefix_ + "'", prefix_ + ".json");
    if (rc_ == 0) ref_ = json::parse(slurp(prefix_ + ".json"));
    std::ifstream lf(prefix_ + ".logits.f32", std::ios::binary);
    std::vector<char> bytes((std::istreambuf_iterator<char>(lf)), std::istreambuf_iterator<char>());
    ref_logits_.resize(bytes.size() / sizeof(float));
    std::memcpy(ref_logits_.data(), bytes.data(), ref_logits_.size() * sizeof(float));
    if (rc_ == 0) {
      const std::string win = scratch("llama_in.json");
      std::ofstream(win) << json({{"windows", windows_}}).dump();
      if (run_python_ref("llama_cpp_nll.py", "'" + path_ + "' '" + win + "'", prefix_ + ".llama.json") == 0)
        llama_ref_ = json::parse(slurp(prefix_ + ".llama.json"));
    }
  }
  static void TearDownTestSuite() { model_.reset(); }

  void SetUp() override {
    ASSERT_TRUE(python_ready("transformers torch gguf accelerate"));
    ASSERT_FALSE(model_path().empty());
    ASSERT_EQ(rc_, 0) << "transformers reference failed: " << slurp(prefix_ + ".json.log");
  }

  void logits_within_1e3_of_largest();
  void greedy_64_tokens_identical();
  void wikitext2_perplexity_within_1e3();

  static inline std::string path_, prefix_;
  static inline std::unique_ptr<Model> model_;
  static inline std::vector<LogitsCase> cases_;
  static inline std::vector<std::vector<int>> greedy_prompts_, windows_;
  static inline int rc_ = -1;
  static inline json ref_, llama_ref_;
  static inline std::vector<float> ref_logits_;
};

void SmolLM2Transformers::logits_within_1e3_of_largest() {
  const int V = model_->config.vocab_size;
  ASSERT_EQ(ref_["vocab"].get<int>(), V);
  Transformer tr(model_->config, model_->weights);
  std::size_t row = 0;
  double worst = 0.0;
  for (const auto& c : cases_) {
    KVCache cache = tr.make_cache();
    ForwardOptions opt;
    opt.logits = LogitsMode::Rows;  // only the compared rows
    opt.logit_rows = c.positions;
    const std::vector<float> logits = tr.forward(c.ids, cache, opt);
    double case_worst = 0.0;
    for (const int& p : c.positions) {
      ASSERT_LE((row + 1) * static_cast<std::size_t>(V), ref_logits_.size());
      const float* want = ref_logits_.data() + row * V;
      const float* got = logits.data() + static_cast<std::size_t>(&p - c.positions.data()) * V;
      double scale = 0.0, diff = 0.0;
      for (int v = 0; v < V; ++v) {
        scale = std::max(scale, std::abs(static_cast<double>(want[v])));
        diff = std::max(diff, std::abs(static_cast<double>(got[v]) - want[v]));
      }
      case_worst = std::max(case_worst, diff / scale);
      EXPECT_LE(diff, 1e-3 * scale) << c.name << " position " << p;
      ++row;
    }
    std::printf("[ smollm2 ] %-8s %5zu tokens: max |logit diff| / max |logit| = %.3g\n", c.name.c_str(), c.ids.size(),
                case_worst);
    worst = std::max(worst, case_worst);
  }
  ::testing::Test::RecordProperty("max_relative_logit_diff", std::to_string(worst));
}

void SmolLM2Transformers::greedy_64_tokens_identical() {
  Transformer tr(model_->config, model_->weights);
  ASSERT_EQ(ref_["greedy"].size(), greedy_prompts_.size());
  for (std::size_t g = 0; g < greedy_prompts_.size(); ++g) {
    KVCache cache = tr.make_cache();
    std::vector<float> logits = tr.forward(greedy_prompts_[g], cache);
    std::vector<int> got;
    for (int s = 0; s < 64; ++s) {
      const int next = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      got.push_back(next);
      const int one[1] = {next};
      logits = tr.forward(one, cache);
    }
    EXPECT_EQ(got, ref_["greedy"][g].get<std::vector<int>>()) << "prompt " << g << ": kvcompact says '"
                                                              << model_->tokenizer->decode(got) << "'";
  }
}

void SmolLM2Transformers::wikitext2_perplexity_within_1e3() {
  Transformer tr(model_->config, model_->weights);
  double ours = 0.0, theirs = 0.0, llama = 0.0;
  long long n = 0, n_ref = 0;
  for (std::size_t w = 0; w < windows_.size(); ++w) {
    KVCache cache = tr.make_cache();
    const NllResult r = score_tokens(tr, cache, windows_[w]);
    ours += r.total_nll;
    n += r.tokens;
    theirs += ref_["window_nll_sum"][w].get<double>();
    n_ref += ref_["window_tokens"][w].get<long long>();
    if (!llama_ref_.is_null()) llama += llama_ref_["window_nll_sum"][w].get<double>();
  }
  ASSERT_EQ(n, n_ref);
  ASSERT_EQ(n, 2 * 1023);
  const double a = ours / n, b = theirs / n, c = llama / n;
  std::printf("[ smollm2 ] WikiText-2 test, 2 x 1024 tokens: nll kvcompact %.6f, transformers %.6f, llama.cpp %.6f "
              "nats/token\n", a, b, c);
  EXPECT_NEAR(a, b, 1e-3);
  ASSERT_FALSE(llama_ref_.is_null()) << "llama.cpp reference failed: " << slurp(prefix_ + ".llama.json.log");
  EXPECT_NEAR(a, c, 0.05) << "llama.cpp (8-bit activations in its Q4_1 dot products)";
}

// One test (one process under ctest), so transformers loads and runs the references once.
TEST_F(SmolLM2Transformers, LogitsGreedyAndPerplexityAgree) {
  {
    SCOPED_TRACE("logits within 1e-3 of the largest");
    logits_within_1e3_of_largest();
  }
  {
    SCOPED_TRACE("greedy 64 tokens identical");
    greedy_64_tokens_identical();
  }
  {
    SCOPED_TRACE("WikiText-2 perplexity within 1e-3");
    wikitext2_perplexity_within_1e3();
  }
}

}}  // namespace
}  // namespace kvcompact
