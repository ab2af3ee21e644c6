// libFuzzer harness: GGUF container (io/gguf.h) — header, metadata KVs of every type, tensor
// infos, and every typed getter and float conversion on what was parsed.
#include <cstdint>

#include "fuzz_util.h"
#include "io/gguf.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("input.gguf", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const GgufFile f(path);
    for (const std::string& key : f.keys()) {
      // Each getter on each key: the value or a wrong-type Error, nothing else.
      fuzz::expect_ok_or_error([&] { (void)f.get_int(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_float(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_bool(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_string(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_string_array(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_float_array(key); });
      fuzz::expect_ok_or_error([&] { (void)f.get_int_array(key); });
    }
    for (const GgufTensorInfo& t : f.tensors()) {
      fuzz::expect_ok_or_error([&] {
        const std::vector<float> v = f.tensor_f32(t);
        volatile float sink = 0;
        for (float x : v) sink = sink + x;
      });
    }
  });
  return 0;
}
