// libFuzzer harness: llama2.c tokenizer.bin (read_llama2c_tokenizer) and the SPM encoder on it.
// Input: int32 vocab_size (little-endian; the caller's value, from the model header), then the
// bytes of tokenizer.bin; after a successful load a fixed text and the file's own tail are encoded
// and decoded.
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "loaders/llama2c_checkpoint.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 4) return 0;
  std::int32_t vocab_size = 0;
  std::memcpy(&vocab_size, data, 4);
  const std::string_view file = fuzz::as_view(data + 4, size - 4);
  const std::string path = fuzz::write_temp("tokenizer.bin", file);
  fuzz::expect_ok_or_error([&] {
    const auto tok = read_llama2c_tokenizer(path, vocab_size);
    for (std::string_view text : {std::string_view("Once upon a time, \xE2\x96\x81 \xFF\xC3 <0x41>\n"),
                                  file.substr(file.size() > 64 ? file.size() - 64 : 0)}) {
      const std::vector<int> ids = tok->encode(text, true);
      (void)tok->decode(ids);
    }
  });
  return 0;
}
