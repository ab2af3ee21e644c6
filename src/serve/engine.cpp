#include "serve/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <exception>
#include <future>

#include "core/error.h"
#include "core/log.h"
#include "core/model_fingerprint.h"
#include "model/sampler.h"

#include <omp.h>

namespace kvcompact::serve {
namespace {

using Clock = std::chrono::steady_clock;

/// Bytes at the end of `s` that start a UTF-8 sequence not yet complete (0 .. 3).
std::size_t incomplete_utf8_tail(const std::string& s) {
  const std::size_t n = s.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(4, n); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const std::size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

/// End-of-turn tokens of the common chat templates.
constexpr const char* kEndOfTurn[] = {"<|im_end|>", "<|endoftext|>", "<end_of_turn>", "<|eot_id|>", "<|end|>",
                                      "<|end_of_text|>", "</s>", "<eos>"};

GenerationEvent text_event(std::string text) {
  GenerationEvent e;
  e.text = std::move(text);
  return e;
}

GenerationEvent failed_event(int status, std::string message) {
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::Failed;
  e.status = status;
  e.message = std::move(message);
  return e;
}

}  // namespace

std::optional<GenerationEvent> Ticket::next(int timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] { return !events_.empty(); })) return std::nullopt;
  GenerationEvent e = std::move(events_.front());
  events_.pop_front();
  return e;
}

void Ticket::push(GenerationEvent e) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    events_.push_back(std::move(e));
  }
  cv_.notify_all();
}

/// A request being served: its session, what of its prompt is fed, what it generated.
struct Engine::Active {
  std::shared_ptr<Ticket> ticket;
  GenerationRequest req;
  std::unique_ptr<Session> s;
  std::size_t fed = 0;  ///< prompt tokens in the cache
  Sampler sampler;
  int pending = -1;     ///< sampled token to feed next (decode phase)
  std::vector<int> generated;
  std::string text;
  std::size_t emitted = 0;  ///< bytes of text sent
  int prev = -1;            ///< last token (for decode_token)
  KvUsage kv;
  bool done = false;
  std::size_t max_stop = 0;

  Active(std::shared_ptr<Ticket> t, GenerationRequest r, int vocab, uint64_t seed)
      : ticket(std::move(t)), req(std::move(r)), sampler(vocab, req.temperature, req.top_p, seed) {
    for (const auto& st : req.stop) max_stop = std::max(max_stop, st.size());
  }
  bool prefilling() const { return fed < req.prompt.size(); }
};

Engine::Engine(const Model& model, EngineOptions options)
    : model_(model), options_(std::move(options)), transformer_(model.config, model.weights),
      fingerprint_(model_fingerprint(model.config, model.weights)) {
  check_policy(options_.policy);
  if (options_.slots < 1) throw Error(fmt::format("--slots {}: must be at least 1", options_.slots));
  if (options_.queue < 0) throw Error(fmt::format("--queue {}: must be >= 0", options_.queue));
  if (options_.prefill_chunk < 1) throw Error(fmt::format("--prefill-chunk {}: must be >= 1", options_.prefill_chunk));
  if (!model_.tokenizer) throw Error(fmt::format("{}: the model has no tokenizer", model_.path));
  store_ = std::make_unique<SessionStore>(model_, fingerprint_, options_.save_dir);
  const Tokenizer& tok = *model_.tokenizer;
  if (tok.eos_id() >= 0) stop_tokens_.insert(tok.eos_id());
  for (int id = 0; id < tok.vocab_size(); ++id) {
    const std::string& p = tok.piece(id);
    if (p.size() < 3 || p.size() > 16 || (p[0] != '<')) continue;
    for (const char* e : kEndOfTurn)
      if (p == e) stop_tokens_.insert(id);
  }
  refresh_metrics({});  // sessions saved by an earlier run are listed before any request
  worker_ = std::thread([this] { run(); });
  compactor_ = std::thread([this] { compact_loop(); });
}

Engine::~Engine() { stop(); }

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ && !worker_.joinable()) return;
    stopping_ = true;
  }
  cv_.notify_all();
  compact_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
  if (compactor_.joinable()) compactor_.join();
  // Sessions the compactor finished after the worker stopped: back to the store and saved.
  take_compacted();
  save_idle();
}

void Engine::compact_loop() {
  if (options_.threads > 0) omp_set_num_threads(options_.threads);
  for (;;) {
    std::unique_ptr<Session> s;
    {
      std::unique_lock<std::mutex> lock(mu_);
      compact_cv_.wait(lock, [&] { return stopping_ || !to_compact_.empty(); });
      if (to_compact_.empty()) return;  // stopping, nothing left
      s = std::move(to_compact_.front());
      to_compact_.pop_front();
    }
    CompactionReport r;
    bool done = false;
    try {
      done = compact_session(transformer_, *model_.tokenizer, options_.policy, *s, &r);
    } catch (const std::exception& ex) {
      log_line(fmt::format("serve: session {}: compaction between turns failed: {}", s->id, ex.what()));
    }
    if (done) record_compaction(*s, r, "between turns");
    {
      std::lock_guard<std::mutex> lock(mu_);
      compacted_.push_back(std::move(s));
    }
    cv_.notify_all();
  }
}

void Engine::take_compacted() {
  std::deque<std::unique_ptr<Session>> back;
  {
    std::lock_guard<std::mutex> lock(mu_);
    back.swap(compacted_);
  }
  for (auto& s : back) {
    compacting_.erase(s->id);
    s->dirty = true;
    store_->put(std::move(s));
  }
  if (!back.empty()) save_idle();
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.compactions_running = static_cast<int>(compacting_.size());
}

bool Engine::waits_for_compaction(const std::vector<int>& prompt) const {
  return std::any_of(compacting_.begin(), compacting_.end(), [&](const auto& c) {
    return SessionStore::extends(c.second, prompt, options_.policy.keep_recent);
  });
}

bool Engine::front_admissible() const {
  return !queue_.empty() && !waits_for_compaction(queue_.front().second.prompt);
}

void Engine::record_compaction(const Session& s, const CompactionReport& r, const char* when) {
  log_line(fmt::format("serve: session {} compacted {} at {} tokens: largest head {} -> {} entries in {:.2f} s", s.id,
                       when, s.tokens.size(), r.longest_before, r.longest_after, r.seconds));
  std::lock_guard<std::mutex> lock(mu_);
  ++metrics_.compactions;
  metrics_.compaction_seconds += r.seconds;
}

void Engine::save_idle() {
  if (!store_->saving()) return;
  try {
    store_->save_all();
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.saves;
  } catch (const std::exception& ex) {
    log_line(fmt::format("serve: saving sessions failed: {}", ex.what()));
  }
}

std::shared_ptr<Ticket> Engine::submit(GenerationRequest request) {
  auto t = std::make_shared<Ticket>();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw Error("the server is shutting down");
    if (static_cast<int>(queue_.size()) >= options_.queue + std::max(0, options_.slots - metrics_.in_flight)) {
      ++metrics_.requests_rejected;
      throw QueueFull{};
    }
    queue_.emplace_back(t, std::move(request));
    metrics_.queued = static_cast<int>(queue_.size());
  }
  cv_.notify_all();
  return t;
}

nlohmann::json Engine::with_store(const std::function<nlohmann::json(SessionStore&)>& fn) {
  auto p = std::make_shared<std::promise<nlohmann::json>>();
  auto f = p->get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) throw Error("the server is shutting down");
    tasks_.push_back([this, p, fn] {
      try {
        p->set_value(fn(*store_));
      } catch (...) {
        p->set_exception(std::current_exception());
      }
    });
  }
  cv_.notify_all();
  return f.get();
}

EngineMetrics Engine::metrics() const {
  std::lock_guard<std::mutex> lock(mu_);
  return metrics_;
}

void Engine::refresh_metrics(const std::vector<std::unique_ptr<Active>>& active) {
  std::vector<SessionInfo> sessions = store_->list();
  // A session checked out by a request is listed from the request (the store may still list
  // its saved file).
  sessions.erase(std::remove_if(sessions.begin(), sessions.end(),
                                [&](const SessionInfo& s) {
                                  return std::any_of(active.begin(), active.end(),
                                                     [&](const auto& a) { return a->s && a->s->id == s.id; });
                                }),
                 sessions.end());
  for (const auto& a : active)
    if (a->s) sessions.push_back({a->s->id, a->s->tokens.size(), a->s->cache.total_entries(), allocated_bytes(a->s->cache),
                        a->s->cache.longest_global_length(), a->s->compactions, true, false});
  std::lock_guard<std::mutex> lock(mu_);
  metrics_.sessions = std::move(sessions);
  metrics_.kv_entries = metrics_.kv_bytes = 0;
  for (const auto& s : metrics_.sessions) metrics_.kv_entries += s.entries, metrics_.kv_bytes += s.bytes;
  metrics_.in_flight = static_cast<int>(active.size());
  metrics_.queued = static_cast<int>(queue_.size());
}

void Engine::fail(Active& a, int status, const std::string& message) {
  a.ticket->push(failed_event(status, message));
  a.done = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests_failed;
  }
  release(a);
}

void Engine::release(Active& a) {
  if (!a.s) return;
  shrink_to_fit(a.s->cache);
  a.s->dirty = true;
  store_->put(std::move(a.s));
}

bool Engine::ensure_room(Active& a, int tokens) {
  const CompactionPolicy& p = options_.policy;
  Session& s = *a.s;
  if (static_cast<int>(s.cache.longest_global_length()) + tokens <= p.ctx) return true;
  CompactionReport r;
  if (s.tokens.size() >= 2 && compact_session(transformer_, *model_.tokenizer, p, s, &r)) {
    a.kv.compaction_seconds += r.seconds;
    record_compaction(s, r, "during a turn");
  }
  return static_cast<int>(s.cache.longest_global_length()) + std::min(tokens, 1) <= p.ctx;
}

void Engine::finish(Active& a, const std::string& reason) {
  Session& s = *a.s;
  shrink_to_fit(s.cache);
  GenerationEvent e;
  e.kind = GenerationEvent::Kind::Done;
  e.finish_reason = reason;
  e.prompt_tokens = static_cast<int>(a.req.prompt.size());
  e.completion_tokens = static_cast<int>(a.generated.size());
  e.tokens = a.generated;
  a.kv.session = s.id;
  a.kv.cache_entries = s.cache.total_entries();
  a.kv.cache_bytes = allocated_bytes(s.cache);
  a.kv.longest_head = s.cache.longest_global_length();
  a.kv.original_tokens = s.tokens.size();
  a.kv.compactions = s.compactions;
  e.kv = a.kv;
  a.ticket->push(std::move(e));
  a.done = true;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++metrics_.requests;
  }
  // Between turns: when the cache passed the high-water mark, the compactor thread compacts it
  // while the worker goes on with the other sessions (the answer is out); else it is saved now.
  const CompactionPolicy& p = options_.policy;
  if (s.cache.longest_global_length() > static_cast<std::size_t>(p.high_water * p.ctx) && s.tokens.size() >= 2) {
    compacting_[s.id] = s.tokens;
    {
      std::lock_guard<std::mutex> lock(mu_);
      to_compact_.push_back(std::move(a.s));
      metrics_.compactions_running = static_cast<int>(compacting_.size());
    }
    compact_cv_.notify_all();
    return;
  }
  release(a);
  save_idle();
}

void Engine::admit(std::vector<std::unique_ptr<Active>>& active) {
  while (static_cast<int>(active.size()) < options_.slots) {
    std::shared_ptr<Ticket> t;
    GenerationRequest req;
    {
      std::lock_guard<std::mutex> lock(mu_);
      // The next turn of a conversation whose session is being compacted waits for it (it would
      // otherwise prefill the whole history again); requests behind it wait too, in order.
      if (!front_admissible()) return;
      t = std::move(queue_.front().first);
      req = std::move(queue_.front().second);
      queue_.pop_front();
      metrics_.queued = static_cast<int>(queue_.size());
      metrics_.in_flight = static_cast<int>(active.size()) + 1;  // submit() counts free slots by it
    }
    if (t->cancelled()) {
      std::lock_guard<std::mutex> lock(mu_);
      ++metrics_.requests_cancelled;
      continue;
    }
    const uint64_t seed = req.seed ? req.seed : static_cast<uint64_t>(std::time(nullptr)) ^ reinterpret_cast<uintptr_t>(t.get());
    auto a = std::make_unique<Active>(t, std::move(req), model_.tokenizer->vocab_size(), seed);
    const CompactionPolicy& p = options_.policy;
    try {
      Checkout c = store_->take(a->req.prompt, p.keep_recent);
      a->s = std::move(c.session);
      a->fed = static_cast<std::size_t>(c.reused);
      if (c.reused == 0) {
        a->s->cache = transformer_.make_cache();
        a->s->tokens.clear();
        a->s->compacted_until = 0;
        a->s->protected_prefix = std::max(1, a->req.protected_prefix);
      }
      a->kv.reused_tokens = c.reused;
      a->kv.prefilled_tokens = static_cast<int>(a->req.prompt.size()) - c.reused;
      const int fresh = a->kv.prefilled_tokens;
      if (fresh > p.ctx - a->s->protected_prefix) {
        fail(*a, 400,
             fmt::format("the new messages are {} tokens, more than --ctx {} entries per head leave after the {}-token "
                         "protected prefix; no compaction can hold them",
                         fresh, p.ctx, a->s->protected_prefix));
        continue;
      }
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.prompt_tokens += a->req.prompt.size();
      metrics_.reused_tokens += static_cast<uint64_t>(c.reused);
    } catch (const std::exception& ex) {
      if (a->s) fail(*a, 500, ex.what());
      else a->ticket->push(failed_event(500, ex.what()));
      continue;
    }
    active.push_back(std::move(a));
  }
}

void Engine::step(std::vector<std::unique_ptr<Active>>& active) {
  const Tokenizer& tok = *model_.tokenizer;
  std::vector<BatchSequence> batch;
  std::vector<Active*> owners;
  std::vector<int> decode_token(active.size());
  std::size_t prefill_rows = 0;
  for (std::size_t i = 0; i < active.size(); ++i) {
    Active& a = *active[i];
    if (a.ticket->cancelled()) {
      a.done = true;
      release(a);
      std::lock_guard<std::mutex> lock(mu_);
      ++metrics_.requests_cancelled;
      continue;
    }
    try {
      BatchSequence seq;
      if (a.prefilling()) {
        int chunk = static_cast<int>(std::min<std::size_t>(options_.prefill_chunk, a.req.prompt.size() - a.fed));
        if (!ensure_room(a, chunk)) {
          fail(a, 400, fmt::format("the conversation cannot be held in --ctx {} entries per head", options_.policy.ctx));
          continue;
        }
        chunk = std::min(chunk, options_.policy.ctx - static_cast<int>(a.s->cache.longest_global_length()));
        seq.tokens = std::span<const int>(a.req.prompt.data() + a.fed, static_cast<std::size_t>(chunk));
        if (a.fed + static_cast<std::size_t>(chunk) == a.req.prompt.size()) seq.logit_rows = {chunk - 1};
        prefill_rows += static_cast<std::size_t>(chunk);
      } else {
        if (!ensure_room(a, 1)) {
          fail(a, 400, fmt::format("the conversation cannot be held in --ctx {} entries per head", options_.policy.ctx));
          continue;
        }
        decode_token[i] = a.pending;
        seq.tokens = std::span<const int>(&decode_token[i], 1);
        seq.logit_rows = {0};
      }
      seq.cache = &a.s->cache;
      batch.push_back(seq);
      owners.push_back(&a);
    } catch (const std::exception& ex) {
      fail(a, 500, ex.what());
    }
  }
  if (!batch.empty()) {
    const auto t0 = Clock::now();
    std::vector<float> logits;
    try {
      logits = transformer_.forward_batch(batch);
    } catch (const std::exception& ex) {
      for (Active* a : owners) fail(*a, 500, ex.what());
      owners.clear();
    }
    const double secs = seconds_since(t0);
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (prefill_rows > 0) {
        metrics_.prefill_seconds += secs;
        metrics_.prefilled_tokens += prefill_rows;
      } else {
        metrics_.decode_seconds += secs;
        ++metrics_.decode_steps;
      }
    }
    const std::size_t V = static_cast<std::size_t>(model_.config.vocab_size);
    std::size_t row = 0;
    for (std::size_t b = 0; b < owners.size(); ++b) {
      Active& a = *owners[b];
      Session& s = *a.s;
      s.tokens.insert(s.tokens.end(), batch[b].tokens.begin(), batch[b].tokens.end());
      if (a.prefilling()) a.fed += batch[b].tokens.size();
      if (batch[b].logit_rows.empty()) continue;
      std::span<const float> lg(logits.data() + row * V, V);
      ++row;
      s.last_logits.assign(lg.begin(), lg.end());
      a.prev = s.tokens.back();
      int next;
      try {
        next = a.sampler.sample(lg);
      } catch (const std::exception& ex) {
        fail(a, 500, ex.what());
        continue;
      }
      if (stop_tokens_.count(next)) {
        if (a.emitted < a.text.size()) a.ticket->push(text_event(a.text.substr(a.emitted)));
        finish(a, "stop");
        continue;
      }
      a.generated.push_back(next);
      {
        std::lock_guard<std::mutex> lock(mu_);
        ++metrics_.generated_tokens;
      }
      a.text += tok.decode_token(a.prev, next);
      // Stop strings: the text ends before the first one found.
      std::size_t cut = std::string::npos;
      const std::size_t from = a.emitted > a.max_stop ? a.emitted - a.max_stop : 0;
      for (const auto& st : a.req.stop)
        if (!st.empty()) cut = std::min(cut, a.text.find(st, from));
      const bool length = static_cast<int>(a.generated.size()) >= a.req.max_tokens;
      if (cut != std::string::npos || length) {
        if (cut != std::string::npos) a.text.resize(cut);
        if (a.emitted < a.text.size()) a.ticket->push(text_event(a.text.substr(a.emitted)));
        a.emitted = a.text.size();
        finish(a, cut != std::string::npos ? "stop" : "length");
        continue;
      }
      // Hold back what may start a stop string or an unfinished UTF-8 character.
      std::size_t safe = a.text.size() - incomplete_utf8_tail(a.text);
      if (a.max_stop > 1) safe = std::min(safe, a.text.size() > a.max_stop - 1 ? a.text.size() - (a.max_stop - 1) : 0);
      while (safe > a.emitted && safe < a.text.size() && (static_cast<unsigned char>(a.text[safe]) & 0xC0) == 0x80) --safe;
      if (safe > a.emitted) {
        a.ticket->push(text_event(a.text.substr(a.emitted, safe - a.emitted)));
        a.emitted = safe;
      }
      a.pending = next;
    }
  }
  active.erase(std::remove_if(active.begin(), active.end(), [](const auto& a) { return a->done; }), active.end());
}

void Engine::run() {
  if (options_.threads > 0) omp_set_num_threads(options_.threads);
  std::vector<std::unique_ptr<Active>> active;
  for (;;) {
    std::deque<std::function<void()>> tasks;
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] {
        // A queued turn whose session is being compacted does not wake the worker (it would spin
        // beside the compactor); the compactor's cv_.notify_all when it finishes does.
        return stopping_ || front_admissible() || !tasks_.empty() || !active.empty() || !compacted_.empty();
      });
      tasks.swap(tasks_);
      stopping = stopping_;
    }
    take_compacted();
    for (auto& t : tasks) t();
    if (stopping) break;
    admit(active);
    if (!active.empty()) step(active);
    std::size_t busy = 0;
    for (const auto& a : active) busy += allocated_bytes(a->s->cache);
    const int evicted = store_->enforce_budget(options_.kv_budget_bytes, busy);
    if (evicted > 0) {
      std::lock_guard<std::mutex> lock(mu_);
      metrics_.evictions += static_cast<uint64_t>(evicted);
    }
    refresh_metrics(active);
  }
  for (auto& a : active) fail(*a, 503, "the server is shutting down");
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [t, r] : queue_) t->push(failed_event(503, "the server is shutting down"));
    queue_.clear();
  }
}

}  // namespace kvcompact::serve
