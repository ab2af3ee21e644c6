// libFuzzer harness: the Jinja subset (io/jinja.h) on raw template sources — parsing, then
// rendering with chat-template variables (messages, add_generation_prompt, bos/eos, tools).
#include <cstdint>

#include "fuzz_util.h"
#include "io/jinja.h"

using namespace kvcompact;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const nlohmann::ordered_json context = nlohmann::ordered_json::parse(R"({
    "messages": [{"role": "system", "content": "Be brief."},
                 {"role": "user", "content": "What is 2+2?"},
                 {"role": "assistant", "content": "<think>\nadd\n</think>\n4", "tool_calls": null},
                 {"role": "user", "content": "And 3+3?"}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "tools": [{"name": "f", "parameters": {"x": 1, "y": [1.5, "a", true, null]}}],
    "enable_thinking": false})");
  fuzz::expect_ok_or_error([&] {
    const jinja::Template t(fuzz::as_view(data, size), "template");
    (void)t.render(context);
  });
  return 0;
}
