// libFuzzer harness: saved compacted caches (.kvc, parse_kvc). Each input is parsed as given, and
// once more with its total-size field and FNV-1a checksum made right, so that mutations reach the
// body instead of stopping at the checksum.
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "loaders/kvc_file.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view raw = fuzz::as_view(data, size);
  fuzz::expect_ok_or_error([&] { (void)parse_kvc(raw, "input.kvc"); });
  if (size >= 32) {
    std::string fixed(raw);
    const std::uint64_t total = fixed.size();
    std::memcpy(fixed.data() + 16, &total, 8);  // header: magic(8) version(4) reserved(4) size(8)
    const std::uint64_t sum = kvc_checksum(std::string_view(fixed).substr(0, fixed.size() - 8));
    std::memcpy(fixed.data() + fixed.size() - 8, &sum, 8);
    fuzz::expect_ok_or_error([&] { (void)parse_kvc(fixed, "input.kvc"); });
  }
  return 0;
}
