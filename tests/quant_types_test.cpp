// ggml block quantisations Q4_0 ... Q8_1 and the K-quants Q2_K ... Q6_K: decoding (the fast
// dequantize_row and its plain twin weight_element_ref) equals gguf-py's gguf.quants.dequantize
// bit for bit on random blocks (tests/ref/gguf_dequant.py) and on real tensors of the fetched
// SmolLM2 Q4_1 and Gemma 3 Q4_K_M GGUF files; the typed matmul equals matmul_wt_typed_ref on
// every type (both of its paths); hand-worked blocks for Q8_1 (which gguf-py cannot decode).
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "core/weight_matrix.h"
#include "core/dequant.h"
#include "core/half.h"
#include "ops/matmul.h"
#include "python_ref.h"
#include "random_blocks.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
using testing::python_ready;
using testing::real_model;
using testing::run_python_ref;
using testing::slurp;

const std::vector<WeightType> kBlockTypes = {
    WeightType::Q8_0, WeightType::Q4_0, WeightType::Q4_1, WeightType::Q5_0, WeightType::Q5_1,
    WeightType::Q8_1, WeightType::Q2_K, WeightType::Q3_K, WeightType::Q4_K, WeightType::Q5_K,
    WeightType::Q6_K};

/// A per-process scratch folder (ctest runs test processes in parallel).
std::string scratch(const std::string& name) {
  const fs::path d = fs::path(KVC_TEST_TMP) / ("quant_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::vector<std::uint8_t> read_u8(const std::string& path) {
  const std::string s = slurp(path);
  return {s.begin(), s.end()};
}

std::vector<float> read_f32(const std::string& path) {
  const std::string s = slurp(path);
  std::vector<float> v(s.size() / 4);
  std::memcpy(v.data(), s.data(), v.size() * 4);
  return v;
}

WeightType weight_type_named(const std::string& name) {
  for (std::uint32_t t = 0; t < 40; ++t)
    if (ggml_type_name(t) == name) {
      const auto wt = ggml_weight_type(t);
      if (wt) return *wt;
    }
  ADD_FAILURE() << "no WeightType for " << name;
  return WeightType::F32;
}

/// Same bits (so -0.0 != 0.0 and NaN payloads count).
bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

/// Checks both decoders of W (rows x cols) against the reference values `ref` bit for bit;
/// returns the number of elements compared.
std::size_t expect_decodes_to(const WeightMatrix& W, const std::vector<float>& ref, const std::string& what) {
  const std::int64_t rows = W.rows(), cols = W.cols();
  EXPECT_EQ(ref.size(), static_cast<std::size_t>(rows * cols)) << what;
  if (ref.size() != static_cast<std::size_t>(rows * cols)) return 0;
  std::vector<float> row(static_cast<std::size_t>(cols));
  int bad_fast = 0, bad_ref = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    weight_row_f32(W, r, cols, row.data());
    for (std::int64_t c = 0; c < cols; ++c) {
      const float want = ref[static_cast<std::size_t>(r * cols + c)];
      if (!same_bits(row[static_cast<std::size_t>(c)], want) && bad_fast++ < 3)
        ADD_FAILURE() << what << " dequantize_row (" << r << ", " << c << "): " << row[static_cast<std::size_t>(c)]
                      << " vs gguf-py " << want;
      const float e = weight_element_ref(W, r, c, cols);
      if (!same_bits(e, want) && bad_ref++ < 3)
        ADD_FAILURE() << what << " weight_element_ref (" << r << ", " << c << "): " << e << " vs gguf-py " << want;
    }
  }
  EXPECT_EQ(bad_fast, 0) << what;
  EXPECT_EQ(bad_ref, 0) << what;
  return ref.size();
}

TEST(QuantTypes, BlockGeometryIsGgmls) {
  // sizeof(block_*) in ggml-common.h (QK_K = 256).
  const std::map<WeightType, std::pair<int, std::size_t>> ggml = {
      {WeightType::Q8_0, {32, 34}},  {WeightType::Q4_0, {32, 18}},  {WeightType::Q4_1, {32, 20}},
      {WeightType::Q5_0, {32, 22}},  {WeightType::Q5_1, {32, 24}},  {WeightType::Q8_1, {32, 36}},
      {WeightType::Q2_K, {256, 84}}, {WeightType::Q3_K, {256, 110}}, {WeightType::Q4_K, {256, 144}},
      {WeightType::Q5_K, {256, 176}}, {WeightType::Q6_K, {256, 210}}};
  for (const auto& [t, geo] : ggml) {
    EXPECT_EQ(weight_block_elements(t), geo.first) << weight_type_name(t);
    EXPECT_EQ(weight_block_bytes(t), geo.second) << weight_type_name(t);
  }
  EXPECT_EQ(weight_row_bytes(WeightType::Q6_K, 512), 420u);
  EXPECT_THROW(weight_row_bytes(WeightType::Q4_K, 128), Error);
  const std::vector<std::uint8_t> buf(84);
  EXPECT_THROW(WeightMatrix::view(WeightType::Q2_K, buf.data(), 1, 96), Error);  // 96 % 256 != 0
  // ggml type ids and names round-trip through ggml_weight_type.
  for (std::uint32_t t : {2u, 3u, 6u, 7u, 8u, 9u, 10u, 11u, 12u, 13u, 14u}) {
    const auto wt = ggml_weight_type(t);
    ASSERT_TRUE(wt.has_value()) << t;
    EXPECT_EQ(ggml_type_name(t), weight_type_name(*wt));
  }
  EXPECT_FALSE(ggml_weight_type(15).has_value());  // Q8_K: not a weight format
  EXPECT_FALSE(ggml_weight_type(23).has_value());  // IQ4_XS
}

// Q8_1 (gguf-py has no Q8_1): d = 0.25, s = anything, q = j - 16 -> (j - 16) / 4.
TEST(QuantTypes, Q8_1HandWorkedBlock) {
  std::vector<std::uint8_t> b(36);
  const std::uint16_t d = 0x3400, s = 0x7BFF;
  std::memcpy(b.data(), &d, 2);
  std::memcpy(b.data() + 2, &s, 2);
  for (int j = 0; j < 32; ++j) b[4 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(j - 16));
  const WeightMatrix w = WeightMatrix::view(WeightType::Q8_1, b.data(), 1, 32);
  float out[32];
  weight_row_f32(w, 0, 32, out);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(out[j], 0.25f * (j - 16)) << j;
    EXPECT_EQ(weight_element_ref(w, 0, j, 32), out[j]) << j;
  }
}

// Q4_1 and Q5_0 by hand: d = 0.5, m = -1; element j of Q4_1 = nibble * 0.5 - 1; Q5_0 with qh bit j
// set for odd j: ((nibble | 16 (j odd)) - 16) * 0.5.
TEST(QuantTypes, Q4_1AndQ5_0HandWorkedBlocks) {
  std::vector<std::uint8_t> q41(20), q50(22);
  const std::uint16_t d = 0x3800, m = 0xBC00;
  std::memcpy(q41.data(), &d, 2);
  std::memcpy(q41.data() + 2, &m, 2);
  std::memcpy(q50.data(), &d, 2);
  const std::uint32_t qh = 0xAAAAAAAAu;
  std::memcpy(q50.data() + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) q41[4 + j] = q50[6 + j] = static_cast<std::uint8_t>(j | ((15 - j) << 4));
  float a[32], b[32];
  dequantize_row(WeightType::Q4_1, q41.data(), a, 32);
  dequantize_row(WeightType::Q5_0, q50.data(), b, 32);
  for (int j = 0; j < 32; ++j) {
    const int nib = j < 16 ? j : 15 - (j - 16);
    EXPECT_EQ(a[j], nib * 0.5f - 1.0f) << j;
    EXPECT_EQ(b[j], ((nib | (j % 2 ? 16 : 0)) - 16) * 0.5f) << j;
  }
}

TEST(QuantTypesRef, RandomBlocksMatchGgufPy) {
  ASSERT_TRUE(python_ready("numpy gguf"));
  const std::string dir = scratch("random");
  const std::string manifest = dir + "/manifest.txt";
  ASSERT_EQ(run_python_ref("gguf_dequant.py", "random '" + dir + "' 7", manifest), 0) << slurp(manifest + ".log");
  std::istringstream in(slurp(manifest));
  std::string kase, type;
  std::int64_t rows = 0, cols = 0;
  std::map<std::string, int> cases_of_type;
  while (in >> kase >> type >> rows >> cols) {
    SCOPED_TRACE(kase);
    const WeightType t = weight_type_named(type);
    const std::vector<std::uint8_t> q = read_u8(dir + "/" + kase + ".q");
    const std::vector<float> ref = read_f32(dir + "/" + kase + ".f32");
    const WeightMatrix W = WeightMatrix::view(t, q.data(), rows, cols);
    ASSERT_EQ(q.size(), W.byte_size());
    expect_decodes_to(W, ref, kase);
    ++cases_of_type[type];
  }
  // Every type gguf-py decodes: quantize()d rows for the 32-blocks (and F16/BF16), random bytes
  // for all block types.
  for (const char* t : {"F16", "BF16"}) EXPECT_EQ(cases_of_type[t], 1) << t;
  for (const char* t : {"Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"}) EXPECT_EQ(cases_of_type[t], 2) << t;
  for (const char* t : {"Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K"}) EXPECT_EQ(cases_of_type[t], 1) << t;
  fs::remove_all(dir);
}

/// Real tensors of a fetched GGUF: every tensor type is decodable; for each quantised type the
/// first two and the last matrix of that type (at most 256 rows each, the last one's final rows)
/// are decoded here and by gguf-py from the same file bytes and compared bit for bit, as is
/// GgufFile::tensor_f32 of the first one.
void check_real_file(const std::string& file, const std::string& tag) {
  ASSERT_TRUE(python_ready("numpy gguf"));
  const std::string path = real_model(file);
  ASSERT_FALSE(path.empty()) << file << " is missing: run `bash scripts/fetch_models.sh " << file << "`";
  const GgufFile f(path);
  std::map<std::string, std::vector<const GgufTensorInfo*>> by_type;
  for (const auto& t : f.tensors()) {
    EXPECT_TRUE(ggml_weight_type(t.type).has_value()) << t.name << " has type " << ggml_type_name(t.type);
    by_type[ggml_type_name(t.type)].push_back(&t);
  }
  std::string types;
  for (const auto& [name, ts] : by_type) types += " " + name + ":" + std::to_string(ts.size());
  std::cout << "[ info ] " << file << " tensor types:" << types << "\n";
  const std::string dir = scratch(tag);
  struct Case {
    const GgufTensorInfo* t;
    std::int64_t row0, rows, cols;
    WeightMatrix w;
  };
  std::vector<Case> cases;
  std::string args;
  for (const auto& [name, ts] : by_type) {
    if (name == "F32") continue;
    std::vector<const GgufTensorInfo*> picks;
    for (const auto* t : ts)
      if (t->dims.size() == 2 && picks.size() < 2) picks.push_back(t);
    if (picks.empty()) continue;
    if (ts.back()->dims.size() == 2 && picks.back() != ts.back()) picks.push_back(ts.back());
    for (std::size_t k = 0; k < picks.size(); ++k) {
      const GgufTensorInfo* t = picks[k];
      const auto cols = static_cast<std::int64_t>(t->dims[0]), all = static_cast<std::int64_t>(t->dims[1]);
      const std::int64_t n = std::min<std::int64_t>(all, 256), r0 = k + 1 == picks.size() ? all - n : 0;
      const WeightType wt = *ggml_weight_type(t->type);
      const std::size_t rb = weight_row_bytes(wt, cols);
      ASSERT_EQ(rb * static_cast<std::size_t>(all), t->n_bytes) << t->name;
      const std::uint8_t* rows = f.tensor_bytes(*t) + static_cast<std::size_t>(r0) * rb;
      const std::string kase = std::to_string(cases.size());
      std::ofstream(dir + "/" + kase + ".q", std::ios::binary)
          .write(reinterpret_cast<const char*>(rows), static_cast<std::streamsize>(rb * static_cast<std::size_t>(n)));
      cases.push_back({t, r0, n, cols, WeightMatrix::view(wt, rows, n, cols)});
      args += " '" + kase + ":" + name + ":" + std::to_string(cols) + "'";
    }
  }
  const std::string manifest = dir + "/manifest.txt";
  ASSERT_EQ(run_python_ref("gguf_dequant.py", "raw '" + dir + "'" + args, manifest), 0) << slurp(manifest + ".log");
  std::size_t compared = 0;
  std::map<std::string, bool> tensor_f32_checked;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const std::string what = c.t->name + " (" + ggml_type_name(c.t->type) + ", rows " + std::to_string(c.row0) +
                             ".." + std::to_string(c.row0 + c.rows) + ")";
    const std::vector<float> ref = read_f32(dir + "/" + std::to_string(i) + ".f32");
    compared += expect_decodes_to(c.w, ref, what);
    if (c.row0 == 0 && !tensor_f32_checked[ggml_type_name(c.t->type)]) {
      tensor_f32_checked[ggml_type_name(c.t->type)] = true;
      const std::vector<float> all = f.tensor_f32(*c.t);
      for (std::size_t k = 0; k < ref.size(); ++k)
        if (!same_bits(all[k], ref[k])) {
          ADD_FAILURE() << what << " tensor_f32[" << k << "] " << all[k] << " vs gguf-py " << ref[k];
          break;
        }
    }
  }
  std::cout << "[ info ] " << cases.size() << " tensors, " << compared << " values equal to gguf-py\n";
  EXPECT_GT(compared, 0u);
  fs::remove_all(dir);
}

TEST(QuantTypesRef, SmolLM2Q4_1TensorsMatchGgufPy) {
  check_real_file("SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2");
}

TEST(QuantTypesRef, Gemma3Q4_K_MTensorsMatchGgufPy) { check_real_file("gemma-3-270m-q4_k_m.gguf", "gemma3"); }

// The tensor table (names, types, data offsets, dims) of the SmolLM2 file as gguf.GGUFReader reads
// it, so the bytes decoded above are the tensors' own. (Gemma's 262144-token vocabulary makes
// GGUFReader take minutes on a loaded machine, so only SmolLM2 is listed.)
TEST(QuantTypesRef, SmolLM2TensorTableMatchesGgufReader) {
  ASSERT_TRUE(python_ready("numpy gguf"));
  const std::string path = real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_FALSE(path.empty()) << "run `bash scripts/fetch_models.sh`";
  const std::string dir = scratch("table");
  const std::string out = dir + "/tensors.txt";
  ASSERT_EQ(run_python_ref("gguf_dequant.py", "tensors '" + path + "'", out), 0) << slurp(out + ".log");
  const GgufFile f(path);
  std::istringstream in(slurp(out));
  std::size_t n = 0;
  for (std::string line; std::getline(in, line); ++n) {
    std::istringstream ls(line);
    std::string name, type;
    std::uint64_t offset = 0, d = 0;
    std::vector<std::uint64_t> dims;
    ls >> name >> type >> offset;
    while (ls >> d) dims.push_back(d);
    const GgufTensorInfo* t = f.find_tensor(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(ggml_type_name(t->type), type) << name;
    EXPECT_EQ(f.data_offset() + t->offset, offset) << name;
    EXPECT_EQ(t->dims, dims) << name;
  }
  EXPECT_EQ(n, f.tensors().size());
  EXPECT_EQ(n, 272u);  // 210 Q4_1, 61 F32, 1 Q8_0
  fs::remove_all(dir);
}

// The real SmolLM2 Q4_1 file loads (weights only: its gpt2 tokenizer is not read here) with its
// matrices kept as Q4_1 / Q8_0 views, and the model knows a fact: after the GPT-2 byte-level tokens
// of "The capital of France is" (ids looked up in the file's own vocabulary) the greedy next
// token is " Paris".
TEST(QuantTypesRef, SmolLM2Q4_1LoadsAndPredictsParis) {
  const std::string path = real_model("SmolLM2-135M-Instruct.Q4_1.gguf");
  ASSERT_FALSE(path.empty()) << "run `bash scripts/fetch_models.sh`";
  const Model m = load_gguf_model(path, /*load_tokenizer=*/false);
  EXPECT_EQ(m.config.dim, 576);
  EXPECT_EQ(m.config.n_layers, 30);
  EXPECT_EQ(m.config.vocab_size, 49152);
  EXPECT_EQ(m.weights.token_embedding.type(), WeightType::Q8_0);
  std::size_t q41 = 0, bytes = m.weights.token_embedding.byte_size();
  for (const auto& l : m.weights.layers)
    for (const WeightMatrix* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      EXPECT_TRUE(w->is_view());
      q41 += w->type() == WeightType::Q4_1;
      bytes += w->byte_size();
    }
  EXPECT_EQ(q41, 210u);
  EXPECT_TRUE(m.config.tied_classifier);
  std::cout << "[ info ] quantised matrices: " << bytes << " bytes viewed in the mapped file\n";

  const GgufFile f(path);
  const std::vector<std::string> vocab = f.get_string_array("tokenizer.ggml.tokens");
  auto id = [&](const std::string& piece) {
    const auto it = std::find(vocab.begin(), vocab.end(), piece);
    EXPECT_NE(it, vocab.end()) << piece;
    return static_cast<int>(it - vocab.begin());
  };
  const std::string G = "\xC4\xA0";  // U+0120, GPT-2's byte-level space
  const std::vector<int> tokens{id("The"), id(G + "capital"), id(G + "of"), id(G + "France"), id(G + "is")};
  const Transformer t(m.config, m.weights);
  KVCache c = t.make_cache();
  const std::vector<float> logits = t.forward(tokens, c, ForwardOptions{});
  ASSERT_EQ(logits.size(), 49152u);
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
  const int best = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
  EXPECT_EQ(vocab[static_cast<std::size_t>(best)], G + "Paris");
}

TEST(QuantTypes, MatmulMatchesReferenceForEveryBlockType) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> u(-1, 1);
  const int in = 512, out = 40;
  std::vector<float> X(static_cast<std::size_t>(9) * in);
  for (auto& x : X) x = u(rng);
  std::vector<WeightType> types = kBlockTypes;
  types.insert(types.begin(), {WeightType::F16, WeightType::BF16});
  for (WeightType t : types) {
    const std::vector<std::uint8_t> bytes = random_blocks(t, out, in, rng);
    const WeightMatrix W = WeightMatrix::view(t, bytes.data(), out, in);
    for (int n : {1, 3, 9}) {  // 1, 3: decode-and-dot path; 9: decoded blocks + sgemm
      SCOPED_TRACE(std::string(weight_type_name(t)) + ", n = " + std::to_string(n));
      std::vector<float> Y(static_cast<std::size_t>(n) * out), R(Y.size());
      matmul_wt(X.data(), W, Y.data(), n, in, out);
      matmul_wt_typed_ref(X.data(), W, R.data(), n, in, out);
      double diff = 0, scale = 0;
      for (std::size_t i = 0; i < Y.size(); ++i) {
        diff = std::max(diff, static_cast<double>(std::fabs(Y[i] - R[i])));
        scale = std::max(scale, static_cast<double>(std::fabs(R[i])));
      }
      EXPECT_GT(scale, 0.1);
      EXPECT_LT(diff, 1e-5 * scale) << "max abs diff " << diff << " of values up to " << scale;
    }
    // The embedding-row path decodes like the reference, element by element.
    std::vector<float> row(in);
    weight_row_f32(W, out - 1, in, row.data());
    for (int j = 0; j < in; ++j) ASSERT_EQ(row[j], weight_element_ref(W, out - 1, j, in)) << j;
  }
}

}}  // namespace
}  // namespace kvcompact
