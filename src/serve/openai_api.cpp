#include "serve/openai_api.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "serve/session.h"

namespace kvcompact::serve {
namespace {

using ojson = nlohmann::ordered_json;

[[noreturn]] void bad(const std::string& param, const std::string& message, const std::string& code = "invalid_value") {
  throw ApiError(400, message, param, code);
}

const ojson* field(const ojson& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

int int_field(const ojson& body, const char* name, int fallback, long long lo, long long hi) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number_integer() && !(v->is_number_float() && std::floor(v->get<double>()) == v->get<double>()))
    bad(name, fmt::format("'{}' must be an integer", name), "invalid_type");
  const double d = v->get<double>();
  if (d < static_cast<double>(lo) || d > static_cast<double>(hi))
    bad(name, fmt::format("'{}' is {}; it must be between {} and {}", name, v->dump(), lo, hi));
  return static_cast<int>(d);
}

double number_field(const ojson& body, const char* name, double fallback, double lo, double hi, bool lo_open = false) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_number()) bad(name, fmt::format("'{}' must be a number", name), "invalid_type");
  const double d = v->get<double>();
  if (!std::isfinite(d) || d < lo || d > hi || (lo_open && d == lo))
    bad(name, fmt::format("'{}' is {}; it must be in {}{}, {}]", name, v->dump(), lo_open ? "(" : "[", lo, hi));
  return d;
}

bool bool_field(const ojson& body, const char* name, bool fallback) {
  const ojson* v = field(body, name);
  if (!v) return fallback;
  if (!v->is_boolean()) bad(name, fmt::format("'{}' must be a boolean", name), "invalid_type");
  return v->get<bool>();
}

/// Fields shared by both endpoints: model, stream, stream_options, temperature, top_p, seed,
/// stop, n, max_tokens / max_completion_tokens.
void common_fields(const ojson& body, const ApiLimits& limits, int default_max_tokens, ApiRequest& r) {
  if (const ojson* m = field(body, "model")) {
    if (!m->is_string()) bad("model", "'model' must be a string", "invalid_type");
    r.model = m->get<std::string>();
  }
  r.stream = bool_field(body, "stream", false);
  if (const ojson* so = field(body, "stream_options")) {
    if (!so->is_object()) bad("stream_options", "'stream_options' must be an object", "invalid_type");
    if (!r.stream) bad("stream_options", "'stream_options' is only allowed when 'stream' is true");
    r.include_usage = bool_field(*so, "include_usage", false);
  }
  if (field(body, "n")) {
    const int n = int_field(body, "n", 1, 1, 128);
    if (n != 1) bad("n", fmt::format("'n' is {}; this server generates one choice per request (n = 1)", n));
  }
  int max_tokens = int_field(body, "max_tokens", default_max_tokens, 1, limits.max_tokens_cap);
  max_tokens = int_field(body, "max_completion_tokens", max_tokens, 1, limits.max_tokens_cap);
  r.gen.max_tokens = max_tokens;
  r.gen.temperature = static_cast<float>(number_field(body, "temperature", 1.0, 0.0, 2.0));
  r.gen.top_p = static_cast<float>(number_field(body, "top_p", 1.0, 0.0, 1.0, /*lo_open=*/true));
  if (const ojson* s = field(body, "seed")) {
    if (!s->is_number_integer()) bad("seed", "'seed' must be an integer", "invalid_type");
    r.gen.seed = s->is_number_unsigned() ? s->get<uint64_t>() : static_cast<uint64_t>(s->get<int64_t>());
    if (r.gen.seed == 0) r.gen.seed = 0x9E3779B97F4A7C15ull;  // 0 means "time-based" inside the engine
  }
  if (const ojson* st = field(body, "stop")) {
    if (st->is_string()) {
      r.gen.stop.push_back(st->get<std::string>());
    } else if (st->is_array()) {
      if (st->size() > 4) bad("stop", fmt::format("'stop' has {} strings; at most 4 are allowed", st->size()));
      for (const auto& x : *st) {
        if (!x.is_string()) bad("stop", "'stop' must be a string or an array of strings", "invalid_type");
        r.gen.stop.push_back(x.get<std::string>());
      }
    } else {
      bad("stop", "'stop' must be a string or an array of strings", "invalid_type");
    }
    for (const auto& x : r.gen.stop)
      if (x.empty() || x.size() > 256) bad("stop", "each 'stop' string must have 1 to 256 bytes");
  }
}

/// The text of a message's content: a string, or OpenAI's list of {"type": "text", "text"} parts.
std::string content_text(const ojson& content, std::size_t i, bool allow_null) {
  const std::string param = fmt::format("messages[{}].content", i);
  if (content.is_null()) {
    if (allow_null) return "";
    bad(param, fmt::format("'{}' must not be null", param), "invalid_type");
  }
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    std::string out;
    for (std::size_t k = 0; k < content.size(); ++k) {
      const ojson& part = content[k];
      if (!part.is_object() || !part.contains("type") || part["type"] != "text" || !part.contains("text") ||
          !part["text"].is_string())
        bad(fmt::format("{}[{}]", param, k),
            fmt::format("'{}[{}]' must be a text part {{\"type\": \"text\", \"text\": \"...\"}} (this model reads text only)",
                        param, k), "invalid_type");
      out += part["text"].get<std::string>();
    }
    return out;
  }
  bad(param, fmt::format("'{}' must be a string or an array of text parts", param), "invalid_type");
}

}  // namespace

ApiError::ApiError(int status_, std::string message, std::string param_, std::string code_, std::string type_)
    : std::runtime_error(printable_one_line(message)), status(status_), type(std::move(type_)),
      param(std::move(param_)), code(std::move(code_)) {}

nlohmann::json ApiError::body() const {
  nlohmann::json e = {{"message", what()}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
  if (!param.empty()) e["param"] = param;
  if (!code.empty()) e["code"] = code;
  return {{"error", e}};
}

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

PromptBuilder::PromptBuilder(const Tokenizer& tokenizer, std::shared_ptr<const ChatTemplate> tmpl)
    : tok_(tokenizer), tmpl_(std::move(tmpl)) {}

std::vector<int> PromptBuilder::encode(const std::string& text) const {
  std::string t = text;
  if (tmpl_ && tok_.adds_bos() && !tmpl_->bos_token.empty() && t.starts_with(tmpl_->bos_token))
    t.erase(0, tmpl_->bos_token.size());
  return tok_.encode(t, /*add_bos=*/true);
}

std::string PromptBuilder::render(const nlohmann::ordered_json& messages) const {
  if (!tmpl_) throw ApiError(400, "the model has no chat template: use /v1/completions", "messages");
  try {
    return render_chat_json(*tmpl_, messages, /*add_generation_prompt=*/true);
  } catch (const Error& e) {
    throw ApiError(400, fmt::format("the chat template refused the messages: {}", e.what()), "messages");
  }
}

std::pair<std::vector<int>, int> PromptBuilder::build(const nlohmann::ordered_json& messages, std::string* text) const {
  const std::string rendered = render(messages);
  if (text) *text = rendered;
  std::vector<int> ids = encode(rendered);
  if (ids.empty()) throw ApiError(400, "the messages render to no tokens", "messages");
  int prefix = 1;
  std::size_t k = 0;
  while (k < messages.size() && messages[k].value("role", "") == "system") ++k;
  try {
    nlohmann::ordered_json head = nlohmann::ordered_json::array();
    if (k > 0) {
      for (std::size_t i = 0; i < k; ++i) head.push_back(messages[i]);
    } else {
      nlohmann::ordered_json first = messages[0];
      first["content"] = "";
      head.push_back(first);
    }
    const std::vector<int> h = encode(render_chat_json(*tmpl_, head, /*add_generation_prompt=*/false));
    prefix = std::max<int>(1, static_cast<int>(common_prefix(h, ids)));
  } catch (const Error&) {
    // A template that refuses the shortened conversation: only the first token is protected.
  }
  prefix = std::min<int>(prefix, static_cast<int>(ids.size()) - 1 > 0 ? static_cast<int>(ids.size()) - 1 : 1);
  return {std::move(ids), prefix};
}

nlohmann::ordered_json parse_body(std::string_view body) {
  if (body.empty()) throw ApiError(400, "the request body is empty; send a JSON object", "", "invalid_json");
  try {
    nlohmann::ordered_json j = nlohmann::ordered_json::parse(body);
    if (!j.is_object()) throw ApiError(400, "the request body must be a JSON object", "", "invalid_json");
    return j;
  } catch (const nlohmann::json::parse_error& e) {
    throw ApiError(400, fmt::format("the request body is not valid JSON (or not valid UTF-8): {}", e.what()), "",
                   "invalid_json");
  } catch (const nlohmann::json::out_of_range&) {
    throw ApiError(400, "the request body holds a number outside the range of a double (e.g. 1e400)", "",
                   "invalid_json");
  }
}

ApiRequest parse_chat_request(const nlohmann::ordered_json& body, const PromptBuilder& prompts, const ApiLimits& limits) {
  ApiRequest r;
  common_fields(body, limits, limits.default_max_tokens, r);
  const ojson* msgs = field(body, "messages");
  if (!msgs) bad("messages", "'messages' is required", "missing_required_parameter");
  if (!msgs->is_array()) bad("messages", "'messages' must be an array", "invalid_type");
  if (msgs->empty()) bad("messages", "'messages' must hold at least one message");
  if (static_cast<int>(msgs->size()) > limits.max_messages)
    bad("messages", fmt::format("'messages' holds {} messages; at most {} are allowed", msgs->size(), limits.max_messages));
  ojson clean = ojson::array();
  for (std::size_t i = 0; i < msgs->size(); ++i) {
    const ojson& m = (*msgs)[i];
    const std::string p = fmt::format("messages[{}]", i);
    if (!m.is_object()) bad(p, fmt::format("'{}' must be an object", p), "invalid_type");
    if (!m.contains("role") || !m["role"].is_string())
      bad(p + ".role", fmt::format("'{}.role' must be a string", p), "invalid_type");
    std::string role = m["role"].get<std::string>();
    if (role == "developer") role = "system";  // OpenAI's newer name for the system role
    if (role != "system" && role != "user" && role != "assistant" && role != "tool")
      bad(p + ".role", fmt::format("'{}.role' is '{}'; it must be one of system, developer, user, assistant, tool", p, role));
    if (!m.contains("content") && role != "assistant")
      bad(p + ".content", fmt::format("'{}.content' is required", p), "missing_required_parameter");
    const std::string text = content_text(m.contains("content") ? m["content"] : ojson(), i, role == "assistant");
    clean.push_back({{"role", role}, {"content", text}});
  }
  r.gen.prompt.clear();
  auto [ids, prefix] = prompts.build(clean, &r.prompt_text);
  r.gen.prompt = std::move(ids);
  r.gen.protected_prefix = prefix;
  return r;
}

ApiRequest parse_completion_request(const nlohmann::ordered_json& body, const PromptBuilder& prompts,
                                    const ApiLimits& limits) {
  ApiRequest r;
  common_fields(body, limits, 16, r);
  const ojson* p = field(body, "prompt");
  if (!p) bad("prompt", "'prompt' is required", "missing_required_parameter");
  std::string text;
  if (p->is_string()) {
    text = p->get<std::string>();
  } else if (p->is_array() && p->size() == 1 && (*p)[0].is_string()) {
    text = (*p)[0].get<std::string>();
  } else {
    bad("prompt", "'prompt' must be a string (or a list of one string)", "invalid_type");
  }
  r.prompt_text = text;
  r.gen.prompt = prompts.encode(text);
  if (r.gen.prompt.empty()) bad("prompt", "'prompt' encodes to no tokens");
  r.gen.protected_prefix = 1;
  return r;
}

nlohmann::json usage_json(const GenerationEvent& d) {
  const KvUsage& k = d.kv;
  return {{"prompt_tokens", d.prompt_tokens},
          {"completion_tokens", d.completion_tokens},
          {"total_tokens", d.prompt_tokens + d.completion_tokens},
          {"prompt_tokens_details", {{"cached_tokens", k.reused_tokens}}},
          {"kvcompact",
           {{"session", k.session},
            {"cache_entries", k.cache_entries},
            {"cache_bytes", k.cache_bytes},
            {"longest_head", k.longest_head},
            {"original_tokens", k.original_tokens},
            {"compactions", k.compactions},
            {"reused_tokens", k.reused_tokens},
            {"prefilled_tokens", k.prefilled_tokens},
            {"compaction_seconds", k.compaction_seconds}}}};
}

nlohmann::json chat_completion_json(const std::string& id, const std::string& model, long created,
                                    const std::string& text, const GenerationEvent& done) {
  return {{"id", id},
          {"object", "chat.completion"},
          {"created", created},
          {"model", model},
          {"choices",
           {{{"index", 0},
             {"message", {{"role", "assistant"}, {"content", text}}},
             {"logprobs", nullptr},
             {"finish_reason", done.finish_reason}}}},
          {"usage", usage_json(done)}};
}

nlohmann::json text_completion_json(const std::string& id, const std::string& model, long created,
                                    const std::string& text, const GenerationEvent& done) {
  return {{"id", id},
          {"object", "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", done.finish_reason}}}},
          {"usage", usage_json(done)}};
}

nlohmann::json chat_chunk_json(const std::string& id, const std::string& model, long created,
                               const nlohmann::json& delta, const nlohmann::json& finish_reason,
                               const nlohmann::json* usage) {
  nlohmann::json j = {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", model}};
  if (usage) {
    j["choices"] = nlohmann::json::array();
    j["usage"] = *usage;
  } else {
    j["choices"] = {{{"index", 0}, {"delta", delta}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}};
  }
  return j;
}

nlohmann::json text_chunk_json(const std::string& id, const std::string& model, long created, const std::string& text,
                               const nlohmann::json& finish_reason, const nlohmann::json* usage) {
  nlohmann::json j = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", model}};
  if (usage) {
    j["choices"] = nlohmann::json::array();
    j["usage"] = *usage;
  } else {
    j["choices"] = {{{"index", 0}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish_reason}}};
  }
  return j;
}

std::string prometheus_metrics(const EngineMetrics& m, const std::string& model) {
  std::string o;
  auto metric = [&](const char* name, const char* type, const char* help, const auto& value) {
    o += fmt::format("# HELP kvcompact_{} {}\n# TYPE kvcompact_{} {}\nkvcompact_{} {}\n", name, help, name, type, name, value);
  };
  o += fmt::format("# HELP kvcompact_info The served model.\n# TYPE kvcompact_info gauge\nkvcompact_info{{model=\"{}\"}} 1\n",
                   model);
  metric("requests_total", "counter", "Requests answered.", m.requests);
  metric("requests_failed_total", "counter", "Generations that the engine ended in an error (a prompt no compaction can hold, a failure); requests refused by the HTTP layer (400 on parsing, 401, 404, 413) are not counted, 429s are requests_rejected_total.", m.requests_failed);
  metric("requests_cancelled_total", "counter", "Requests whose client went away.", m.requests_cancelled);
  metric("requests_rejected_total", "counter", "Requests refused with 429 (queue full).", m.requests_rejected);
  metric("requests_in_flight", "gauge", "Requests generating now.", m.in_flight);
  metric("requests_queued", "gauge", "Requests waiting for a slot.", m.queued);
  metric("prompt_tokens_total", "counter", "Prompt tokens of all requests.", m.prompt_tokens);
  metric("prefilled_tokens_total", "counter", "Prompt tokens computed (not taken from a session's cache).", m.prefilled_tokens);
  metric("reused_tokens_total", "counter", "Prompt tokens taken from a session's cache.", m.reused_tokens);
  metric("generated_tokens_total", "counter", "Tokens generated.", m.generated_tokens);
  metric("prefill_seconds_total", "counter", "Seconds spent in forward steps that prefilled.", fmt::format("{:.6f}", m.prefill_seconds));
  metric("decode_seconds_total", "counter", "Seconds spent in decode-only forward steps.", fmt::format("{:.6f}", m.decode_seconds));
  metric("prefill_tokens_per_second", "gauge", "Prefilled tokens per second of prefill steps.",
         fmt::format("{:.3f}", m.prefill_seconds > 0 ? m.prefilled_tokens / m.prefill_seconds : 0.0));
  metric("decode_tokens_per_second", "gauge", "Generated tokens per second of decode-only steps (all sessions together).",
         fmt::format("{:.3f}", m.decode_seconds > 0 ? m.generated_tokens / m.decode_seconds : 0.0));
  metric("decode_steps_total", "counter", "Batched decode steps.", m.decode_steps);
  metric("compactions_running", "gauge", "Sessions being compacted between turns, beside the decoding.", m.compactions_running);
  metric("compactions_total", "counter", "KV-cache compactions.", m.compactions);
  metric("compaction_seconds_total", "counter", "Seconds spent compacting.", fmt::format("{:.6f}", m.compaction_seconds));
  metric("evictions_total", "counter", "Sessions evicted from memory by the KV budget.", m.evictions);
  metric("kv_entries", "gauge", "KV entries held by all sessions in memory (all heads).", m.kv_entries);
  metric("kv_bytes", "gauge", "KV bytes held by all sessions in memory.", m.kv_bytes);
  metric("sessions", "gauge", "Sessions known (in memory or saved).", m.sessions.size());
  o += "# HELP kvcompact_session_kv_entries KV entries of one session (all heads).\n# TYPE kvcompact_session_kv_entries gauge\n";
  for (const auto& s : m.sessions)
    if (s.in_memory) o += fmt::format("kvcompact_session_kv_entries{{session=\"{}\"}} {}\n", s.id, s.entries);
  o += "# HELP kvcompact_session_kv_bytes KV bytes one session holds.\n# TYPE kvcompact_session_kv_bytes gauge\n";
  for (const auto& s : m.sessions)
    if (s.in_memory) o += fmt::format("kvcompact_session_kv_bytes{{session=\"{}\"}} {}\n", s.id, s.bytes);
  o += "# HELP kvcompact_session_longest_head Entries of the largest global head of one session.\n# TYPE kvcompact_session_longest_head gauge\n";
  for (const auto& s : m.sessions)
    if (s.in_memory) o += fmt::format("kvcompact_session_longest_head{{session=\"{}\"}} {}\n", s.id, s.longest);
  return o;
}

}  // namespace kvcompact::serve
