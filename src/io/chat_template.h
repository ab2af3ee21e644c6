// Chat templates of Hugging Face tokenizer_config.json files: messages -> prompt text.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace kvcompact {

namespace jinja {
class Template;
}

/// One chat message (role: "system", "user", "assistant" or "tool").
struct ChatMessage {
  std::string role;
  std::string content;
};

/// A chat template with the special-token strings it may use.
struct ChatTemplate {
  std::string path;       ///< tokenizer_config.json it came from (for error messages)
  std::string source;     ///< the Jinja source (`chat_template`)
  std::string bos_token;  ///< "" when the config has none (Qwen3)
  std::string eos_token;
  std::shared_ptr<const jinja::Template> compiled;  ///< parsed `source`
};

/// Reads `chat_template`, `bos_token` and `eos_token` (string or {"content": ...}) from a
/// tokenizer_config.json (or the folder holding one) and parses the template. A `chat_template`
/// given as a list of {"name", "template"} uses the one named "default".
/// Throws Error naming the file: missing/unreadable file, bad JSON, no chat_template, template
/// syntax errors.
ChatTemplate load_chat_template(const std::string& tokenizer_config_path);

/// Parses a template source directly (bos/eos strings as given).
ChatTemplate make_chat_template(const std::string& source, const std::string& bos_token,
                                const std::string& eos_token, const std::string& name = "chat_template");

/// Renders the conversation as Hugging Face's apply_chat_template(tokenize=False) does, with
/// the variables messages (list of {role, content}), add_generation_prompt, bos_token, eos_token
/// and those of `extra` (a JSON object, e.g. {"enable_thinking": false} for Qwen3; nothing set
/// means the template's default). Throws Error on template runtime errors and raise_exception.
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

/// Messages from JSON: an array of {"role": ..., "content": ...} objects (content a string).
/// Throws Error("<source>: ...") for any other shape.
std::vector<ChatMessage> chat_messages_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace kvcompact
