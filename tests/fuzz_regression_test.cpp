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

#include "io/error.h"
#include "io/kvc_file.h"
#include "test_util.h"

namespace kvcompact {
namespace {

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

}  // namespace
}  // namespace kvcompact
