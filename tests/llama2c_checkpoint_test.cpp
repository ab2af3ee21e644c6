// llama2.c checkpoint / tokenizer readers: the real stories260K files (header and layout checked
// against SOURCES.md numbers and raw file offsets), a synthetic checkpoint with a separate
// classifier, and corrupt inputs.
#include "loaders/llama2c_checkpoint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "test_util.h"
#include "model/model.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
const std::string kDir = std::string(KVC_SHARED_DIR) + "/models/stories260K";
const std::string kBin = kDir + "/stories260K.bin";
const std::string kTok = kDir + "/tok512.bin";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string tmp_dir() {
  fs::path d = fs::path(KVC_TEST_TMP) / "llama2c";
  fs::create_directories(d);
  return d.string();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  std::string p = tmp_dir() + "/" + name;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

float float_at(const std::string& bytes, std::size_t offset) {
  float f;
  std::memcpy(&f, bytes.data() + offset, 4);
  return f;
}

using testing::expect_error;

TEST(Llama2cCheckpoint, Stories260KHeaderAndLayout) {
  const Llama2cCheckpoint ck = read_llama2c_checkpoint(kBin);
  const ModelConfig& c = ck.config;
  // SOURCES.md: dim=64, hidden_dim=172, n_layers=5, n_heads=8, n_kv_heads=4, vocab 512, seq_len 512.
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.head_dim, 8);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_TRUE(c.tied_classifier);
  EXPECT_EQ(c.rope_theta, 10000.0f);
  EXPECT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_style, RopeStyle::Interleaved);
  EXPECT_EQ(parameter_count(c), 260032);

  const ModelWeights& w = ck.weights;
  ASSERT_EQ(w.layers.size(), 5u);
  EXPECT_EQ(w.token_embedding.size(), 512u * 64);
  EXPECT_EQ(w.layers[0].wq.size(), 64u * 64);
  EXPECT_EQ(w.layers[0].wk.size(), 32u * 64);
  EXPECT_EQ(w.layers[0].w_down.size(), 64u * 172);
  EXPECT_TRUE(w.classifier.empty());

  // Raw offsets worked by hand: header 28 bytes; embedding 32768 floats; rms_att 5*64 = 320;
  // wq 5*4096 = 20480; wk 5*2048 = 10240; wv 10240; wo 20480; rms_ffn 320; w1 5*11008 = 55040;
  // w2 55040; w3 55040 -> rms_final at float 32768+320+20480+10240+10240+20480+320+3*55040 = 259968.
  const std::string raw = read_bytes(kBin);
  ASSERT_EQ(raw.size(), 1056540u);
  EXPECT_EQ(w.token_embedding[0], float_at(raw, 28));
  EXPECT_EQ(w.layers[0].attn_norm[0], float_at(raw, 28 + 4 * 32768));
  EXPECT_EQ(w.layers[1].attn_norm[0], float_at(raw, 28 + 4 * (32768 + 64)));
  EXPECT_EQ(w.layers[0].wq[1], float_at(raw, 28 + 4 * (32768 + 320 + 1)));
  EXPECT_EQ(w.layers[4].w_up.back(), float_at(raw, 28 + 4 * (259968 - 1)));
  EXPECT_EQ(w.final_norm[0], float_at(raw, 28 + 4 * 259968));
  EXPECT_EQ(w.final_norm[63], float_at(raw, 28 + 4 * 260031));
  // 264128 floats in total: 260032 parameters, then 4096 freq_cis floats (SOURCES.md).
  EXPECT_EQ(28 + 4 * (260032 + 4096), 1056540);
}

/// A tiny checkpoint: dim 4, hidden 6, 1 layer, 2 heads, 1 KV head (hs 2), vocab -5 (separate
/// classifier), seq_len 3. Float k of the body has value k.
std::string tiny_checkpoint(std::int32_t vocab = -5, std::size_t extra_floats = 0) {
  const std::int32_t h[7] = {4, 6, 1, 2, 1, vocab, 3};
  // emb 20 + rms 4 + wq 16 + wk 8 + wv 8 + wo 16 + rms 4 + w1 24 + w2 24 + w3 24 + final 4 +
  // freq 3*2 + wcls 20 = 178 (158 when the classifier is tied).
  const std::size_t n = (vocab < 0 ? 178 : 158) + extra_floats;
  std::string s(reinterpret_cast<const char*>(h), sizeof h);
  for (std::size_t k = 0; k < n; ++k) {
    float f = static_cast<float>(k);
    s.append(reinterpret_cast<const char*>(&f), 4);
  }
  return s;
}

TEST(Llama2cCheckpoint, SeparateClassifierLayout) {
  const std::string p = write_file("tiny_cls.bin", tiny_checkpoint());
  const Llama2cCheckpoint ck = read_llama2c_checkpoint(p);
  EXPECT_FALSE(ck.config.tied_classifier);
  EXPECT_EQ(ck.config.vocab_size, 5);
  EXPECT_EQ(ck.config.head_dim, 2);
  EXPECT_EQ(ck.weights.token_embedding.front(), 0.0f);
  EXPECT_EQ(ck.weights.layers[0].attn_norm.front(), 20.0f);
  EXPECT_EQ(ck.weights.layers[0].wq.front(), 24.0f);
  EXPECT_EQ(ck.weights.layers[0].wk.front(), 40.0f);
  EXPECT_EQ(ck.weights.layers[0].wv.front(), 48.0f);
  EXPECT_EQ(ck.weights.layers[0].wo.front(), 56.0f);
  EXPECT_EQ(ck.weights.layers[0].ffn_norm.front(), 72.0f);
  EXPECT_EQ(ck.weights.layers[0].w_gate.front(), 76.0f);
  EXPECT_EQ(ck.weights.layers[0].w_down.front(), 100.0f);
  EXPECT_EQ(ck.weights.layers[0].w_up.front(), 124.0f);
  EXPECT_EQ(ck.weights.final_norm.front(), 148.0f);
  ASSERT_EQ(ck.weights.classifier.size(), 20u);
  EXPECT_EQ(ck.weights.classifier.front(), 158.0f);  // freq_cis (152..157) skipped
  EXPECT_EQ(ck.weights.classifier.back(), 177.0f);
  EXPECT_EQ(ck.weights.classifier_data(), ck.weights.classifier.data());
  // 20 emb + (8 norms + 16 + 8 + 8 + 16 + 72) + 4 + 20 classifier = 172.
  EXPECT_EQ(parameter_count(ck.config), 172);

  const std::string tied = write_file("tiny_tied.bin", tiny_checkpoint(5));
  const Llama2cCheckpoint ck2 = read_llama2c_checkpoint(tied);
  EXPECT_TRUE(ck2.config.tied_classifier);
  EXPECT_TRUE(ck2.weights.classifier.empty());
  EXPECT_EQ(parameter_count(ck2.config), 152);
}

TEST(Llama2cCheckpoint, RejectsBadFiles) {
  expect_error([] { read_llama2c_checkpoint(tmp_dir() + "/does_not_exist.bin"); },
               {"does_not_exist.bin"});
  const std::string raw = read_bytes(kBin);
  const std::string trunc = write_file("stories_trunc.bin", raw.substr(0, raw.size() - 4));
  expect_error([&] { read_llama2c_checkpoint(trunc); }, {"stories_trunc.bin", "1056540", "1056536"});
  const std::string longer = write_file("stories_long.bin", raw + std::string(8, '\0'));
  expect_error([&] { read_llama2c_checkpoint(longer); }, {"stories_long.bin", "1056548"});
  expect_error([&] { read_llama2c_checkpoint(write_file("tiny10.bin", raw.substr(0, 10))); }, {"tiny10.bin"});
  expect_error([&] { read_llama2c_checkpoint(write_file("empty.bin", "")); }, {"empty.bin"});

  auto with_header = [&](int field, std::int32_t value, const std::string& name) {
    std::string b = raw;
    std::memcpy(b.data() + 4 * field, &value, 4);
    return write_file(name, b);
  };
  expect_error([&] { read_llama2c_checkpoint(with_header(3, 0, "zero_heads.bin")); }, {"zero_heads.bin", "n_heads"});
  expect_error([&] { read_llama2c_checkpoint(with_header(4, 3, "kv3.bin")); }, {"kv3.bin", "n_kv_heads"});
  expect_error([&] { read_llama2c_checkpoint(with_header(0, 80, "dim80.bin")); }, {"dim80.bin", "bytes"});
  expect_error([&] { read_llama2c_checkpoint(with_header(1, -5, "neg_hidden.bin")); }, {"neg_hidden.bin"});
  // Negative vocab on a tied-size file: a classifier is expected but absent.
  expect_error([&] { read_llama2c_checkpoint(with_header(5, -512, "neg_vocab.bin")); }, {"neg_vocab.bin", "bytes"});
  // Absurd sizes must not allocate: header claims 2^31-1 everything.
  std::string absurd = raw.substr(0, 28);
  for (int f = 0; f < 7; ++f) {
    std::int32_t v = f == 3 || f == 4 ? 1 : 0x7FFFFFFE;
    std::memcpy(absurd.data() + 4 * f, &v, 4);
  }
  expect_error([&] { read_llama2c_checkpoint(write_file("absurd.bin", absurd)); }, {"absurd.bin"});
  // A NaN weight is refused.
  std::string nan = tiny_checkpoint();
  const float qnan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(nan.data() + 28 + 4 * 30, &qnan, 4);
  expect_error([&] { read_llama2c_checkpoint(write_file("nan.bin", nan)); }, {"nan.bin", "wq"});
}

TEST(Llama2cTokenizer, ReadsTok512AndValidatesSize) {
  auto tok = read_llama2c_tokenizer(kTok, 512);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->piece(0), "<unk>");
  EXPECT_EQ(tok->piece(2), "\n</s>\n");
  EXPECT_EQ(tok->piece(3), "<0x00>");
  EXPECT_EQ(tok->piece(259), " t");
  EXPECT_EQ(tok->score(259), 0.0f);
  EXPECT_EQ(tok->score(260), -1.0f);

  expect_error([] { read_llama2c_tokenizer(kTok, 511); }, {"tok512.bin", "511"});
  expect_error([] { read_llama2c_tokenizer(kTok, 513); }, {"tok512.bin"});
  expect_error([] { read_llama2c_tokenizer(tmp_dir() + "/no_tok.bin", 512); }, {"no_tok.bin"});
  const std::string raw = read_bytes(kTok);
  expect_error([&] { read_llama2c_tokenizer(write_file("tok_trunc.bin", raw.substr(0, raw.size() - 3)), 512); },
               {"tok_trunc.bin"});
  expect_error([&] { read_llama2c_tokenizer(write_file("tok_2.bin", raw.substr(0, 2)), 512); }, {"tok_2.bin"});
  std::string neg = raw;
  const std::int32_t bad_len = -7;
  std::memcpy(neg.data() + 4 + 4, &bad_len, 4);  // token 0's length
  expect_error([&] { read_llama2c_tokenizer(write_file("tok_neg.bin", neg), 512); }, {"tok_neg.bin", "length"});
  std::string huge = raw;
  const std::int32_t huge_len = 0x7FFFFFFF;
  std::memcpy(huge.data() + 4 + 4, &huge_len, 4);
  expect_error([&] { read_llama2c_tokenizer(write_file("tok_huge.bin", huge), 512); }, {"tok_huge.bin"});
}

}}  // namespace
}  // namespace kvcompact
