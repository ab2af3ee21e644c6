// safetensors reader: a hand-built file parses to the right dtypes/shapes/bytes; every kind of
// corrupt header throws Error naming the file (and the tensor); sharded index folders.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <functional>
#include <nlohmann/json.hpp>

#include "hf_test_util.h"
#include "core/error.h"
#include "python_ref.h"

namespace kvcompact {
namespace { namespace KVC_UNITY_ID {

using namespace kvcompact::testing;

// A file from a header JSON string and a data buffer, as the spec lays it out.
std::string raw_file(const std::string& dir, const std::string& name, const std::string& header,
                     const std::string& data, std::int64_t claimed_len = -1) {
  std::string b(8, '\0');
  const std::uint64_t n = claimed_len >= 0 ? static_cast<std::uint64_t>(claimed_len) : header.size();
  std::memcpy(b.data(), &n, 8);
  b += header + data;
  const std::string p = dir + "/" + name;
  write_text(p, b);
  return p;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no Error thrown";
  } catch (const Error& e) {
    for (const auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

TEST(Safetensors, ParsesHandBuiltFile) {
  const std::string dir = hf_tmp_dir("st_ok");
  // a: F32 [2] = {1.5, -2}; b: BF16 [1, 2] = {1.0, -3.0} (0x3F80, 0xC040); c: I64 [] scalar 7.
  std::string data(8 + 4 + 8, '\0');
  const float a[2] = {1.5f, -2.0f};
  const std::uint16_t b[2] = {0x3F80, 0xC040};
  const std::int64_t c = 7;
  std::memcpy(data.data(), a, 8);
  std::memcpy(data.data() + 8, b, 4);
  std::memcpy(data.data() + 12, &c, 8);
  const std::string p = raw_file(dir, "ok.safetensors",
      R"({"b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("c":{"dtype":"I64","shape":[],"data_offsets":[12,20]},"__metadata__":{"format":"pt"}})", data);
  SafetensorsFile f(p);
  ASSERT_EQ(f.tensors().size(), 3u);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  const SafetensorsTensor& ta = f.tensor("a");
  EXPECT_EQ(ta.dtype, "F32");
  EXPECT_EQ(ta.shape, (std::vector<std::int64_t>{2}));
  float got[2];
  std::memcpy(got, ta.data, 8);
  EXPECT_EQ(got[0], 1.5f);
  EXPECT_EQ(got[1], -2.0f);
  const SafetensorsTensor& tb = f.tensor("b");
  EXPECT_EQ(tb.n_elements, 2u);
  EXPECT_EQ(bf16_to_f32(static_cast<std::uint16_t>(tb.data[2] | (tb.data[3] << 8))), -3.0f);
  EXPECT_EQ(f.tensor("c").n_elements, 1u);
  EXPECT_EQ(f.find("zzz"), nullptr);
  expect_error([&] { f.tensor("zzz"); }, {"ok.safetensors", "zzz", "missing"});
}

TEST(Safetensors, WriterRoundTrip) {
  const std::string dir = hf_tmp_dir("st_rt");
  std::vector<float> v = {1, 2, 3, 4, 5, 6};
  write_hf_tensors(dir + "/m.safetensors", {{"w", {2, 3}, v}, {"x", {6}, v}}, "F16");
  SafetensorsFile f(dir + "/m.safetensors");
  const auto& w = f.tensor("w");
  EXPECT_EQ(w.dtype, "F16");
  EXPECT_EQ(w.shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(f.tensor("x").begin, 12u);
  std::uint16_t h;
  std::memcpy(&h, w.data + 10, 2);
  EXPECT_EQ(h, 0x4600);  // 6.0 in binary16
}

TEST(Safetensors, CorruptFilesThrowErrorNamingFileAndTensor) {
  const std::string dir = hf_tmp_dir("st_bad");
  const std::string d8(8, '\0');
  const std::string good = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_text(dir + "/tiny.safetensors", "abc");
  expect_error([&] { SafetensorsFile f(dir + "/tiny.safetensors"); }, {"tiny.safetensors", "too small"});
  expect_error([&] { SafetensorsFile f(raw_file(dir, "len.safetensors", good, d8, 1000)); }, {"len.safetensors", "header length 1000"});
  expect_error([&] { SafetensorsFile f(raw_file(dir, "json.safetensors", "{\"t\":", d8)); }, {"json.safetensors", "JSON"});
  // Truncated data: the tensor needs 8 bytes, 4 are there.
  expect_error([&] { SafetensorsFile f(raw_file(dir, "trunc.safetensors", good, d8.substr(0, 4))); },
               {"trunc.safetensors", "tensor t", "[0, 8)"});
  // Offsets that lie about the size.
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "size.safetensors", R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", d8 + d8));
  }, {"size.safetensors", "tensor t", "need 12"});
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "order.safetensors", R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", d8));
  }, {"order.safetensors", "tensor t", "begin after end"});
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "overlap.safetensors",
        R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", d8 + d8));
  }, {"overlap.safetensors", "overlap", "a [0, 8)", "b [4, 12)"});
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "dtype.safetensors", R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", d8));
  }, {"dtype.safetensors", "tensor t", "unknown dtype 'Q4'"});
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "neg.safetensors", R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", d8));
  }, {"neg.safetensors", "tensor t", "negative"});
  expect_error([&] {
    SafetensorsFile f(raw_file(dir, "noofs.safetensors", R"({"t":{"dtype":"F32","shape":[2]}})", d8));
  }, {"noofs.safetensors", "tensor t", "data_offsets"});
  expect_error([&] { SafetensorsFile f(raw_file(dir, "arr.safetensors", "[1,2]", d8)); }, {"arr.safetensors", "not a JSON object"});
  expect_error([&] { SafetensorsFile f(dir + "/nope.safetensors"); }, {"nope.safetensors"});
}

// Header rules against the Rust safetensors library (tests/ref/safetensors_check.py): every file
// the library refuses, we refuse with an Error naming the file (and the tensor); every file it
// reads, we read to the same names, dtypes, shapes, bytes and metadata. Where the library lets a
// duplicate key pass (keeping the last, which the format forbids), we refuse.
TEST(Safetensors, HeaderRulesMatchRustLibrary) {
  ASSERT_TRUE(python_ready("safetensors numpy"));
  const std::string dir = hf_tmp_dir("st_rust");
  std::string d16(16, '\0');
  for (std::size_t i = 0; i < d16.size(); ++i) d16[i] = static_cast<char>(i * 7 + 1);
  const std::string d8 = d16.substr(0, 8);
  const std::string t8 = R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  struct Case {
    std::string name, header, data;
    std::vector<std::string> our_error;  // empty: we read it
    bool stricter = false;               // we refuse what the library lets pass
  };
  const std::vector<Case> cases = {
      {"ok", "{" + t8 + R"(,"__metadata__":{"format":"pt"}})", d8, {}},
      {"dup_tensor_same", "{" + t8 + "," + t8 + "}", d8, {"tensor t appears twice"}, true},
      {"dup_tensor_diff", "{" + t8 + R"(,"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", d16, {"tensor t appears twice"}},
      {"dup_field", R"({"t":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", d8, {"'dtype' appears twice"}},
      {"dup_metadata_key", R"({"__metadata__":{"a":"1","a":"2"},)" + t8 + "}", d8, {"'a' appears twice"}, true},
      {"dup_metadata", "{" + t8 + R"(,"__metadata__":{"x":"y"},"__metadata__":{"x":"z"}})", d8, {"'__metadata__' appears twice"}},
      {"hole", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
       d16.substr(0, 12), {"tensor b", "[4, 8)", "holes"}},
      {"trailing_bytes", "{" + t8 + "}", d16, {"16 bytes", "cover 8"}},
      {"overlap", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
       d16.substr(0, 12), {"overlap", "a [0, 8)", "b [4, 12)"}},
      {"empty_inside", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[0],"data_offsets":[4,4]}})",
       d8, {"overlap"}},
      {"out_of_order", R"({"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", d8, {}},
      {"zero_sized", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[0,0]},"b":{"dtype":"F32","shape":[2,0],"data_offsets":[0,0]},)" + t8 + "}",
       d8, {}},
      {"beyond_file", R"({"t":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", d8, {"tensor t", "[0, 16)"}},
      {"size_mismatch", R"({"t":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}})", d8, {"tensor t", "need 4"}},
      {"meta_int", R"({"__metadata__":{"a":1},)" + t8 + "}", d8, {"__metadata__", "'a'", "not a string"}},
      {"meta_null", R"({"__metadata__":null,)" + t8 + "}", d8, {}},
      {"meta_list", R"({"__metadata__":["a"],)" + t8 + "}", d8, {"__metadata__"}},
      {"float_offset", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0.0,8]}})", d8, {"tensor t", "data_offsets"}},
      {"float_shape", R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", d8, {"tensor t", "shape"}},
      {"unknown_dtype", R"({"t":{"dtype":"Q4","shape":[2],"data_offsets":[0,8]}})", d8, {"tensor t", "'Q4'"}},
      {"new_dtypes", R"({"c":{"dtype":"C64","shape":[1],"data_offsets":[0,8]},"e":{"dtype":"F8_E8M0","shape":[4],"data_offsets":[8,12]},)"
                     R"("f":{"dtype":"F8_E4M3FNUZ","shape":[2],"data_offsets":[12,14]},"g":{"dtype":"F8_E5M2FNUZ","shape":[2],"data_offsets":[14,16]}})",
       d16, {}},
      {"padded_header", "{" + t8 + "}      ", d8, {}},
      {"empty_header", "{}", "", {}},
      {"extra_field", R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", d8, {}},
  };
  std::string args;
  for (const auto& c : cases) {
    raw_file(dir, c.name + ".safetensors", c.header, c.data);
    args += " '" + dir + "/" + c.name + ".safetensors'";
  }
  const std::string out = dir + "/rust.json";
  ASSERT_EQ(run_python_ref("safetensors_check.py", args, out), 0) << slurp(out + ".log");
  const nlohmann::json ref = nlohmann::json::parse(slurp(out));
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string path = dir + "/" + c.name + ".safetensors";
    const nlohmann::json& r = ref["files"][path];
    if (c.our_error.empty()) {
      ASSERT_TRUE(r["ok"].get<bool>()) << "the library refuses it: " << r["error"];
      SafetensorsFile f(path);
      ASSERT_EQ(f.tensors().size(), r["tensors"].size());
      for (const auto& t : f.tensors()) {
        const nlohmann::json& rt = r["tensors"][t.name];
        EXPECT_EQ(t.dtype, rt["dtype"].get<std::string>()) << t.name;
        EXPECT_EQ(t.shape, rt["shape"].get<std::vector<std::int64_t>>()) << t.name;
        std::string hex;
        for (std::uint64_t i = 0; i < t.end - t.begin; ++i) hex += fmt::format("{:02x}", t.data[i]);
        EXPECT_EQ(hex, rt["data_hex"].get<std::string>()) << t.name;
      }
      const nlohmann::json want_meta = r["metadata"].is_null() ? nlohmann::json::object() : r["metadata"];
      EXPECT_EQ(nlohmann::json(f.metadata()), want_meta);
      continue;
    }
    EXPECT_EQ(r["ok"].get<bool>(), c.stricter) << (c.stricter ? "the library should let this pass"
                                                              : "the library should refuse it");
    std::vector<std::string> needles = c.our_error;
    needles.push_back(c.name + ".safetensors");
    expect_error([&] { SafetensorsFile f(path); }, needles);
    try {
      SafetensorsFile f(path);
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << "one line: " << e.what();
    }
  }
}

TEST(Safetensors, ShardedIndex) {
  const std::string dir = hf_tmp_dir("st_shard");
  write_hf_tensors(dir + "/s1.safetensors", {{"a", {2}, {1, 2}}}, "F32");
  write_hf_tensors(dir + "/s2.safetensors", {{"b", {1}, {3}}}, "F32");
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
  SafetensorsCheckpoint ck(dir);
  EXPECT_EQ(ck.files().size(), 2u);
  EXPECT_EQ(ck.tensor("b").file, dir + "/s2.safetensors");
  EXPECT_NE(ck.find("a"), nullptr);
  expect_error([&] { ck.tensor("c"); }, {dir, "tensor c", "missing"});
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"s2.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c2(dir); }, {"model.safetensors.index.json", "tensor a", "s2.safetensors"});
  write_text(dir + "/model.safetensors.index.json", R"({"weight_map":{"a":"../x.safetensors"}})");
  expect_error([&] { SafetensorsCheckpoint c3(dir); }, {"model.safetensors.index.json", "bad shard"});
  write_text(dir + "/model.safetensors.index.json", R"({"nothing":1})");
  expect_error([&] { SafetensorsCheckpoint c4(dir); }, {"model.safetensors.index.json", "weight_map"});
}

}}  // namespace
}  // namespace kvcompact
