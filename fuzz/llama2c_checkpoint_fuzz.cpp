// libFuzzer harness: llama2.c legacy checkpoint (read_llama2c_checkpoint): header, size check
// and the float32 tensors.
#include <cstdint>

#include "fuzz_util.h"
#include "loaders/llama2c_checkpoint.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("input.bin", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] { (void)read_llama2c_checkpoint(path); });
  return 0;
}
