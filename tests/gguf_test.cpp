// GgufFile: the real stories260K.gguf (numbers from SOURCES.md and the spec's layout), synthetic
// files exercising every value type, F16 conversion and alignment, and corrupt files.
#include "io/gguf.h"

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
#include "loaders/model_loader.h"
#include "model/model.h"
#include "model/transformer.h"
#include "core/half.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

namespace fs = std::filesystem;
const std::string kGguf = std::string(KVC_SHARED_DIR) + "/models/stories260K/stories260K.gguf";

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string write_file(const std::string& name, const std::string& bytes) {
  fs::path d = fs::path(KVC_TEST_TMP) / "gguf";
  fs::create_directories(d);
  std::string p = (d / name).string();
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return p;
}

using testing::expect_error;

/// Minimal GGUF writer for tests (gguf.md layout).
struct Writer {
  std::string kv, infos, data;
  std::uint64_t n_kv = 0, n_tensors = 0;
  std::uint64_t alignment = 32;

  template <typename T>
  static void put(std::string& s, T v) { s.append(reinterpret_cast<const char*>(&v), sizeof v); }
  static void put_str(std::string& s, const std::string& v) {
    put<std::uint64_t>(s, v.size());
    s += v;
  }
  template <typename T>
  void scalar(const std::string& key, std::uint32_t type, T v) {
    put_str(kv, key);
    put<std::uint32_t>(kv, type);
    put<T>(kv, v);
    ++n_kv;
  }
  void string(const std::string& key, const std::string& v) {
    put_str(kv, key);
    put<std::uint32_t>(kv, 8);
    put_str(kv, v);
    ++n_kv;
  }
  void string_array(const std::string& key, const std::vector<std::string>& v) {
    put_str(kv, key);
    put<std::uint32_t>(kv, 9);
    put<std::uint32_t>(kv, 8);
    put<std::uint64_t>(kv, v.size());
    for (const auto& s : v) put_str(kv, s);
    ++n_kv;
  }
  void f32_array(const std::string& key, const std::vector<float>& v) {
    put_str(kv, key);
    put<std::uint32_t>(kv, 9);
    put<std::uint32_t>(kv, 6);
    put<std::uint64_t>(kv, v.size());
    for (float f : v) put<float>(kv, f);
    ++n_kv;
  }
  /// Appends a tensor whose raw bytes are `raw`; data placed at the next aligned offset.
  void tensor(const std::string& name, const std::vector<std::uint64_t>& dims, std::uint32_t type,
              const std::string& raw) {
    while (data.size() % alignment != 0) data.push_back('\0');
    put_str(infos, name);
    put<std::uint32_t>(infos, static_cast<std::uint32_t>(dims.size()));
    for (auto d : dims) put<std::uint64_t>(infos, d);
    put<std::uint32_t>(infos, type);
    put<std::uint64_t>(infos, data.size());
    data += raw;
    ++n_tensors;
  }
  std::string bytes(std::uint32_t version = 3) const {
    std::string s = "GGUF";
    put<std::uint32_t>(s, version);
    put<std::uint64_t>(s, n_tensors);
    put<std::uint64_t>(s, n_kv);
    s += kv;
    s += infos;
    while (s.size() % alignment != 0) s.push_back('\0');
    return s + data;
  }
};

template <typename T>
std::string raw_of(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

TEST(Gguf, Stories260KHeaderMetadataAndTensors) {
  GgufFile f(kGguf);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.keys().size(), 19u);      // SOURCES.md: 19 KV pairs
  EXPECT_EQ(f.tensors().size(), 48u);   // 48 F32 tensors
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(f.get_string("general.architecture"), "llama");
  EXPECT_EQ(f.get_int("llama.block_count"), 5);
  EXPECT_EQ(f.get_int("llama.context_length"), 2048);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 64);
  EXPECT_FLOAT_EQ(static_cast<float>(f.get_float("llama.attention.layer_norm_rms_epsilon")), 1e-5f);
  EXPECT_EQ(f.get_float_or("llama.rope.freq_base", 10000.0), 10000.0);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens")[259], "\xE2\x96\x81t");
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")[260], -1.0f);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type")[1], 3);  // control
  // u32 0xFFFFFFFF (unset separator id) is read as a plain integer.
  EXPECT_EQ(f.get_int("tokenizer.ggml.seperator_token_id"), 4294967295LL);

  const GgufTensorInfo& emb = f.tensor("token_embd.weight");
  EXPECT_EQ(emb.dims, (std::vector<std::uint64_t>{64, 512}));
  EXPECT_EQ(emb.type, 0u);
  EXPECT_EQ(emb.offset, 0u);
  EXPECT_EQ(emb.n_bytes, 64u * 512 * 4);
  const GgufTensorInfo& ffn = f.tensor("blk.4.ffn_down.weight");
  EXPECT_EQ(ffn.dims, (std::vector<std::uint64_t>{172, 64}));
  // The last tensor's data ends exactly at the end of the file.
  std::uint64_t end = 0;
  for (const auto& t : f.tensors()) end = std::max(end, t.offset + t.n_bytes);
  EXPECT_EQ(f.data_offset() + end, 1185376u);
  // Tensor bytes are the file bytes at data_offset + offset.
  const std::string raw = read_bytes(kGguf);
  const std::vector<float> w = f.tensor_f32("output_norm.weight");
  ASSERT_EQ(w.size(), 64u);
  float first;
  std::memcpy(&first, raw.data() + f.data_offset() + f.tensor("output_norm.weight").offset, 4);
  EXPECT_EQ(w[0], first);
  EXPECT_EQ(f.find_tensor("nope"), nullptr);
}

TEST(Gguf, TypedGettersNameKeyAndFile) {
  GgufFile f(kGguf);
  expect_error([&] { f.get_string("llama.block_count"); }, {"stories260K.gguf", "llama.block_count", "u32"});
  expect_error([&] { f.get_int("general.architecture"); }, {"stories260K.gguf", "general.architecture"});
  expect_error([&] { f.get_float("llama.block_count"); }, {"llama.block_count"});
  expect_error([&] { f.get_int("no.such.key"); }, {"stories260K.gguf", "no.such.key"});
  expect_error([&] { f.get_string_array("tokenizer.ggml.scores"); }, {"tokenizer.ggml.scores"});
  expect_error([&] { f.get_bool("tokenizer.ggml.model"); }, {"tokenizer.ggml.model"});
  expect_error([&] { f.tensor("blk.9.attn_q.weight"); }, {"stories260K.gguf", "blk.9.attn_q.weight"});
  EXPECT_EQ(f.get_int_or("absent.key", 7), 7);
}

TEST(Gguf, SyntheticAllValueTypesF16AndAlignment) {
  Writer w;
  w.alignment = 64;
  w.scalar<std::uint32_t>("general.alignment", 4, 64);
  w.scalar<std::uint8_t>("a.u8", 0, 200);
  w.scalar<std::int8_t>("a.i8", 1, -100);
  w.scalar<std::uint16_t>("a.u16", 2, 60000);
  w.scalar<std::int16_t>("a.i16", 3, -30000);
  w.scalar<std::int32_t>("a.i32", 5, -2000000000);
  w.scalar<float>("a.f32", 6, 0.25f);
  w.scalar<std::uint8_t>("a.bool", 7, 1);
  w.string("a.str", "hello");
  w.scalar<std::uint64_t>("a.u64", 10, 1ULL << 40);
  w.scalar<std::int64_t>("a.i64", 11, -(1LL << 40));
  w.scalar<double>("a.f64", 12, 1.5);
  w.string_array("a.strs", {"x", "", "yz"});
  // F16: 1.0, -2.0, 0.5, smallest subnormal 2^-24, 65504 (max), -0.0
  const std::vector<std::uint16_t> h = {0x3C00, 0xC000, 0x3800, 0x0001, 0x7BFF, 0x8000};
  w.tensor("half", {3, 2}, 1, raw_of(h));
  const std::vector<float> f32 = {1.5f, -2.25f};
  w.tensor("full", {2}, 0, raw_of(f32));
  w.tensor("blk.0.attn_q.weight", {256, 1}, 23, std::string(136, '\0'));  // IQ4_XS block
  std::string q4k(144, '\0');  // Q4_K block: d = 1 (f16 0x3C00), dmin 0, scale 0 = 1, q = 3 / 5
  q4k[1] = '\x3C';
  q4k[4] = 1;
  q4k[16] = 0x53;
  w.tensor("q4k", {256}, 12, q4k);
  const std::string path = write_file("synthetic.gguf", w.bytes());

  GgufFile f(path);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.get_int("a.u8"), 200);
  EXPECT_EQ(f.get_int("a.i8"), -100);
  EXPECT_EQ(f.get_int("a.u16"), 60000);
  EXPECT_EQ(f.get_int("a.i16"), -30000);
  EXPECT_EQ(f.get_int("a.i32"), -2000000000);
  EXPECT_EQ(f.get_float("a.f32"), 0.25);
  EXPECT_TRUE(f.get_bool("a.bool"));
  EXPECT_EQ(f.get_string("a.str"), "hello");
  EXPECT_EQ(f.get_int("a.u64"), 1LL << 40);
  EXPECT_EQ(f.get_int("a.i64"), -(1LL << 40));
  EXPECT_EQ(f.get_float("a.f64"), 1.5);
  EXPECT_EQ(f.get_string_array("a.strs"), (std::vector<std::string>{"x", "", "yz"}));
  EXPECT_EQ(f.tensor("full").offset, 64u);  // second tensor aligned to 64

  const std::vector<float> half = f.tensor_f32("half");
  ASSERT_EQ(half.size(), 6u);
  EXPECT_EQ(half[0], 1.0f);
  EXPECT_EQ(half[1], -2.0f);
  EXPECT_EQ(half[2], 0.5f);
  EXPECT_EQ(half[3], std::ldexp(1.0f, -24));
  EXPECT_EQ(half[4], 65504.0f);
  EXPECT_EQ(half[5], 0.0f);
  EXPECT_TRUE(std::signbit(half[5]));
  EXPECT_EQ(f.tensor_f32("full"), f32);
  expect_error([&] { f.tensor_f32("blk.0.attn_q.weight"); },
               {"synthetic.gguf", "tensor blk.0.attn_q.weight has unsupported type IQ4_XS"});
  const std::vector<float> k = f.tensor_f32("q4k");  // element 0: low nibble, 32: high nibble
  ASSERT_EQ(k.size(), 256u);
  EXPECT_EQ(k[0], 3.0f);
  EXPECT_EQ(k[32], 0.0f);  // sub-block 1 has scale 0
  EXPECT_EQ(k[1], 0.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7C00)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7E00)));
  EXPECT_EQ(fp16_to_fp32(0x0400), std::ldexp(1.0f, -14));  // smallest normal
  EXPECT_EQ(fp16_to_fp32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
}

TEST(Gguf, RejectsCorruptFiles) {
  expect_error([] { GgufFile f(std::string(KVC_TEST_TMP) + "/gguf/missing.gguf"); }, {"missing.gguf"});
  const std::string raw = read_bytes(kGguf);
  ASSERT_EQ(raw.size(), 1185376u);
  auto patched = [&](std::size_t off, const void* v, std::size_t n, const std::string& name) {
    std::string b = raw;
    std::memcpy(b.data() + off, v, n);
    return write_file(name, b);
  };
  expect_error([&] { GgufFile f(patched(0, "GGML", 4, "magic.gguf")); }, {"magic.gguf", "magic"});
  const std::uint32_t v1 = 1;
  expect_error([&] { GgufFile f(patched(4, &v1, 4, "v1.gguf")); }, {"v1.gguf", "version 1"});
  const std::uint64_t absurd = 1ULL << 60;
  expect_error([&] { GgufFile f(patched(8, &absurd, 8, "tcount.gguf")); }, {"tcount.gguf", "tensor_count"});
  expect_error([&] { GgufFile f(patched(16, &absurd, 8, "kvcount.gguf")); }, {"kvcount.gguf", "kv_count"});
  // First KV: key length at 24, key "tokenizer.ggml.tokens" (21 bytes), type at 53, array elem
  // type at 57, array count at 61.
  ASSERT_EQ(raw.substr(32, 21), "tokenizer.ggml.tokens");
  expect_error([&] { GgufFile f(patched(61, &absurd, 8, "acount.gguf")); }, {"acount.gguf", "array count"});
  expect_error([&] { GgufFile f(patched(24, &absurd, 8, "keylen.gguf")); }, {"keylen.gguf", "key length"});
  const std::uint32_t badtype = 99;
  expect_error([&] { GgufFile f(patched(53, &badtype, 4, "vtype.gguf")); }, {"vtype.gguf", "type 99"});
  // Truncations: inside the header, inside the metadata, inside the tensor data.
  for (std::size_t cut : {std::size_t{10}, std::size_t{3000}, std::size_t{14100}, raw.size() - 1}) {
    const std::string name = "cut" + std::to_string(cut) + ".gguf";
    const std::string p = write_file(name, raw.substr(0, cut));
    expect_error([&] { GgufFile f(p); }, {name});
  }
  expect_error([&] { GgufFile f(write_file("empty.gguf", "")); }, {"empty.gguf"});

  // Synthetic: tensor offset outside the data, misaligned offset, too many dims, duplicate key.
  {
    Writer w;
    w.tensor("t", {4}, 0, std::string(16, '\0'));
    std::string b = w.bytes();
    const std::uint64_t off = 1 << 20;
    const std::size_t off_pos = 24 + 8 + 1 + 4 + 8 + 4;  // name len, "t", n_dims, dim, type
    std::memcpy(b.data() + off_pos, &off, 8);
    expect_error([&] { GgufFile f(write_file("off.gguf", b)); }, {"off.gguf", "tensor t"});
    const std::uint64_t mis = 4;
    std::memcpy(b.data() + off_pos, &mis, 8);
    expect_error([&] { GgufFile f(write_file("misaligned.gguf", b)); }, {"misaligned.gguf", "alignment"});
  }
  {
    Writer w;
    w.tensor("t", {1, 1, 1, 1, 1}, 0, std::string(4, '\0'));
    expect_error([&] { GgufFile f(write_file("dims.gguf", w.bytes())); }, {"dims.gguf", "dimensions"});
  }
  {
    Writer w;
    w.string("k", "a");
    w.string("k", "b");
    expect_error([&] { GgufFile f(write_file("dup.gguf", w.bytes())); }, {"dup.gguf", "duplicate"});
  }
  {
    Writer w;  // a dimension product that overflows 64 bits
    w.tensor("t", {1ULL << 40, 1ULL << 40}, 0, "");
    expect_error([&] { GgufFile f(write_file("overflow.gguf", w.bytes())); }, {"overflow.gguf"});
  }
}


// ---- qwen3 / qwen2 GGUF files with Q8_0 and Q4_0 tensors, as llama.cpp writes them ----

/// llama.cpp quantize_row_q8_0_ref: per block of 32, d = amax / 127 (stored as f16),
/// q = round(x / d); block = {f16 d, int8 qs[32]} (34 bytes). `deq` receives d16 * q.
std::string quantize_q8_0(const std::vector<float>& x, std::vector<float>& deq) {
  std::string out;
  deq.resize(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const std::uint16_t d16 = f32_to_f16(d);
    Writer::put<std::uint16_t>(out, d16);
    for (int j = 0; j < 32; ++j) {
      const auto q = static_cast<std::int8_t>(std::lround(x[b + j] * id));
      out.push_back(static_cast<char>(q));
      deq[b + j] = f16_to_f32(d16) * q;
    }
  }
  return out;
}

/// llama.cpp quantize_row_q4_0_ref: per block of 32, max = the value of largest magnitude,
/// d = max / -8, q = min(15, (int8)(x / d + 8.5)); qs[j] = q[j] | q[j + 16] << 4; block = {f16 d,
/// uint8 qs[16]} (18 bytes). `deq` receives d16 * (q - 8).
std::string quantize_q4_0(const std::vector<float>& x, std::vector<float>& deq) {
  std::string out;
  deq.resize(x.size());
  for (std::size_t b = 0; b < x.size(); b += 32) {
    float amax = 0, mx = 0;
    for (int j = 0; j < 32; ++j)
      if (std::fabs(x[b + j]) > amax) {
        amax = std::fabs(x[b + j]);
        mx = x[b + j];
      }
    const float d = mx / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const std::uint16_t d16 = f32_to_f16(d);
    Writer::put<std::uint16_t>(out, d16);
    std::uint8_t q[32];
    for (int j = 0; j < 32; ++j) {
      q[j] = static_cast<std::uint8_t>(std::min(15, static_cast<int>(static_cast<std::int8_t>(x[b + j] * id + 8.5f))));
      deq[b + j] = f16_to_f32(d16) * (static_cast<int>(q[j]) - 8);
    }
    for (int j = 0; j < 16; ++j) out.push_back(static_cast<char>(q[j] | (q[j + 16] << 4)));
  }
  return out;
}

/// Writes the same random decoder twice: `quant` with Q8_0 / Q4_0 matrices (norms, biases F32, as
/// llama.cpp keeps them) and `ref` with every matrix as its dequantized values in F32.
void write_quant_pair(const std::string& arch, const std::string& quant, const std::string& ref) {
  const std::uint64_t D = 64, FF = 96, L = 2, NH = 4, NKV = 2, HD = 16, V = 100;
  Writer wq, wr;
  for (Writer* w : {&wq, &wr}) {
    w->string("general.architecture", arch);
    w->scalar<std::uint32_t>(arch + ".embedding_length", 4, D);
    w->scalar<std::uint32_t>(arch + ".feed_forward_length", 4, FF);
    w->scalar<std::uint32_t>(arch + ".block_count", 4, L);
    w->scalar<std::uint32_t>(arch + ".attention.head_count", 4, NH);
    w->scalar<std::uint32_t>(arch + ".attention.head_count_kv", 4, NKV);
    w->scalar<std::uint32_t>(arch + ".attention.key_length", 4, HD);
    w->scalar<std::uint32_t>(arch + ".attention.value_length", 4, HD);
    w->scalar<std::uint32_t>(arch + ".context_length", 4, 256);
    w->scalar<float>(arch + ".attention.layer_norm_rms_epsilon", 6, 1e-6f);
    w->scalar<float>(arch + ".rope.freq_base", 6, 1e6f);
  }
  std::uint64_t state = 7;
  auto rnd = [&](std::size_t n, float scale, float offset = 0) {
    std::vector<float> v(n);
    for (auto& x : v) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      x = offset + scale * (static_cast<float>(state >> 40) / 8388608.0f - 1.0f);
    }
    return v;
  };
  int k = 0;
  auto matrix = [&](const std::string& name, std::uint64_t in, std::uint64_t out, float scale) {
    const std::vector<float> x = rnd(in * out, scale);
    std::vector<float> deq;
    const bool q8 = (k++ % 2) == 0;  // alternate the two block types
    const std::string raw = q8 ? quantize_q8_0(x, deq) : quantize_q4_0(x, deq);
    wq.tensor(name, {in, out}, q8 ? 8 : 2, raw);
    wr.tensor(name, {in, out}, 0, raw_of(deq));
  };
  auto vec = [&](const std::string& name, std::uint64_t n, float scale, float offset) {
    const std::vector<float> x = rnd(n, scale, offset);
    wq.tensor(name, {n}, 0, raw_of(x));
    wr.tensor(name, {n}, 0, raw_of(x));
  };
  matrix("token_embd.weight", D, V, 0.5f);
  for (std::uint64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", D, 0.2f, 1.0f);
    matrix(p + "attn_q.weight", D, NH * HD, 0.2f);
    matrix(p + "attn_k.weight", D, NKV * HD, 0.2f);
    matrix(p + "attn_v.weight", D, NKV * HD, 0.2f);
    matrix(p + "attn_output.weight", NH * HD, D, 0.2f);
    if (arch == "qwen2") {
      vec(p + "attn_q.bias", NH * HD, 0.1f, 0.0f);
      vec(p + "attn_k.bias", NKV * HD, 0.1f, 0.0f);
      vec(p + "attn_v.bias", NKV * HD, 0.1f, 0.0f);
    }
    if (arch == "qwen3") {
      vec(p + "attn_q_norm.weight", HD, 0.2f, 1.0f);
      vec(p + "attn_k_norm.weight", HD, 0.2f, 1.0f);
    }
    vec(p + "ffn_norm.weight", D, 0.2f, 1.0f);
    matrix(p + "ffn_gate.weight", D, FF, 0.2f);
    matrix(p + "ffn_up.weight", D, FF, 0.2f);
    matrix(p + "ffn_down.weight", FF, D, 0.2f);
  }
  vec("output_norm.weight", D, 0.2f, 1.0f);
  matrix("output.weight", D, V, 0.2f);
  write_file(quant, wq.bytes());
  write_file(ref, wr.bytes());
}

class GgufQuantModel : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufQuantModel, LogitsMatchTheDequantizedF32Model) {
  const std::string arch = GetParam();
  const std::string dir = (fs::path(KVC_TEST_TMP) / "gguf").string();
  write_quant_pair(arch, arch + "_q.gguf", arch + "_ref.gguf");
  const Model q = load_gguf_model(dir + "/" + arch + "_q.gguf", /*load_tokenizer=*/false);
  const Model r = load_gguf_model(dir + "/" + arch + "_ref.gguf", /*load_tokenizer=*/false);
  EXPECT_EQ(q.config.qk_norm, arch == "qwen3");
  EXPECT_EQ(q.config.attention_qkv_bias, arch == "qwen2");
  EXPECT_FALSE(q.config.tied_classifier);
  // kept quantized in memory; write_quant_pair alternates Q8_0 (token_embd), Q4_0 (attn_q), ...
  EXPECT_EQ(q.weights.token_embedding.type(), WeightType::Q8_0);
  EXPECT_EQ(q.weights.layers[0].wq.type(), WeightType::Q4_0);
  EXPECT_EQ(q.weights.layers[0].wk.type(), WeightType::Q8_0);
  const std::vector<int> tokens{1, 17, 42, 99, 3, 64, 5, 0, 77, 23};
  const Transformer tq(q.config, q.weights), tr(r.config, r.weights);
  KVCache cq = tq.make_cache(), cr = tr.make_cache();
  ForwardOptions o;
  o.logits = LogitsMode::All;
  const std::vector<float> lq = tq.forward(tokens, cq, o), lr = tr.forward(tokens, cr, o);
  ASSERT_EQ(lq.size(), tokens.size() * 100);
  // Same weights, two storage types: differences come only from summation order in the
  // kernels. Tolerance: 1e-4 relative to the largest logit magnitude.
  float scale = 0, worst = 0;
  for (std::size_t i = 0; i < lr.size(); ++i) {
    scale = std::max(scale, std::fabs(lr[i]));
    worst = std::max(worst, std::fabs(lq[i] - lr[i]));
  }
  EXPECT_GT(scale, 0.1f);
  EXPECT_LE(worst, 1e-4f * scale) << "max abs diff " << worst << " of logits up to " << scale;
}

INSTANTIATE_TEST_SUITE_P(Archs, GgufQuantModel, ::testing::Values("qwen3", "qwen2"));

TEST(GgufQuantModelSanity, QuantizersMatchHandWorkedBlocks) {
  // Block x_j = j / 31 * 2 - 1 (from -1 to 1). Q8_0: amax 1 -> d = 1/127; x = 1 -> q = 127, x = -1 -> -127.
  // Q4_0: the first value of largest magnitude is x_0 = -1 -> d = -1 / -8 = 1/8; x = 1 -> int(8 + 8.5) = 16
  // capped at 15 (dequantized 7/8); x = -1 -> int(-8 + 8.5) = 0 (dequantized -1).
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j) / 31.0f * 2.0f - 1.0f;
  std::vector<float> d8, d4;
  const std::string q8 = quantize_q8_0(x, d8), q4 = quantize_q4_0(x, d4);
  ASSERT_EQ(q8.size(), 34u);
  ASSERT_EQ(q4.size(), 18u);
  EXPECT_EQ(static_cast<std::int8_t>(q8[2 + 31]), 127);
  EXPECT_EQ(static_cast<std::int8_t>(q8[2 + 0]), -127);
  EXPECT_EQ(static_cast<std::uint8_t>(q4[2 + 15]) >> 4, 15);  // x[31] = 1 (qs[15] high nibble)
  EXPECT_EQ(static_cast<std::uint8_t>(q4[2 + 0]) & 15, 0);     // x[0] = -1 (qs[0] low nibble)
  EXPECT_EQ(d4[31], 0.875f);
  EXPECT_EQ(d4[0], -1.0f);
  EXPECT_NEAR(d8[0], -1.0f, 1e-3f);
}

// A K-quant tensor whose row is not a whole number of 256-element super-blocks, or whose data is
// shorter than its blocks (a Q5_K tensor stored with Q4_K-sized blocks, a truncated Q6_K tensor),
// gives one line naming the file and the tensor.
TEST(Gguf, KQuantBlockMismatchNamesFileAndTensor) {
  auto one_line_error = [](const std::string& path, const std::vector<std::string>& needles) {
    try {
      GgufFile f(path);
      ADD_FAILURE() << path << ": no Error thrown";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_EQ(m.find('\n'), std::string::npos) << m;
      for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << m << " lacks " << n;
    }
  };
  {
    Writer w;  // ne0 = 128: half a Q4_K super-block per row
    w.tensor("blk.0.ffn_down.weight", {128, 2}, 12, std::string(144, '\0'));
    one_line_error(write_file("kq_dims.gguf", w.bytes()),
                   {"kq_dims.gguf", "tensor blk.0.ffn_down.weight", "Q4_K", "block size 256"});
  }
  {
    Writer w;  // 2 rows of one Q5_K block (2 x 176 bytes) stored as 2 x 144 bytes
    w.tensor("blk.3.attn_output.weight", {256, 2}, 13, std::string(2 * 144, '\0'));
    one_line_error(write_file("kq_size.gguf", w.bytes()),
                   {"kq_size.gguf", "tensor blk.3.attn_output.weight", "truncated"});
  }
  {
    Writer w;  // the file ends one byte before the last Q6_K block does
    w.tensor("output.weight", {512, 3}, 14, std::string(6 * 210 - 1, '\0'));
    one_line_error(write_file("kq_short.gguf", w.bytes()),
                   {"kq_short.gguf", "tensor output.weight", "truncated"});
    w.data.push_back('\0');
    GgufFile ok(write_file("kq_ok.gguf", w.bytes()));
    EXPECT_EQ(ok.tensor("output.weight").n_bytes, 6u * 210u);
  }
}

}}  // namespace
}  // namespace kvcompact
