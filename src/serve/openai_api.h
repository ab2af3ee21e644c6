// The OpenAI-compatible API of `kvcompact serve` without the sockets: request bodies checked and
// turned into GenerationRequests, responses and errors in OpenAI's JSON shapes
// (https://platform.openai.com/docs/api-reference/chat), metrics in Prometheus text format.
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "io/chat_template.h"
#include "io/tokenizer.h"
#include "serve/engine.h"

namespace kvcompact::serve {

/// An error as OpenAI sends it: {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError : std::runtime_error {
  int status;
  std::string type, param, code;
  ApiError(int status, std::string message, std::string param = "", std::string code = "",
           std::string type = "invalid_request_error");
  /// The response body.
  nlohmann::json body() const;
};

/// The request limits (`kvcompact serve --max-tokens-cap --max-messages`).
struct ApiLimits {
  int max_tokens_cap = 4096;   ///< largest max_tokens accepted
  int max_messages = 1024;     ///< most messages in one request
  int default_max_tokens = 256;///< when the request names none (chat); /v1/completions defaults to 16 as OpenAI
};

/// A checked request of either endpoint.
struct ApiRequest {
  std::string model;           ///< as requested ("" = not given)
  bool stream = false;
  bool include_usage = false;  ///< stream_options.include_usage
  GenerationRequest gen;       ///< prompt tokens, protected prefix, sampling
  std::string prompt_text;     ///< the rendered prompt (for logs and tests)
};

/// Renders messages with the model's chat template into prompt tokens, as `kvcompact generate
/// --chat` does (add_generation_prompt; a BOS the template writes itself is not doubled).
class PromptBuilder {
 public:
  /// `tmpl` null: only /v1/completions is served (chat requests get 400).
  PromptBuilder(const Tokenizer& tokenizer, std::shared_ptr<const ChatTemplate> tmpl);
  /// Token ids of `text` as generate() encodes a prompt (with the tokenizer's BOS).
  std::vector<int> encode(const std::string& text) const;
  /// The rendered prompt text of `messages` (checked JSON array) with the generation prompt.
  std::string render(const nlohmann::ordered_json& messages) const;
  /// Prompt tokens of `messages`, and the protected prefix: the tokens shared with the rendering
  /// of the leading system messages alone (or, without one, of the first message with empty
  /// content: the template's header and default system prompt); at least 1.
  std::pair<std::vector<int>, int> build(const nlohmann::ordered_json& messages, std::string* text = nullptr) const;
  bool has_template() const { return tmpl_ != nullptr; }

 private:
  const Tokenizer& tok_;
  std::shared_ptr<const ChatTemplate> tmpl_;
};

/// Parses a request body: invalid JSON or UTF-8 -> ApiError 400.
nlohmann::ordered_json parse_body(std::string_view body);

/// Checks a /v1/chat/completions body and builds its request. Throws ApiError (400 naming the
/// field: wrong types, unknown roles, no messages, max_tokens out of [1, cap], n != 1, ...).
ApiRequest parse_chat_request(const nlohmann::ordered_json& body, const PromptBuilder& prompts, const ApiLimits& limits);

/// Checks a /v1/completions body (prompt: a string or a list of one string).
ApiRequest parse_completion_request(const nlohmann::ordered_json& body, const PromptBuilder& prompts,
                                    const ApiLimits& limits);

/// The `usage` object: prompt_tokens, completion_tokens, total_tokens, prompt_tokens_details
/// (cached_tokens = reused), and `kvcompact` (session, cache_entries, cache_bytes, longest_head,
/// original_tokens, compactions, reused_tokens, prefilled_tokens, compaction_seconds).
nlohmann::json usage_json(const GenerationEvent& done);

/// A whole chat.completion / text_completion response.
nlohmann::json chat_completion_json(const std::string& id, const std::string& model, long created,
                                    const std::string& text, const GenerationEvent& done);
nlohmann::json text_completion_json(const std::string& id, const std::string& model, long created,
                                    const std::string& text, const GenerationEvent& done);
/// One chat.completion.chunk (delta with role and/or content, or a finish_reason, or usage only
/// with empty choices when `usage` is set).
nlohmann::json chat_chunk_json(const std::string& id, const std::string& model, long created,
                               const nlohmann::json& delta, const nlohmann::json& finish_reason,
                               const nlohmann::json* usage = nullptr);
nlohmann::json text_chunk_json(const std::string& id, const std::string& model, long created,
                               const std::string& text, const nlohmann::json& finish_reason,
                               const nlohmann::json* usage = nullptr);

/// GET /metrics: Prometheus text exposition format 0.0.4.
std::string prometheus_metrics(const EngineMetrics& m, const std::string& model);

/// A JSON dump that never throws on bad UTF-8 (replaced by U+FFFD).
std::string dump(const nlohmann::json& j);

}  // namespace kvcompact::serve
