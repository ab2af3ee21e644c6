// libFuzzer harness: safetensors header and tensor table (io/safetensors.h); every tensor's bytes
// are read, so a range the validation let through that lies outside the file is caught by ASan.
#include <cstdint>

#include "fuzz_util.h"
#include "io/safetensors.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("input.safetensors", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const SafetensorsFile f(path);
    volatile std::uint8_t sink = 0;
    for (const SafetensorsTensor& t : f.tensors()) {
      for (std::uint64_t k = 0; k < t.end - t.begin; ++k) sink = sink ^ t.data[k];
      (void)f.tensor(t.name);
    }
    (void)f.metadata();
  });
  return 0;
}
