// libFuzzer harness: Hugging Face tokenizer.json (io/hf_tokenizer.h) and encoding with it.
// Input: the tokenizer.json bytes, optionally followed by a NUL byte and a text to encode (else a
// fixed text is encoded). Runs encode, encode_hf and decodes every id.
#include <cstdint>

#include "fuzz_util.h"
#include "io/hf_tokenizer.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto parts = fuzz::split_at_nul(
      fuzz::as_view(data, size), "Hello world!  It's 2024: caf\xC3\xA9\t\xF0\x9F\x98\x80 <|endoftext|>\n\xFF");
  const std::string_view text = parts.second;
  const std::string path = fuzz::write_temp("tokenizer.json", parts.first);
  fuzz::expect_ok_or_error([&] {
    const HfTokenizer tok(path, "");
    for (bool flag : {false, true}) {
      const std::vector<int> ids = tok.encode(text, flag);
      (void)tok.decode(ids);
      const std::vector<int> hf = tok.encode_hf(text, flag);
      int prev = -1;
      for (int id : hf) {
        (void)tok.decode_token(prev, id);
        (void)tok.piece(id);
        (void)tok.is_special(id);
        prev = id;
      }
    }
    (void)tok.vocab_size();
  });
  return 0;
}
