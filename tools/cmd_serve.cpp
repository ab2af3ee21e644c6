// `kvcompact serve`: the OpenAI-compatible HTTP server (cpp-httplib) over serve/'s engine. This
// file is the glue only: routes, authentication, streaming; requests, sessions and compaction
// live in src/serve/.
#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <ctime>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "studies/qa_eval.h"
#include "chat_page_html.h"
#include "cli_common.h"
#include "cli_model.h"
#include "compaction/method_spec.h"
#include "core/error.h"
#include "core/log.h"
#include "loaders/model_loader.h"
#include "serve/engine.h"
#include "serve/openai_api.h"

namespace kvcompact::cli {
namespace {

using serve::ApiError;

std::atomic<httplib::Server*> g_server{nullptr};
void on_signal(int) {
  if (httplib::Server* s = g_server.load()) s->stop();
}

void send_error(httplib::Response& res, const ApiError& e) {
  res.status = e.status;
  res.set_content(serve::dump(e.body()), "application/json");
}

/// A failed generation as an API error: 400 from the engine is a conversation no compaction can
/// hold (OpenAI's context_length_exceeded), 503 the shutdown, anything else a server error.
ApiError engine_error(const serve::GenerationEvent& e) {
  if (e.status == 400) return ApiError(400, e.message, "messages", "context_length_exceeded");
  return ApiError(e.status, e.message, "", "", "server_error");
}

/// The server's state shared by the handlers; the engine exists once the model has loaded.
struct State {
  std::mutex mu;
  std::unique_ptr<Model> model;
  std::unique_ptr<serve::Engine> engine;
  std::unique_ptr<serve::PromptBuilder> prompts;
  std::string model_id;
  std::string load_error;
  std::atomic<bool> ready{false};
  serve::ApiLimits limits;
  long created = static_cast<long>(std::time(nullptr));
  std::atomic<uint64_t> next_id{1};
};

/// Streams a ticket's events as Server-Sent Events (chat.completion.chunk / text_completion).
/// `first` is the ticket's first event, already taken (the handler waits for it before the
/// headers go out, so that a prompt no compaction can hold still gets its HTTP 400).
void stream_response(httplib::Response& res, std::shared_ptr<State> st, std::shared_ptr<serve::Ticket> ticket,
                     serve::ApiRequest req, bool chat, std::string id, long created,
                     std::optional<serve::GenerationEvent> first) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [st, ticket, req, chat, id, created, first = std::move(first), sent_role = false](size_t, httplib::DataSink& sink) mutable {
        auto send = [&](const nlohmann::json& j) {
          const std::string line = "data: " + serve::dump(j) + "\n\n";
          return sink.write(line.data(), line.size());
        };
        if (chat && !sent_role) {
          sent_role = true;
          if (!send(serve::chat_chunk_json(id, st->model_id, created, {{"role", "assistant"}, {"content", ""}}, nullptr))) {
            ticket->cancel();
            return false;
          }
        }
        for (;;) {
          if (!sink.is_writable()) {
            ticket->cancel();
            return false;
          }
          std::optional<serve::GenerationEvent> e = std::move(first);
          first.reset();
          if (!e) e = ticket->next(200);
          if (!e) continue;
          using K = serve::GenerationEvent::Kind;
          if (e->kind == K::Text) {
            const bool ok = chat ? send(serve::chat_chunk_json(id, st->model_id, created, {{"content", e->text}}, nullptr))
                                 : send(serve::text_chunk_json(id, st->model_id, created, e->text, nullptr));
            if (!ok) {
              ticket->cancel();
              return false;
            }
            continue;
          }
          if (e->kind == K::Failed) {
            // Headers are out: the error travels as an event, as OpenAI's stream does.
            send(engine_error(*e).body());
          } else {
            chat ? send(serve::chat_chunk_json(id, st->model_id, created, nlohmann::json::object(), e->finish_reason))
                 : send(serve::text_chunk_json(id, st->model_id, created, "", e->finish_reason));
            if (req.include_usage) {
              const nlohmann::json u = serve::usage_json(*e);
              chat ? send(serve::chat_chunk_json(id, st->model_id, created, {}, nullptr, &u))
                   : send(serve::text_chunk_json(id, st->model_id, created, "", nullptr, &u));
            }
          }
          const std::string done = "data: [DONE]\n\n";
          sink.write(done.data(), done.size());
          sink.done();
          return true;
        }
      },
      [ticket](bool) { ticket->cancel(); });
}

void handle_generation(const httplib::Request& http, httplib::Response& res, std::shared_ptr<State> st, bool chat) {
  try {
    if (!st->ready) throw ApiError(503, st->load_error.empty() ? "the model is loading" : st->load_error, "", "", "server_error");
    const auto body = serve::parse_body(http.body);
    serve::ApiRequest req = chat ? serve::parse_chat_request(body, *st->prompts, st->limits)
                                 : serve::parse_completion_request(body, *st->prompts, st->limits);
    if (!req.model.empty() && req.model != st->model_id)
      throw ApiError(404, fmt::format("The model '{}' does not exist; this server serves '{}'", req.model, st->model_id),
                     "model", "model_not_found");
    std::shared_ptr<serve::Ticket> ticket;
    try {
      ticket = st->engine->submit(req.gen);
    } catch (const serve::QueueFull&) {
      throw ApiError(429, "the server is busy: every slot is generating and the queue is full; retry later", "",
                     "rate_limit_exceeded", "rate_limit_error");
    }
    const std::string id = fmt::format("{}-{}", chat ? "chatcmpl" : "cmpl", st->next_id++);
    const long created = static_cast<long>(std::time(nullptr));
    if (req.stream) {
      // The first event before the headers: a prompt that no compaction can hold is refused
      // with its 400 (as without streaming), not as an event in a 200 stream.
      std::optional<serve::GenerationEvent> first;
      while (!first) first = ticket->next(200);
      if (first->kind == serve::GenerationEvent::Kind::Failed) throw engine_error(*first);
      stream_response(res, st, ticket, std::move(req), chat, id, created, std::move(first));
      return;
    }
    std::string text;
    for (;;) {
      auto e = ticket->next(200);
      if (!e) continue;
      using K = serve::GenerationEvent::Kind;
      if (e->kind == K::Text) {
        text += e->text;
      } else if (e->kind == K::Failed) {
        throw engine_error(*e);
      } else {
        res.set_content(serve::dump(chat ? serve::chat_completion_json(id, st->model_id, created, text, *e)
                                         : serve::text_completion_json(id, st->model_id, created, text, *e)),
                        "application/json");
        return;
      }
    }
  } catch (const ApiError& e) {
    send_error(res, e);
  } catch (const std::exception& e) {
    send_error(res, ApiError(500, e.what(), "", "", "server_error"));
  }
}

}  // namespace

Runner register_serve(CLI::App& app, CommonOptions& common) {
  struct Opts {
    ModelOptions m;
    std::string host = "127.0.0.1", method = "am", allocation = "proportional", save_path, api_key, alias;
    int port = 8080, ctx = 4096, slots = 4, queue = 16, keep_recent = -1, prefill_chunk = 512;
    double target_ratio = 0.5, kv_budget_mib = 0, high_water = 0.75;
    long long max_body = 2 << 20;
    serve::ApiLimits limits;
  };
  auto o = std::make_shared<Opts>();
  auto* cmd = app.add_subcommand("serve", "OpenAI-compatible local server whose long conversations are compacted, not refused");
  add_model_options(cmd, o->m);
  cmd->add_option("--host", o->host, "address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", o->port, "TCP port (default 8080; 0 picks a free one, printed at start)");
  cmd->add_option("--ctx", o->ctx, "entries per KV head a session may hold (after a compaction the largest head counts); default 4096");
  cmd->add_option("--kv-budget", o->kv_budget_mib, "MiB of KV cache for all sessions together; least recently used idle sessions are evicted (saved with --slot-save-path); 0 = no limit");
  cmd->add_option("--slots", o->slots, "requests generating at once, decoded in one batched forward (default 4)");
  cmd->add_option("--queue", o->queue, "requests that may wait for a slot; more get HTTP 429 (default 16)");
  cmd->add_option("--method", o->method, "compaction method spec (default am: Attention Matching; also streaming, recent, knorm, keydiff, random, ...)");
  cmd->add_option("--keep-recent", o->keep_recent, "newest tokens kept verbatim at a compaction (default min(256, --ctx / 8))");
  cmd->add_option("--target-ratio", o->target_ratio, "after a compaction the largest head holds this fraction of --ctx (default 0.5)");
  cmd->add_option("--allocation", o->allocation, "how a compaction shares the target: proportional (default: each stretch of the conversation keeps entries in proportion to the tokens it covers) or whole (one ratio over everything, so the oldest turns are compacted again at every compaction); snapkv always uses whole");
  cmd->add_option("--high-water", o->high_water, "between turns, compact ahead when the largest head holds more than this fraction of --ctx (default 0.75)");
  cmd->add_option("--prefill-chunk", o->prefill_chunk, "prompt tokens fed per step and request (default 512)");
  cmd->add_option("--slot-save-path", o->save_path, "folder for sessions as .kvc files: written after each turn, on eviction and at SIGTERM; read back on demand and after a restart");
  cmd->add_option("--api-key", o->api_key, "require 'Authorization: Bearer KEY' on every route but / and /health (default: $KVC_API_KEY if set)");
  cmd->add_option("--alias", o->alias, "model id the API shows (default: the model file's name)");
  cmd->add_option("--max-body", o->max_body, "largest request body in bytes (default 2 MiB; more gets HTTP 413)");
  cmd->add_option("--max-tokens-cap", o->limits.max_tokens_cap, "largest max_tokens a request may ask (default 4096)");
  cmd->add_option("--max-messages", o->limits.max_messages, "most messages in one request (default 1024)");
  add_common_options(cmd, common);
  return [o, &common] {
    if (o->api_key.empty())
      if (const char* k = std::getenv("KVC_API_KEY")) o->api_key = k;
    if (o->kv_budget_mib < 0) throw Error(fmt::format("--kv-budget {}: must be >= 0", o->kv_budget_mib));
    if (o->max_body < 1024) throw Error(fmt::format("--max-body {}: must be at least 1024 bytes", o->max_body));
    if (o->limits.max_tokens_cap < 1) throw Error("--max-tokens-cap: must be at least 1");
    if (o->limits.max_messages < 1) throw Error("--max-messages: must be at least 1");
    o->limits.default_max_tokens = std::min(o->limits.default_max_tokens, o->limits.max_tokens_cap);
    serve::EngineOptions eo;
    eo.policy.ctx = o->ctx;
    eo.policy.method = parse_method_spec(o->method);
    eo.policy.keep_recent = o->keep_recent >= 0 ? o->keep_recent : std::min(256, o->ctx / 8);
    // Plain snapkv: its observation window becomes the recent tokens (serve/policy.h).
    if (o->method == "snapkv") eo.policy.method = parse_method_spec(fmt::format("snapkv:window={}", eo.policy.keep_recent));
    eo.policy.target_ratio = o->target_ratio;
    eo.policy.high_water = o->high_water;
    eo.policy.allocation = serve::parse_allocation(o->allocation);
    eo.kv_budget_bytes = static_cast<std::size_t>(o->kv_budget_mib * 1024 * 1024);
    eo.slots = o->slots;
    eo.queue = o->queue;
    eo.prefill_chunk = o->prefill_chunk;
    eo.save_dir = o->save_path;
    eo.threads = common.threads;  // the engine's threads set their own OpenMP thread count
    serve::check_policy(eo.policy);  // bad options fail before the socket opens
    if (o->port < 0 || o->port > 65535) throw Error(fmt::format("--port {}: must be in [0, 65535]", o->port));
    if (o->slots < 1) throw Error(fmt::format("--slots {}: must be at least 1", o->slots));
    if (o->queue < 0) throw Error(fmt::format("--queue {}: must be >= 0", o->queue));
    if (o->prefill_chunk < 1) throw Error(fmt::format("--prefill-chunk {}: must be >= 1", o->prefill_chunk));
    if (!o->save_path.empty()) {
      std::error_code ec;
      std::filesystem::create_directories(o->save_path, ec);
      if (!std::filesystem::is_directory(o->save_path, ec))
        throw Error(fmt::format("--slot-save-path {}: not a folder that can be created", o->save_path));
    }
    if (!std::filesystem::exists(o->m.model)) throw Error(fmt::format("{}: no such model file or folder", o->m.model));

    auto st = std::make_shared<State>();
    st->limits = o->limits;
    st->model_id = o->alias.empty() ? std::filesystem::path(o->m.model).filename().string() : o->alias;
    if (st->model_id.ends_with(".gguf")) st->model_id.resize(st->model_id.size() - 5);

    httplib::Server svr;
    svr.new_task_queue = [] { return new httplib::ThreadPool(64); };
    svr.set_payload_max_length(static_cast<std::size_t>(o->max_body));
    svr.set_read_timeout(10, 0);
    // cpp-httplib's default socket options add SO_REUSEPORT, with which a second server on the same
    // port binds too and the kernel splits the connections between them (and their --api-key):
    // SO_REUSEADDR only, so a taken port is refused.
    svr.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, reinterpret_cast<const char*>(&yes), sizeof(yes));
    });
    const std::string key = o->api_key;
    svr.set_pre_routing_handler([key](const httplib::Request& req, httplib::Response& res) {
      if (key.empty() || req.path == "/" || req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
      const std::string auth = req.get_header_value("Authorization");
      // The scheme name is case-insensitive (RFC 9110 11.1); the key is not.
      const bool bearer = auth.size() > 7 && (auth.compare(0, 7, "Bearer ") == 0 || auth.compare(0, 7, "bearer ") == 0 ||
                                              auth.compare(0, 7, "BEARER ") == 0);
      if (bearer && auth.compare(7, std::string::npos, key) == 0) return httplib::Server::HandlerResponse::Unhandled;
      send_error(res, ApiError(401, auth.empty() ? "You didn't provide an API key: send 'Authorization: Bearer KEY'"
                                                 : "Incorrect API key provided",
                               "", "invalid_api_key"));
      return httplib::Server::HandlerResponse::Handled;
    });
    svr.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413 && req.get_header_value("Content-Type") == "application/x-www-form-urlencoded")
        // cpp-httplib caps form-encoded bodies at 8 KiB (curl -d sends that type by default).
        send_error(res, ApiError(413, "the body was sent as application/x-www-form-urlencoded, which is limited to 8 KiB: "
                                      "send 'Content-Type: application/json'", "", "request_too_large"));
      else if (res.status == 413)
        send_error(res, ApiError(413, "the request body is larger than --max-body allows", "", "request_too_large"));
      else if (res.status == 404)
        send_error(res, ApiError(404, fmt::format("no route {} {}", req.method, req.path), "", "unknown_url"));
      else if (res.status == 400 && req.method == "POST" && !req.has_header("Content-Length") &&
               !req.has_header("Transfer-Encoding"))
        send_error(res, ApiError(400, "a POST needs a Content-Length header: send a body (curl -d '' or -d '{}')", "",
                                 "invalid_request_error"));
      else
        send_error(res, ApiError(res.status, fmt::format("HTTP {}", res.status), "", "",
                                 res.status >= 500 ? "server_error" : "invalid_request_error"));
    });
    svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      std::string what = "internal error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      send_error(res, ApiError(500, what, "", "", "server_error"));
    });

    svr.Get("/", [](const httplib::Request&, httplib::Response& res) { res.set_content(kChatPageHtml, "text/html; charset=utf-8"); });
    svr.Get("/health", [st](const httplib::Request&, httplib::Response& res) {
      if (st->ready) {
        res.set_content(R"({"status":"ok"})", "application/json");
      } else {
        send_error(res, ApiError(503, st->load_error.empty() ? "the model is loading" : st->load_error, "", "", "server_error"));
      }
    });
    svr.Get("/v1/models", [st](const httplib::Request&, httplib::Response& res) {
      nlohmann::json data = nlohmann::json::array();
      data.push_back({{"id", st->model_id}, {"object", "model"}, {"created", st->created}, {"owned_by", "kvcompact"}});
      res.set_content(serve::dump({{"object", "list"}, {"data", data}}), "application/json");
    });
    svr.Get(R"(/v1/models/(.+))", [st](const httplib::Request& req, httplib::Response& res) {
      if (req.matches[1] != st->model_id)
        return send_error(res, ApiError(404, fmt::format("The model '{}' does not exist", std::string(req.matches[1])),
                                        "model", "model_not_found"));
      res.set_content(serve::dump({{"id", st->model_id}, {"object", "model"}, {"created", st->created},
                                   {"owned_by", "kvcompact"}}), "application/json");
    });
    svr.Post("/v1/chat/completions", [st](const httplib::Request& req, httplib::Response& res) { handle_generation(req, res, st, true); });
    svr.Post("/v1/completions", [st](const httplib::Request& req, httplib::Response& res) { handle_generation(req, res, st, false); });
    svr.Get("/metrics", [st](const httplib::Request&, httplib::Response& res) {
      if (!st->ready) return send_error(res, ApiError(503, "the model is loading", "", "", "server_error"));
      res.set_content(serve::prometheus_metrics(st->engine->metrics(), st->model_id), "text/plain; version=0.0.4");
    });
    svr.Get("/slots", [st](const httplib::Request&, httplib::Response& res) {
      if (!st->ready) return send_error(res, ApiError(503, "the model is loading", "", "", "server_error"));
      nlohmann::json out = nlohmann::json::array();
      for (const auto& s : st->engine->metrics().sessions)
        out.push_back({{"id", s.id}, {"tokens", s.tokens}, {"cache_entries", s.entries}, {"cache_bytes", s.bytes},
                       {"longest_head", s.longest}, {"compactions", s.compactions}, {"in_memory", s.in_memory},
                       {"saved", s.saved}});
      res.set_content(serve::dump(out), "application/json");
    });
    svr.Post(R"(/slots/(.+))", [st](const httplib::Request& req, httplib::Response& res) {
      try {
        if (!st->ready) throw ApiError(503, "the model is loading", "", "", "server_error");
        const std::string id = req.matches[1];
        const std::string action = req.get_param_value("action");
        std::string filename = id;
        if (!req.body.empty()) {
          const auto body = serve::parse_body(req.body);
          if (body.contains("filename")) {
            if (!body["filename"].is_string()) throw ApiError(400, "'filename' must be a string", "filename", "invalid_type");
            filename = body["filename"].get<std::string>();
            if (filename.ends_with(".kvc")) filename.resize(filename.size() - 4);
          }
        }
        try {
          serve::SessionStore::check_name(id);
          serve::SessionStore::check_name(filename);
        } catch (const Error& e) {
          throw ApiError(400, e.what(), "filename");
        }
        if (action != "save" && action != "restore" && action != "erase")
          throw ApiError(400, fmt::format("action '{}': must be save, restore or erase", action), "action");
        nlohmann::json out = st->engine->with_store([&](serve::SessionStore& store) -> nlohmann::json {
          if (action == "erase") {
            if (!store.erase(id)) throw ApiError(404, fmt::format("no session '{}'", id), "id", "not_found");
            return {{"id", id}, {"erased", true}};
          }
          if (!store.saving()) throw ApiError(400, "the server runs without --slot-save-path", "action");
          if (action == "restore") {
            try {
              store.restore(filename);
            } catch (const Error& e) {
              throw ApiError(404, e.what(), "filename", "not_found");
            }
            return {{"id", filename}, {"restored", true}};
          }
          if (!store.save_idle(id, filename))
            throw ApiError(404, fmt::format("no idle session '{}' in memory", id), "id", "not_found");
          return {{"id", id}, {"filename", filename + ".kvc"}, {"saved", true}};
        });
        res.set_content(serve::dump(out), "application/json");
      } catch (const ApiError& e) {
        send_error(res, e);
      } catch (const std::exception& e) {
        send_error(res, ApiError(500, e.what(), "", "", "server_error"));
      }
    });

    int port = o->port;
    if (port == 0) {
      port = svr.bind_to_any_port(o->host);
      if (port < 0) throw Error(fmt::format("--host {}: cannot listen", o->host));
    } else if (!svr.bind_to_port(o->host, port)) {
      throw Error(fmt::format("--host {} --port {}: cannot listen (in use, or not an address of this machine)", o->host, port));
    }
    std::fprintf(stderr, "kvcompact serve: listening on http://%s:%d (model %s loading)\n", o->host.c_str(), port,
                 st->model_id.c_str());
    std::fflush(stderr);
    g_server = &svr;
    std::signal(SIGTERM, on_signal);
    std::signal(SIGINT, on_signal);
    std::thread loader([st, o, eo] {
      try {
        auto model = std::make_unique<Model>(load_model(o->m.model, o->m.tokenizer));
        std::shared_ptr<const ChatTemplate> tmpl;
        try {
          tmpl = find_chat_template(o->m.model, o->m.tokenizer);
        } catch (const Error& e) {
          log_line(fmt::format("serve: {}; /v1/chat/completions is off, /v1/completions works", e.what()));
        }
        st->prompts = std::make_unique<serve::PromptBuilder>(*model->tokenizer, tmpl);
        st->engine = std::make_unique<serve::Engine>(*model, eo);
        st->model = std::move(model);
        st->ready = true;
        std::fprintf(stderr, "kvcompact serve: ready (model %s, --ctx %d, --method %s)\n", st->model_id.c_str(),
                     eo.policy.ctx, to_string(eo.policy.method).c_str());
        std::fflush(stderr);
      } catch (const std::exception& e) {
        st->load_error = fmt::format("the model failed to load: {}", e.what());
        std::fprintf(stderr, "kvcompact: error: %s\n", e.what());
        if (httplib::Server* s = g_server.load()) s->stop();
      }
    });
    svr.listen_after_bind();
    g_server = nullptr;
    loader.join();
    if (st->engine) st->engine->stop();  // saves idle sessions (with --slot-save-path)
    return st->load_error.empty() ? 0 : 1;
  };
}

}  // namespace kvcompact::cli
