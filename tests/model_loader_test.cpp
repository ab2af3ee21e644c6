// load_model / parameter_count: the llama2.c and GGUF copies of stories260K must give the same
// model (config, weights, vocabulary, token ids), and loader-level errors name the file.
#include "loaders/model_loader.h"
#include "model/model.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "io/spm_tokenizer.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
const std::string kDir = std::string(KVC_SHARED_DIR) + "/models/stories260K";
const std::string kBin = kDir + "/stories260K.bin";
const std::string kGguf = kDir + "/stories260K.gguf";
const std::string kTok = kDir + "/tok512.bin";
const std::string kText = std::string(KVC_SHARED_DIR) + "/data/tinystories/tinystories_val_head.txt";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_dir(const std::string& sub) {
  fs::path d = fs::path(KVC_TEST_TMP) / "model_loader" / sub;
  fs::create_directories(d);
  return d.string();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

using testing::expect_error;

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  float m = 0.0f;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return a.size() == b.size() ? m : INFINITY;
}

class LoaderStories260K : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bin_ = new Model(load_model(kBin));
    gguf_ = new Model(load_model(kGguf));
  }
  static void TearDownTestSuite() {
    delete bin_;
    delete gguf_;
  }
  static Model* bin_;
  static Model* gguf_;
};
Model* LoaderStories260K::bin_ = nullptr;
Model* LoaderStories260K::gguf_ = nullptr;

TEST_F(LoaderStories260K, ParameterCountMatchesPublishedNumber) {
  EXPECT_EQ(parameter_count(bin_->config), 260032);  // SOURCES.md
  EXPECT_EQ(parameter_count(gguf_->config), 260032);
  EXPECT_EQ(bin_->path, kBin);
  EXPECT_EQ(gguf_->path, kGguf);
}

TEST_F(LoaderStories260K, BinAndGgufConfigsAgree) {
  const ModelConfig& a = bin_->config;
  const ModelConfig& b = gguf_->config;
  EXPECT_EQ(a.architecture, b.architecture);
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.hidden_dim, b.hidden_dim);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.rope_theta, b.rope_theta);
  EXPECT_EQ(a.norm_eps, b.norm_eps);
  EXPECT_EQ(a.rope_style, b.rope_style);
  EXPECT_EQ(a.tied_classifier, b.tied_classifier);  // GGUF's output.weight is a copy of token_embd
  // The one documented difference: the llama2.c header says seq_len 512, GGUF context_length 2048.
  EXPECT_EQ(a.max_seq_len, 512);
  EXPECT_EQ(b.max_seq_len, 2048);
}

TEST_F(LoaderStories260K, BinAndGgufWeightsIdentical) {
  const ModelWeights& a = bin_->weights;
  const ModelWeights& b = gguf_->weights;
  EXPECT_EQ(max_abs_diff(a.token_embedding, b.token_embedding), 0.0f);
  EXPECT_EQ(max_abs_diff(a.final_norm, b.final_norm), 0.0f);
  EXPECT_TRUE(b.classifier.empty());
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    SCOPED_TRACE("layer " + std::to_string(l));
    const LayerWeights& x = a.layers[l];
    const LayerWeights& y = b.layers[l];
    EXPECT_EQ(max_abs_diff(x.attn_norm, y.attn_norm), 0.0f);
    EXPECT_EQ(max_abs_diff(x.wq, y.wq), 0.0f);
    EXPECT_EQ(max_abs_diff(x.wk, y.wk), 0.0f);
    EXPECT_EQ(max_abs_diff(x.wv, y.wv), 0.0f);
    EXPECT_EQ(max_abs_diff(x.wo, y.wo), 0.0f);
    EXPECT_EQ(max_abs_diff(x.ffn_norm, y.ffn_norm), 0.0f);
    EXPECT_EQ(max_abs_diff(x.w_gate, y.w_gate), 0.0f);
    EXPECT_EQ(max_abs_diff(x.w_down, y.w_down), 0.0f);
    EXPECT_EQ(max_abs_diff(x.w_up, y.w_up), 0.0f);
  }
  // Sanity that the comparison can fail: weights are not all zero and differ across tensors.
  EXPECT_GT(max_abs_diff(a.layers[0].wq, a.layers[1].wq), 0.0f);
}

TEST_F(LoaderStories260K, BinAndGgufVocabulariesAndIdsIdentical) {
  const Tokenizer& a = *bin_->tokenizer;
  const Tokenizer& b = *gguf_->tokenizer;
  ASSERT_EQ(a.vocab_size(), 512);
  ASSERT_EQ(b.vocab_size(), 512);
  EXPECT_EQ(a.bos_id(), b.bos_id());
  EXPECT_EQ(a.eos_id(), b.eos_id());
  // The GGUF vocabulary runs llama.cpp's SPM session (io/gguf_tokenizer.h), the .bin one llama2.c's
  // encoder: same pieces, and (below) the same ids on the whole text.
  ASSERT_NE(dynamic_cast<const SpmTokenizer*>(&a), nullptr);
  for (int i = 0; i < 512; ++i) ASSERT_EQ(a.piece(i), b.piece(i)) << "token " << i;
  EXPECT_EQ(b.piece(259), " t");  // U+2581 replaced by a space
  const std::string text = read_bytes(kText);
  ASSERT_EQ(text.size(), 794375u);
  const std::vector<int> ia = a.encode(text, true);
  const std::vector<int> ib = b.encode(text, true);
  EXPECT_EQ(ia, ib);
  EXPECT_GT(ia.size(), 100000u);
}

TEST(ModelLoader, ExplicitTokenizerAndDefaultSearch) {
  Model m = load_model(kBin, kTok);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
  // A copy of the checkpoint in a folder holding tokenizer.bin (not tok512.bin) finds it.
  const std::string dir = tmp_dir("with_tokenizer_bin");
  write_file(dir + "/model.bin", read_bytes(kBin));
  write_file(dir + "/tokenizer.bin", read_bytes(kTok));
  Model m2 = load_model(dir + "/model.bin");
  EXPECT_EQ(m2.tokenizer->piece(265), " the");
}

TEST(ModelLoader, Errors) {
  expect_error([] { load_model(tmp_dir("x") + "/absent.bin"); }, {"absent.bin"});
  expect_error([] { load_model(tmp_dir("x") + "/absent.gguf"); }, {"absent.gguf"});
  // A checkpoint alone in its folder: no tokenizer -> error naming the folder.
  const std::string dir = tmp_dir("no_tokenizer");
  write_file(dir + "/model.bin", read_bytes(kBin));
  expect_error([&] { load_model(dir + "/model.bin"); }, {"no_tokenizer", "tok512.bin"});
  expect_error([&] { load_model(dir + "/model.bin", dir + "/missing_tok.bin"); }, {"missing_tok.bin"});
  // A GGUF read as a llama2.c checkpoint (wrong suffix) is refused, not misread.
  write_file(dir + "/gguf_as.bin", read_bytes(kGguf));
  expect_error([&] { load_model(dir + "/gguf_as.bin", kTok); }, {"gguf_as.bin"});
  // A llama2.c checkpoint named .gguf: wrong magic.
  write_file(dir + "/bin_as.gguf", read_bytes(kBin));
  expect_error([&] { load_model(dir + "/bin_as.gguf"); }, {"bin_as.gguf", "magic"});
  // Truncated GGUF (inside the tensor data).
  const std::string g = read_bytes(kGguf);
  write_file(dir + "/trunc.gguf", g.substr(0, g.size() - 100));
  expect_error([&] { load_model(dir + "/trunc.gguf"); }, {"trunc.gguf"});
  // GGUF with a tensor of the wrong shape: patch token_embd's ne[1] (512 -> 511).
  {
    std::string b = g;
    const std::string name = "token_embd.weight";
    const std::size_t pos = b.find(name);
    ASSERT_NE(pos, std::string::npos);
    const std::uint64_t ne1 = 511;
    std::memcpy(b.data() + pos + name.size() + 4 + 8, &ne1, 8);
    write_file(dir + "/shape.gguf", b);
    expect_error([&] { load_model(dir + "/shape.gguf"); }, {"shape.gguf", "token_embd.weight"});
  }
  // Wrong vocabulary size for the checkpoint: the 32000-token tokenizer.
  const std::string big_tok = std::string(KVC_SHARED_DIR) + "/models/llama2c-tokenizer/tokenizer.bin";
  if (fs::exists(big_tok)) {
    expect_error([&] { load_model(kBin, big_tok); }, {"tokenizer.bin"});
  }
}

TEST(ModelLoader, ParameterCountFormula) {
  ModelConfig c;
  c.dim = 10;
  c.hidden_dim = 20;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.head_dim = 5;
  c.vocab_size = 7;
  c.tied_classifier = true;
  // 70 emb + 2 * (20 norms + 100 wq + 2*50 wk/wv + 100 wo + 600 ffn) + 10 final = 1920.
  EXPECT_EQ(parameter_count(c), 1920);
  c.tied_classifier = false;
  EXPECT_EQ(parameter_count(c), 1990);
}

}}  // namespace
}  // namespace kvcompact
