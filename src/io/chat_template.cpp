// Chat templates; see chat_template.h.
#include "io/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/gguf.h"

namespace kvcompact {
namespace {

namespace fs = std::filesystem;

// transformers' SPECIAL_TOKENS_ATTRIBUTES, in its order.
const char* const kSpecialTokens[] = {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"};

bool token_string(const nlohmann::json& cfg, const char* key, std::string& out) {
  if (!cfg.contains(key)) return false;
  const auto& v = cfg[key];
  if (v.is_string()) { out = v.get<std::string>(); return true; }
  if (v.is_object() && v.contains("content") && v["content"].is_string()) { out = v["content"].get<std::string>(); return true; }
  return false;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", p.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw Error(fmt::format("{}: read error", p.string()));
  return ss.str();
}

ChatTemplate compile(std::string source, const nlohmann::ordered_json& special, const std::string& name) {
  ChatTemplate t;
  t.path = name;
  t.source = std::move(source);
  t.special_tokens = special;
  if (special.contains("bos_token")) t.bos_token = special["bos_token"].get<std::string>();
  if (special.contains("eos_token")) t.eos_token = special["eos_token"].get<std::string>();
  t.compiled = std::make_shared<const jinja::Template>(t.source, name);
  return t;
}

}  // namespace

ChatTemplate make_chat_template(const std::string& source, const std::string& bos_token, const std::string& eos_token,
                                const std::string& name) {
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  if (!bos_token.empty()) special["bos_token"] = bos_token;
  if (!eos_token.empty()) special["eos_token"] = eos_token;
  return compile(source, special, name);
}

ChatTemplate load_chat_template(const std::string& path) {
  std::error_code ec;
  const fs::path p = path;
  fs::path config, jinja_file;
  if (fs::is_directory(p, ec)) {
    config = p / "tokenizer_config.json";
    jinja_file = p / "chat_template.jinja";
  } else if (p.extension() == ".jinja") {
    jinja_file = p;
    config = p.parent_path() / "tokenizer_config.json";
  } else {
    config = p;
    jinja_file = p.parent_path() / "chat_template.jinja";
  }
  const bool have_config = fs::is_regular_file(config, ec);
  const bool have_jinja = fs::is_regular_file(jinja_file, ec);
  if (!have_config && !have_jinja) {
    if (p.extension() == ".jinja" || (!fs::is_directory(p, ec) && !fs::exists(p, ec)))
      throw Error(fmt::format("{}: cannot open file", p.string()));
    throw Error(fmt::format("{}: no tokenizer_config.json or chat_template.jinja", p.string()));
  }
  nlohmann::json cfg = nlohmann::json::object();
  if (have_config) {
    try {
      cfg = nlohmann::json::parse(read_file(config));
    } catch (const nlohmann::json::exception& e) {
      throw Error(fmt::format("{}: not valid JSON: {}", config.string(), e.what()));
    }
    if (!cfg.is_object()) throw Error(fmt::format("{}: not a JSON object", config.string()));
  }
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  for (const char* k : kSpecialTokens) {
    std::string s;
    if (token_string(cfg, k, s)) special[k] = s;
  }
  if (have_jinja) return compile(read_file(jinja_file), special, jinja_file.string());

  if (!cfg.contains("chat_template"))
    throw Error(fmt::format("{}: no chat template: the file has no chat_template and there is no {} beside it",
                            config.string(), jinja_file.filename().string()));
  std::string source;
  const auto& ct = cfg["chat_template"];
  if (ct.is_string()) {
    source = ct.get<std::string>();
  } else if (ct.is_array()) {
    bool found = false;
    for (const auto& e : ct) {
      // Only string fields count (a non-string "name" made json::value throw: a fuzz finding).
      const auto is_str = [&](const char* k) { return e.is_object() && e.contains(k) && e[k].is_string(); };
      if (is_str("name") && e["name"].get<std::string>() == "default" && is_str("template")) {
        source = e["template"].get<std::string>();
        found = true;
      }
    }
    if (!found) throw Error(fmt::format("{}: chat_template list has no 'default' entry", config.string()));
  } else {
    throw Error(fmt::format("{}: chat_template is neither a string nor a list", config.string()));
  }
  return compile(source, special, config.string() + ": chat_template");
}

ChatTemplate load_gguf_chat_template(const std::string& gguf_path) {
  const GgufFile f(gguf_path);
  if (!f.has("tokenizer.chat_template"))
    throw Error(fmt::format("{}: no chat template (the GGUF metadata has no tokenizer.chat_template)", gguf_path));
  const std::string& source = f.get_string("tokenizer.chat_template");
  nlohmann::ordered_json special = nlohmann::ordered_json::object();
  if (f.has("tokenizer.ggml.tokens")) {
    const std::vector<std::string> tokens = f.get_string_array("tokenizer.ggml.tokens");
    const std::pair<const char*, const char*> ids[] = {{"bos_token", "tokenizer.ggml.bos_token_id"},
                                                       {"eos_token", "tokenizer.ggml.eos_token_id"},
                                                       {"unk_token", "tokenizer.ggml.unknown_token_id"},
                                                       {"sep_token", "tokenizer.ggml.seperator_token_id"},
                                                       {"pad_token", "tokenizer.ggml.padding_token_id"}};
    for (const auto& [name, key] : ids) {
      if (!f.has(key)) continue;
      const std::int64_t id = f.get_int(key);
      if (id < 0 || id >= static_cast<std::int64_t>(tokens.size()))
        throw Error(fmt::format("{}: {} {} is out of range for {} tokens", gguf_path, key, id, tokens.size()));
      special[name] = tokens[static_cast<std::size_t>(id)];
    }
  }
  return compile(source, special, gguf_path + ": tokenizer.chat_template");
}

std::string render_chat_json(const ChatTemplate& tmpl, const nlohmann::ordered_json& messages,
                             bool add_generation_prompt, const nlohmann::ordered_json& extra,
                             const jinja::RenderOptions& options) {
  if (!tmpl.compiled) throw Error(fmt::format("{}: chat template not parsed", tmpl.path));
  if (!messages.is_array()) throw Error(fmt::format("{}: messages must be a JSON array", tmpl.path));
  if (!extra.is_object()) throw Error(fmt::format("{}: extra template variables must be a JSON object", tmpl.path));
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  ctx["messages"] = messages;
  ctx["tools"] = nullptr;
  ctx["documents"] = nullptr;
  ctx["add_generation_prompt"] = add_generation_prompt;
  for (auto it = tmpl.special_tokens.begin(); it != tmpl.special_tokens.end(); ++it) ctx[it.key()] = it.value();
  for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  return tmpl.compiled->render(ctx, options);
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra) {
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  return render_chat_json(tmpl, msgs, add_generation_prompt, extra);
}

nlohmann::ordered_json chat_messages_json(const nlohmann::ordered_json& j, const std::string& source) {
  if (!j.is_array()) throw Error(fmt::format("{}: messages must be a JSON array", source));
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& m = j[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string())
      throw Error(fmt::format("{}: message {} is not an object with a string \"role\"", source, i));
  }
  return j;
}

std::vector<ChatMessage> chat_messages_from_json(const nlohmann::json& j, const std::string& source) {
  if (!j.is_array()) throw Error(fmt::format("{}: messages must be a JSON array", source));
  std::vector<ChatMessage> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const auto& m = j[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string() || !m.contains("content") ||
        !m["content"].is_string()) {
      throw Error(fmt::format("{}: message {} is not {{\"role\": string, \"content\": string}}", source, i));
    }
    out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  }
  return out;
}

}  // namespace kvcompact
