// Chat templates of Hugging Face tokenizers (tokenizer_config.json / chat_template.jinja) and of
// GGUF files (tokenizer.chat_template): messages -> prompt text, as transformers'
// apply_chat_template(tokenize=False) renders it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/jinja.h"

namespace kvcompact {

/// One chat message with text content (role: "system", "user", "assistant" or "tool"). Messages
/// with other fields (tool_calls, reasoning_content, name, ...) are passed as JSON instead.
struct ChatMessage {
  std::string role;
  std::string content;
};

/// A chat template with the special-token strings it may use.
struct ChatTemplate {
  std::string path;       ///< where it came from (file, or "<file>: tokenizer.chat_template"), for messages
  std::string source;     ///< the Jinja source
  std::string bos_token;  ///< "" when the tokenizer has none (Qwen3)
  std::string eos_token;
  /// Template variables of the tokenizer's named special tokens (transformers'
  /// special_tokens_map: bos_token, eos_token, unk_token, sep_token, pad_token, cls_token,
  /// mask_token), only those the tokenizer has.
  nlohmann::ordered_json special_tokens = nlohmann::ordered_json::object();
  std::shared_ptr<const jinja::Template> compiled;  ///< parsed `source`
};

/// Loads the chat template of a Hugging Face tokenizer: `path` is a tokenizer_config.json, a
/// chat_template.jinja, or a folder holding them. As transformers (>= 4.43) does, a
/// chat_template.jinja beside tokenizer_config.json wins over the config's `chat_template`
/// (a string, or a list of {"name", "template"} whose "default" entry is used). Special tokens
/// (string or {"content": ...}) come from tokenizer_config.json when there is one.
/// Throws Error naming the file: missing/unreadable file, bad JSON, no template in either
/// place, template syntax errors.
ChatTemplate load_chat_template(const std::string& path);

/// The chat template of a GGUF file (metadata `tokenizer.chat_template`), with bos/eos strings
/// from tokenizer.ggml.tokens at tokenizer.ggml.bos_token_id / eos_token_id. Throws Error
/// naming the file when it is not a readable GGUF, has no template, or the template is invalid.
ChatTemplate load_gguf_chat_template(const std::string& gguf_path);

/// Parses a template source directly (bos/eos strings as given; "" = the tokenizer has none).
ChatTemplate make_chat_template(const std::string& source, const std::string& bos_token,
                                const std::string& eos_token, const std::string& name = "chat_template");

/// Renders a conversation as transformers' apply_chat_template(tokenize=False) does: the
/// template variables are messages (the JSON objects as given, every field and nested value
/// kept), tools and documents (None unless `extra` sets them), add_generation_prompt, the
/// special tokens, then those of `extra` (a JSON object, e.g. {"enable_thinking": false} or
/// {"tools": [...]}; it overrides the others). Throws Error when `messages` is not an array or
/// `extra` not an object, on template runtime errors and on raise_exception.
std::string render_chat_json(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                             bool add_generation_prompt,
                             const nlohmann::ordered_json& extra = nlohmann::ordered_json::object(),
                             const jinja::RenderOptions& options = {});

/// render_chat_json for messages with text content only.
std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages,
                        bool add_generation_prompt,
                        const nlohmann::ordered_json& extra = nlohmann::ordered_json::object());

/// Checks messages JSON: an array of objects, each with a string "role" (other fields and
/// content of any JSON type pass through). Returns it; throws Error("<source>: ...") otherwise.
nlohmann::ordered_json chat_messages_json(const nlohmann::ordered_json& j, const std::string& source);

/// Messages from JSON: an array of {"role": ..., "content": ...} objects (content a string).
/// Throws Error("<source>: ...") for any other shape.
std::vector<ChatMessage> chat_messages_from_json(const nlohmann::json& j, const std::string& source);

}  // namespace kvcompact
