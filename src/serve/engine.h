// The server's engine: one worker thread that owns the model, admits generation requests from a
// bounded queue, prefills their new tokens over the best matching session's cache, and decodes
// every active request in one batched forward per step (Transformer::forward_batch).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "model/transformer.h"
#include "serve/policy.h"
#include "serve/session_store.h"

namespace kvcompact::serve {

/// Settings of the engine (`kvcompact serve` options).
struct EngineOptions {
  CompactionPolicy policy;
  std::size_t kv_budget_bytes = 0;  ///< all sessions' KV bytes together (0: no limit)
  int slots = 4;                    ///< requests generating at once (>= 1)
  int queue = 16;                   ///< requests waiting at most; one more gets 429 (>= 0)
  int prefill_chunk = 512;          ///< prompt tokens fed per step and request (>= 1)
  std::string save_dir;             ///< --slot-save-path ("" = sessions are not saved)
  int threads = 0;                  ///< OpenMP threads of the worker and the compactor (0: the default)
};

/// One generation: the rendered prompt's tokens and the sampling settings.
struct GenerationRequest {
  std::vector<int> prompt;       ///< [n] BOS (if the tokenizer adds one) and the rendered text
  int protected_prefix = 1;      ///< leading tokens never compacted (template + system messages)
  int max_tokens = 256;          ///< generated tokens at most (>= 1)
  float temperature = 1.0f;      ///< 0 = greedy
  float top_p = 1.0f;            ///< nucleus mass; >= 1 samples the full distribution
  uint64_t seed = 0;             ///< 0: time-based
  std::vector<std::string> stop; ///< stop strings (not included in the text)
};

/// The `usage.kvcompact` figures of a finished request.
struct KvUsage {
  std::string session;            ///< the session id (its slot name)
  std::size_t cache_entries = 0;  ///< entries over all heads after the turn
  std::size_t cache_bytes = 0;    ///< bytes the cache holds (allocated) after the turn
  std::size_t longest_head = 0;   ///< entries of the largest global head (the --ctx measure)
  std::size_t original_tokens = 0;///< tokens of history the cache stands for
  int compactions = 0;            ///< compactions of this session so far
  int reused_tokens = 0;          ///< prompt tokens taken from the session's cache
  int prefilled_tokens = 0;       ///< prompt tokens computed by this request
  double compaction_seconds = 0;  ///< compaction time during this request (before its answer)
};

/// What a request produces, in order: Text pieces, then Done or Failed.
struct GenerationEvent {
  enum class Kind { Text, Done, Failed } kind = Kind::Text;
  std::string text;           ///< Text: the next piece (complete UTF-8)
  std::string finish_reason;  ///< Done: "stop" or "length"
  int prompt_tokens = 0, completion_tokens = 0;
  std::vector<int> tokens;    ///< Done: the generated ids
  KvUsage kv;
  int status = 0;             ///< Failed: HTTP status (400 for prompts no compaction can hold, 500 otherwise)
  std::string message;        ///< Failed
};

/// A submitted request's handle: events arrive in order; cancel() stops its generation (a client
/// that disconnected). Thread-safe.
class Ticket {
 public:
  /// Waits up to timeout_ms for the next event; nullopt on timeout.
  std::optional<GenerationEvent> next(int timeout_ms);
  void cancel() { cancelled_ = true; }
  bool cancelled() const { return cancelled_; }
  void push(GenerationEvent e);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<GenerationEvent> events_;
  std::atomic<bool> cancelled_{false};
};

/// Counters for GET /metrics (Prometheus) and GET /slots.
struct EngineMetrics {
  uint64_t requests = 0, requests_failed = 0, requests_cancelled = 0, requests_rejected = 0;
  uint64_t prompt_tokens = 0, prefilled_tokens = 0, reused_tokens = 0, generated_tokens = 0;
  double prefill_seconds = 0, decode_seconds = 0;
  uint64_t decode_steps = 0;
  uint64_t compactions = 0;
  double compaction_seconds = 0;
  uint64_t evictions = 0, saves = 0;
  int in_flight = 0, queued = 0;
  int compactions_running = 0;  ///< sessions being compacted between turns (in the background)
  std::size_t kv_entries = 0, kv_bytes = 0, kv_bytes_used = 0;
  std::vector<SessionInfo> sessions;  ///< idle and active
};

/// Thrown by submit() when the queue is full (HTTP 429).
struct QueueFull {};

class Engine {
 public:
  /// Starts the worker. `model` must outlive the engine. Throws Error for bad options.
  Engine(const Model& model, EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// Queues a request. Throws QueueFull when `queue` requests already wait, Error when stopping.
  std::shared_ptr<Ticket> submit(GenerationRequest request);

  /// Runs `fn` on the worker between steps with the session store (slot actions) and returns its
  /// result; exceptions propagate to the caller.
  nlohmann::json with_store(const std::function<nlohmann::json(SessionStore&)>& fn);

  EngineMetrics metrics() const;
  /// Stops the worker: active requests fail with 503, idle sessions are saved (if saving).
  void stop();

  const Model& model() const { return model_; }
  const EngineOptions& options() const { return options_; }
  /// Token ids that end a turn (EOS and the end-of-turn tokens of common templates present in the vocabulary).
  const std::set<int>& stop_tokens() const { return stop_tokens_; }

 private:
  struct Active;
  void run();
  void admit(std::vector<std::unique_ptr<Active>>& active);
  void step(std::vector<std::unique_ptr<Active>>& active);
  void finish(Active& a, const std::string& reason);
  void fail(Active& a, int status, const std::string& message);
  void release(Active& a);
  bool ensure_room(Active& a, int tokens);
  void refresh_metrics(const std::vector<std::unique_ptr<Active>>& active);
  /// The compactor thread: compacts the sessions finish() hands it, between turns, beside the
  /// worker's decoding, and hands them back (compacted_).
  void compact_loop();
  /// Puts the sessions the compactor finished back into the store (saving them if saving).
  void take_compacted();
  /// Whether the prompt extends a session that is being compacted (its request then waits for it).
  bool waits_for_compaction(const std::vector<int>& prompt) const;
  /// Whether the queue's first request can be admitted now: there is one and its session is not
  /// being compacted (worker thread, mu_ held).
  bool front_admissible() const;
  /// Logs a compaction and counts it in the metrics (worker or compactor thread).
  void record_compaction(const Session& s, const CompactionReport& r, const char* when);
  /// Writes the idle sessions that changed to the save folder, when there is one.
  void save_idle();

  const Model& model_;
  EngineOptions options_;
  Transformer transformer_;
  uint64_t fingerprint_;
  std::unique_ptr<SessionStore> store_;
  std::set<int> stop_tokens_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::shared_ptr<Ticket>, GenerationRequest>> queue_;
  std::deque<std::function<void()>> tasks_;  ///< with_store calls, run by the worker
  bool stopping_ = false;
  EngineMetrics metrics_;
  std::deque<std::unique_ptr<Session>> to_compact_, compacted_;  ///< guarded by mu_
  std::map<std::string, std::vector<int>> compacting_;           ///< worker only: id -> history
  std::condition_variable compact_cv_;
  std::thread worker_, compactor_;
};

}  // namespace kvcompact::serve
