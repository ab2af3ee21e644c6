// libFuzzer harness: loading a model from a GGUF file (load_gguf_model: llama / qwen2 / qwen3
// metadata and tensors, SPM vocabulary), then encoding and decoding a text with its tokenizer.
#include <cstdint>

#include "fuzz_util.h"
#include "loaders/model_loader.h"
#include "model/model.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("input.gguf", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const Model m = load_gguf_model(path, /*load_tokenizer=*/true);
    const std::vector<int> ids = m.tokenizer->encode("Hello world, \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80 <s>\n", true);
    (void)m.tokenizer->decode(ids);
  });
  fuzz::expect_ok_or_error([&] { (void)load_gguf_model(path, /*load_tokenizer=*/false); });
  return 0;
}
