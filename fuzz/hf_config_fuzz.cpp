// libFuzzer harness: Hugging Face config.json -> ModelConfig (parse_hf_config).
#include <cstdint>

#include "fuzz_util.h"
#include "loaders/hf_config.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  fuzz::expect_ok_or_error([&] { (void)parse_hf_config(std::string(fuzz::as_view(data, size)), "config.json"); });
  return 0;
}
