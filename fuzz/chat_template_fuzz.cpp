// libFuzzer harness: tokenizer_config.json chat templates (load_chat_template) rendered with a
// fixed conversation (render_chat), with and without the generation prompt.
#include <cstdint>

#include "fuzz_util.h"
#include "io/chat_template.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz::write_temp("tokenizer_config.json", fuzz::as_view(data, size));
  fuzz::expect_ok_or_error([&] {
    const ChatTemplate t = load_chat_template(path);
    const std::vector<ChatMessage> msgs = {{"system", "Be brief."},
                                           {"user", "What is 2+2?"},
                                           {"assistant", "4"},
                                           {"user", "And 3+3?"}};
    for (bool gen : {false, true}) fuzz::expect_ok_or_error([&] { (void)render_chat(t, msgs, gen); });
    fuzz::expect_ok_or_error(
        [&] { (void)render_chat(t, msgs, true, nlohmann::ordered_json{{"enable_thinking", false}}); });
  });
  return 0;
}
