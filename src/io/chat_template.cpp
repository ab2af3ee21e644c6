// Chat templates; see chat_template.h.
#include "io/chat_template.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "io/error.h"
#include "io/jinja.h"

namespace kvcompact {
namespace {

std::string token_string(const nlohmann::json& cfg, const char* key) {
  if (!cfg.contains(key)) return "";
  const auto& v = cfg[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

}  // namespace

ChatTemplate make_chat_template(const std::string& source, const std::string& bos_token, const std::string& eos_token,
                                const std::string& name) {
  ChatTemplate t;
  t.path = name;
  t.source = source;
  t.bos_token = bos_token;
  t.eos_token = eos_token;
  t.compiled = std::make_shared<const jinja::Template>(source, name);
  return t;
}

ChatTemplate load_chat_template(const std::string& tokenizer_config_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = tokenizer_config_path;
  if (fs::is_directory(p, ec)) p /= "tokenizer_config.json";
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot open file", p.string()));
  std::ostringstream ss;
  ss << in.rdbuf();
  nlohmann::json cfg;
  try {
    cfg = nlohmann::json::parse(ss.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("{}: not valid JSON: {}", p.string(), e.what()));
  }
  if (!cfg.is_object() || !cfg.contains("chat_template")) throw Error(fmt::format("{}: no chat_template", p.string()));
  std::string source;
  const auto& ct = cfg["chat_template"];
  if (ct.is_string()) {
    source = ct.get<std::string>();
  } else if (ct.is_array()) {
    for (const auto& e : ct) {
      if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) {
        source = e["template"].get<std::string>();
      }
    }
    if (source.empty()) throw Error(fmt::format("{}: chat_template list has no 'default' entry", p.string()));
  } else {
    throw Error(fmt::format("{}: chat_template is neither a string nor a list", p.string()));
  }
  return make_chat_template(source, token_string(cfg, "bos_token"), token_string(cfg, "eos_token"),
                            p.string() + ": chat_template");
}

std::string render_chat(const ChatTemplate& tmpl, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                        const nlohmann::ordered_json& extra) {
  if (!tmpl.compiled) throw Error(fmt::format("{}: chat template not parsed", tmpl.path));
  if (!extra.is_object()) throw Error(fmt::format("{}: extra template variables must be a JSON object", tmpl.path));
  nlohmann::ordered_json ctx = nlohmann::ordered_json::object();
  nlohmann::ordered_json msgs = nlohmann::ordered_json::array();
  for (const ChatMessage& m : messages) msgs.push_back({{"role", m.role}, {"content", m.content}});
  ctx["messages"] = msgs;
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = tmpl.bos_token;
  ctx["eos_token"] = tmpl.eos_token;
  for (auto it = extra.begin(); it != extra.end(); ++it) ctx[it.key()] = it.value();
  return tmpl.compiled->render(ctx);
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
