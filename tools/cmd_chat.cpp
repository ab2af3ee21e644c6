// `kvcompact chat-render`: a conversation through the chat template of a tokenizer_config.json,
// chat_template.jinja or GGUF file.
#include <fmt/format.h>

#include <fstream>
#include <sstream>

#include "cli_common.h"
#include "io/chat_template.h"
#include "core/error.h"

namespace kvcompact::cli {

Runner register_chat_render(CLI::App& app, CommonOptions& common) {
  auto* cmd = app.add_subcommand("chat-render",
                                 "render messages with the chat template of a tokenizer_config.json / chat_template.jinja / GGUF");
  struct Args {
    std::string config, messages, vars;
    bool generation_prompt = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("--tokenizer-config", a->config,
                  "tokenizer_config.json or chat_template.jinja (or their folder), or a .gguf model file")
      ->required();
  cmd->add_option("--messages", a->messages,
                  "messages as JSON ([{\"role\": \"user\", \"content\": \"Hi\"}]) or @FILE with that JSON; "
                  "every field (tool_calls, reasoning_content, ...) reaches the template")
      ->required();
  cmd->add_flag("--add-generation-prompt", a->generation_prompt, "end with the assistant turn's header");
  cmd->add_option("--vars", a->vars,
                  "extra template variables as a JSON object, e.g. {\"enable_thinking\": false} or {\"tools\": [...]}");
  add_common_options(cmd, common);
  return [a, &common] {
    std::string text = a->messages;
    std::string source = "--messages";
    if (!text.empty() && text[0] == '@') {
      source = text.substr(1);
      std::ifstream in(source, std::ios::binary);
      if (!in) throw Error(fmt::format("{}: cannot open file", source));
      std::ostringstream ss;
      ss << in.rdbuf();
      text = ss.str();
    }
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: not valid JSON: {}", source, e.what()));
    }
    nlohmann::ordered_json vars = nlohmann::ordered_json::object();
    if (!a->vars.empty()) {
      try {
        vars = nlohmann::ordered_json::parse(a->vars);
      } catch (const nlohmann::json::exception& e) {
        throw Error(fmt::format("--vars: not valid JSON: {}", e.what()));
      }
      if (!vars.is_object()) throw Error("--vars: must be a JSON object");
    }
    const ChatTemplate tmpl = a->config.ends_with(".gguf") ? load_gguf_chat_template(a->config) : load_chat_template(a->config);
    const std::string out = render_chat_json(tmpl, chat_messages_json(j, source), a->generation_prompt, vars);
    if (common.json) {
      print_json({{"text", out}});
    } else {
      fmt::print("{}", out);
    }
    return 0;
  };
}

}  // namespace kvcompact::cli
