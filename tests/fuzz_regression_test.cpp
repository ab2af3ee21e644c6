// Inputs found by the libFuzzer harnesses (fuzz/*_fuzz.cpp, scripts/fuzz.sh), minimised, each
// fed to the parser the harness drives: the parser must throw the kvcompact::Error named here (or,
// where the input is valid, parse it) instead of crashing, allocating without bound or hitting
// undefined behaviour. The undefined-behaviour cases fail only in the sanitizer build
// (build-asan, KVC_SANITIZE), where .ci/run runs this suite too.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"
#include "loaders/hf_config.h"
#include "io/hf_tokenizer.h"
#include "io/json_number.h"
#include "loaders/kvc_file.h"
#include "loaders/llama2c_checkpoint.h"
#include "tasks/task_suite.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "test_util.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using testing::expect_error;

/// Writes `bytes` to a per-process scratch file and returns its path.
std::string scratch(const std::string& name, const std::string& bytes) {
  const std::filesystem::path dir =
      std::filesystem::path(KVC_TEST_TMP) / ("fuzz_regression_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / name).string();
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

/// A GGUF v3 file (gguf.md layout): metadata of u32 / f32 / string values, then F32 tensors
/// (ggml dims) with zero data, 32-byte aligned.
struct TinyGguf {
  std::string kv, infos, data;
  std::uint64_t n_kv = 0, n_tensors = 0;
  template <typename T>
  static void put(std::string& s, T v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
  static void put_str(std::string& s, const std::string& v) { put<std::uint64_t>(s, v.size()), s += v; }
  void u32(const std::string& key, std::uint32_t v) { put_str(kv, key), put<std::uint32_t>(kv, 4), put(kv, v), ++n_kv; }
  void f32(const std::string& key, float v) { put_str(kv, key), put<std::uint32_t>(kv, 6), put(kv, v), ++n_kv; }
  void str(const std::string& key, const std::string& v) { put_str(kv, key), put<std::uint32_t>(kv, 8), put_str(kv, v), ++n_kv; }
  void tensor_f32(const std::string& name, const std::vector<std::uint64_t>& dims) {
    put_str(infos, name);
    put<std::uint32_t>(infos, static_cast<std::uint32_t>(dims.size()));
    std::uint64_t n = 1;
    for (auto d : dims) put(infos, d), n *= d;
    put<std::uint32_t>(infos, 0);  // F32
    put<std::uint64_t>(infos, data.size());
    data.append(n * 4, '\0');
    data.append((32 - data.size() % 32) % 32, '\0');
    ++n_tensors;
  }
  std::string bytes() const {
    std::string s = "GGUF";
    put<std::uint32_t>(s, 3), put(s, n_tensors), put(s, n_kv);
    s += kv + infos;
    s.append((32 - s.size() % 32) % 32, '\0');
    return s + data;
  }
};

// gguf_model_fuzz: llama.block_count 2^31-1 in a file with one tensor made load_gguf_model
// allocate 2^31 LayerWeights (malloc of 9.8 GB) before looking for the layers' tensors.
TEST(FuzzRegression, GgufHugeBlockCountFailsBeforeAllocating) {
  TinyGguf g;
  g.str("general.architecture", "llama");
  g.u32("llama.embedding_length", 8);
  g.u32("llama.feed_forward_length", 16);
  g.u32("llama.block_count", 0x7FFFFFFF);
  g.u32("llama.attention.head_count", 2);
  g.u32("llama.context_length", 16);
  g.f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.tensor_f32("token_embd.weight", {8, 4});
  const std::string path = scratch("block_count.gguf", g.bytes());
  expect_error([&] { (void)load_gguf_model(path, /*load_tokenizer=*/false); },
               {path, "block_count 2147483647 needs at least 19327352823 layer tensors, the file has 1"});
}

// gguf_model_fuzz (same family): head_count x key_length overflowing int.
TEST(FuzzRegression, GgufHugeHeadWidthIsRefused) {
  TinyGguf g;
  g.str("general.architecture", "llama");
  g.u32("llama.embedding_length", 8);
  g.u32("llama.feed_forward_length", 16);
  g.u32("llama.block_count", 1);
  g.u32("llama.attention.head_count", 65536);
  g.u32("llama.attention.head_count_kv", 1);
  g.u32("llama.attention.key_length", 65536);
  g.u32("llama.rope.dimension_count", 65536);
  g.u32("llama.context_length", 16);
  g.f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  g.tensor_f32("token_embd.weight", {8, 4});
  const std::string path = scratch("head_width.gguf", g.bytes());
  expect_error([&] { (void)load_gguf_model(path, /*load_tokenizer=*/false); },
               {path, "head_count 65536 x head size 65536 is too large"});
}

// llama2c_tokenizer_fuzz: a vocab_size of 2^31-1 (from the model header) made
// read_llama2c_tokenizer reserve 2^31 pieces (a 26 GB allocation) before reading the file.
TEST(FuzzRegression, Llama2cTokenizerHugeVocabSizeIsTruncationNotAllocation) {
  std::string bytes;
  const std::int32_t max_len = 1, len = 1;
  const float score = 0.0f;
  bytes.append(reinterpret_cast<const char*>(&max_len), 4);
  bytes.append(reinterpret_cast<const char*>(&score), 4);
  bytes.append(reinterpret_cast<const char*>(&len), 4);
  bytes += "a";
  const std::string path = scratch("tokenizer.bin", bytes);
  expect_error([&] { (void)read_llama2c_tokenizer(path, 0x7FFFFFFF); },
               {path, "truncated tokenizer: expected 2147483647 tokens, the file ends in token 1"});
}


// task_suite_fuzz: a number beyond double ("family":888E888...) made nlohmann::json throw
// out_of_range, which escaped the parse_error handler.
TEST(FuzzRegression, TaskSuiteNumberBeyondDoubleIsInvalidJson) {
  expect_error([] { (void)parse_task_suite("{\"id\": \"z1\", \"family\": 8E888}\n", "tasks.jsonl"); },
               {"tasks.jsonl:1: invalid JSON", "number overflow"});
}

// kvc_file_fuzz, seed empty_heads.kvc: an empty head (and an empty context) made parse_kvc call
// memcpy on the null data() of an empty vector (UBSan: "null pointer passed as argument 1").
TEST(FuzzRegression, KvcEmptyHeadsAndEmptyContextParse) {
  ModelConfig c;
  c.dim = 8, c.hidden_dim = 16, c.n_layers = 1, c.n_heads = 2, c.n_kv_heads = 2, c.head_dim = 4;
  c.vocab_size = 3, c.max_seq_len = 16;
  KvcFile f;
  f.config = c;
  f.method = "am";
  f.ratio = 0.5;
  f.last_logits = {0.5f, -1.0f, 2.0f};
  f.cache = KVCache(c.n_layers, c.n_kv_heads, c.head_dim);
  f.cache.next_position = 0;
  const KvcFile back = parse_kvc(serialize_kvc(f), "empty.kvc");
  EXPECT_TRUE(back.context_tokens.empty());
  EXPECT_EQ(back.cache.head(0, 1).length(), 0u);
  EXPECT_EQ(back.last_logits, f.last_logits);
}

// hf_tokenizer_fuzz (CI fuzz smoke of stop 19): a vocabulary id written as 1e59 reached
// nlohmann::json's get<int>(), an out-of-range float-to-int conversion (UBSan: "1e+59 is outside
// the range of representable values of type 'int'"). Every integer read from JSON now goes through
// json_int (io/json_number.h).
TEST(FuzzRegression, HfTokenizerFloatVocabIdIsAnError) {
  const std::string path = scratch("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1e59}, "merges": []}})");
  expect_error([&] { const HfTokenizer tok(path, ""); }, {path, "model.vocab", "'b'", "not an int32 integer"});
  const std::string big = scratch("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 4294967296}, "merges": []}})");
  expect_error([&] { const HfTokenizer tok(big, ""); }, {"model.vocab", "not an int32 integer"});
}

// The same class of input in config.json: 2^32 + 1 used to narrow silently to token id 1.
TEST(FuzzRegression, HfConfigTokenIdsBeyondInt32AreErrors) {
  const std::string base = R"({"architectures":["LlamaForCausalLM"],"hidden_size":8,"intermediate_size":16,"num_hidden_layers":1,"num_attention_heads":2,"vocab_size":10,)";
  expect_error([&] { (void)parse_hf_config(base + R"("bos_token_id": 4294967297})", "config.json"); },
               {"config.json", "bos_token_id", "int32"});
  expect_error([&] { (void)parse_hf_config(base + R"("eos_token_id": 1e59})", "config.json"); },
               {"config.json", "eos_token_id", "int32"});
  expect_error([&] { (void)parse_hf_config(base + R"("eos_token_id": [2, 3.5]})", "config.json"); },
               {"config.json", "eos_token_id"});
  EXPECT_EQ(parse_hf_config(base + R"("bos_token_id": 7, "eos_token_id": [2, 3]})", "config.json").bos_token_id, 7);
}

// json_int against values worked out by hand: only JSON integers within int32 pass.
TEST(FuzzRegression, JsonIntAcceptsExactlyInt32Integers) {
  using nlohmann::json;
  EXPECT_EQ(json_int(json::parse("2147483647")), 2147483647);
  EXPECT_EQ(json_int(json::parse("-2147483648")), -2147483647 - 1);
  EXPECT_EQ(json_int(json::parse("0")), 0);
  for (const char* bad : {"2147483648", "-2147483649", "1e59", "3.0", "-1e300", "true", "\"3\"", "null", "[1]",
                          "18446744073709551615"})
    EXPECT_FALSE(json_int(json::parse(bad)).has_value()) << bad;
  expect_error([] { (void)json_int(json::parse("1e59"), "f.json", "n_layers"); },
               {"f.json: n_layers: expected an int32 integer, got 1e+59"});
  EXPECT_EQ(json_int_list(json::parse("[1, -2, 3]"), "f.json", "ks"), (std::vector<int>{1, -2, 3}));
  expect_error([] { (void)json_int_list(json::parse("[1, 2.5]"), "f.json", "ks"); }, {"f.json: ks:", "2.5"});
  expect_error([] { (void)json_int_list(json::parse("7"), "f.json", "ks"); }, {"f.json: ks: expected a list"});
  EXPECT_EQ(json_uint64(json::parse("18446744073709551615"), "f", "seed"), 18446744073709551615ULL);
  expect_error([] { (void)json_uint64(json::parse("-1"), "f", "seed"); }, {"f: seed: expected a non-negative"});
  EXPECT_EQ(json_int64(json::parse("-9223372036854775808"), "f", "tokens"), INT64_MIN);
  expect_error([] { (void)json_int64(json::parse("9223372036854775808"), "f", "tokens"); }, {"f: tokens:"});
}

}}  // namespace
}  // namespace kvcompact
