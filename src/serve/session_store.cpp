#include "serve/session_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "io/atomic_file.h"
#include "loaders/kvc_file.h"

namespace kvcompact::serve {
namespace fs = std::filesystem;

SessionStore::SessionStore(const Model& model, uint64_t fingerprint, std::string save_dir)
    : model_(model), fingerprint_(fingerprint), save_dir_(std::move(save_dir)) {
  if (save_dir_.empty()) return;
  std::error_code ec;
  fs::create_directories(save_dir_, ec);
  if (!fs::is_directory(save_dir_, ec))
    throw Error(fmt::format("--slot-save-path {}: not a folder that can be created", save_dir_));
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(save_dir_, ec))
    if (e.is_regular_file() && e.path().extension() == ".kvc") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    const std::string name = f.stem().string();
    try {
      check_name(name);
      const std::unique_ptr<Session> read = read_session(f.string(), name);
      Saved sv{f.string(), read->tokens, read->compacted_until, read->protected_prefix};
      saved_[name] = std::move(sv);
      // Keep ids of restored sessions from colliding with new ones.
      if (name.size() > 1 && name[0] == 's' && std::all_of(name.begin() + 1, name.end(), ::isdigit))
        next_id_ = std::max<uint64_t>(next_id_, std::stoull(name.substr(1)) + 1);
    } catch (const Error& e) {
      log_line(fmt::format("serve: skipping saved session {}", e.what()));
    }
  }
  if (!saved_.empty()) log_line(fmt::format("serve: {} saved session(s) in {}", saved_.size(), save_dir_));
}

std::string SessionStore::new_id() {
  std::string id;
  do id = fmt::format("s{}", next_id_++);
  while (idle_.count(id) || saved_.count(id));
  return id;
}

void SessionStore::check_name(const std::string& name) {
  const bool ok = !name.empty() && name.size() <= 128 && name[0] != '.' &&
                  std::all_of(name.begin(), name.end(), [](char c) {
                    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                           c == '-' || c == '.';
                  });
  if (!ok)
    throw Error(fmt::format("slot name '{}': must be 1-128 characters of A-Z a-z 0-9 _ - . and not start with '.'",
                            name));
}

std::unique_ptr<Session> SessionStore::read_session(const std::string& path, const std::string& id) const {
  KvcFile k = read_kvc_file(path);
  check_kvc_model(k, path, model_.config, fingerprint_, model_.path);
  auto s = std::make_unique<Session>();
  s->id = id;
  s->tokens.assign(k.context_tokens.begin(), k.context_tokens.end());
  s->cache = std::move(k.cache);
  s->last_logits = std::move(k.last_logits);
  // Without its serve state the whole history counts as compacted: no rollback into it.
  s->compacted_until = static_cast<int>(s->tokens.size());
  std::ifstream side(fs::path(path).replace_extension(".json"));
  if (side) {
    try {
      const auto j = nlohmann::json::parse(side);
      s->compacted_until = j.value("compacted_until", s->compacted_until);
      s->protected_prefix = j.value("protected_prefix", 0);
      s->compactions = j.value("compactions", 0);
      s->compaction_seconds = j.value("compaction_seconds", 0.0);
    } catch (const nlohmann::json::exception&) {
    }
  }
  s->dirty = false;
  return s;
}

bool SessionStore::extends(std::span<const int> history, std::span<const int> prompt, int max_rollback) {
  return common_prefix(history, prompt) + static_cast<std::size_t>(std::max(0, max_rollback)) >= history.size();
}

Checkout SessionStore::take(std::span<const int> prompt, int max_rollback) {
  const int limit = static_cast<int>(prompt.size()) - 1;  // one token is always fed
  std::string best;
  int best_len = 0;
  auto consider = [&](const std::string& id, std::span<const int> history, int compacted_until, int protected_prefix) {
    if (!extends(history, prompt, max_rollback)) return;  // diverges too early: another branch
    const int m = static_cast<int>(common_prefix(history, prompt));
    const int use = std::min(m, limit);
    if (use < compacted_until || use <= 0) return;
    // A rollback that keeps little beyond the template and system prefix would hand this session
    // to another conversation that only shares the system prompt (and overwrite its saved file):
    // a prompt may roll a session back only when it shares more than half of the conversation
    // after that prefix (a regenerated last answer, an edited last message).
    const int hist = static_cast<int>(history.size()), pp = std::min(protected_prefix, hist);
    if (use < hist && 2 * (use - pp) <= hist - pp) return;
    if (use > best_len) best_len = use, best = id;
  };
  for (const auto& [id, s] : idle_)
    consider(id, s->tokens, earliest_rollback(s->cache, s->compacted_until), s->protected_prefix);
  for (const auto& [id, sv] : saved_)
    if (!idle_.count(id)) consider(id, sv.tokens, sv.compacted_until, sv.protected_prefix);
  Checkout out;
  if (best.empty()) {
    out.session = std::make_unique<Session>();
    out.session->id = new_id();
    return out;
  }
  if (auto it = idle_.find(best); it != idle_.end()) {
    out.session = std::move(it->second);
    idle_.erase(it);
  } else {
    out.session = read_session(saved_.at(best).path, best);
  }
  Session& s = *out.session;
  if (best_len < static_cast<int>(s.tokens.size())) {
    rollback_to(s.cache, best_len, s.compacted_until);
    s.tokens.resize(static_cast<std::size_t>(best_len));
    s.dirty = true;
  }
  out.reused = best_len;
  return out;
}

void SessionStore::put(std::unique_ptr<Session> s) {
  s->last_used = ++clock_;
  const std::string id = s->id;
  idle_[id] = std::move(s);
}

void SessionStore::save(const Session& s, const std::string& name) {
  if (save_dir_.empty()) throw Error("slot save: the server runs without --slot-save-path");
  check_name(name);
  if (s.tokens.empty()) throw Error(fmt::format("slot save {}: the session holds no tokens", name));
  KvcFile k;
  k.model_fingerprint = fingerprint_;
  k.model_name = fs::path(model_.path).filename().string();
  k.config = model_.config;
  k.method = "serve";
  k.ratio = s.tokens.empty() ? 1.0 : std::min(1.0, static_cast<double>(s.cache.longest_global_length()) / s.tokens.size());
  k.context_tokens.assign(s.tokens.begin(), s.tokens.end());
  k.last_logits = s.last_logits;
  if (k.last_logits.size() != static_cast<std::size_t>(model_.config.vocab_size))
    k.last_logits.assign(static_cast<std::size_t>(model_.config.vocab_size), 0.0f);
  k.cache = s.cache;
  const std::string path = (fs::path(save_dir_) / (name + ".kvc")).string();
  // The .json first: a crash between the two writes leaves the previous .kvc with a newer
  // compacted_until, which only forbids some rollbacks (never a wrong reuse).
  const nlohmann::json side = {{"protected_prefix", s.protected_prefix}, {"compactions", s.compactions},
                               {"compaction_seconds", s.compaction_seconds},
                               {"compacted_until", s.compacted_until}};
  write_file_atomic((fs::path(save_dir_) / (name + ".json")).string(), side.dump() + "\n");
  write_kvc_file(path, k);
  Saved sv;
  sv.path = path;
  sv.tokens = s.tokens;
  sv.compacted_until = s.compacted_until;
  sv.protected_prefix = s.protected_prefix;
  saved_[name] = std::move(sv);
}

bool SessionStore::save_idle(const std::string& id, const std::string& name) {
  auto it = idle_.find(id);
  if (it == idle_.end()) return false;
  save(*it->second, name);
  if (name == id) it->second->dirty = false;
  return true;
}

void SessionStore::restore(const std::string& name) {
  if (save_dir_.empty()) throw Error("slot restore: the server runs without --slot-save-path");
  check_name(name);
  const std::string path = (fs::path(save_dir_) / (name + ".kvc")).string();
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) throw Error(fmt::format("{}: no such saved slot", path));
  std::unique_ptr<Session> s = read_session(path, name);
  saved_[name] = Saved{path, s->tokens, s->compacted_until, s->protected_prefix};
  idle_.erase(name);
  put(std::move(s));
}

bool SessionStore::erase(const std::string& id) {
  bool found = idle_.erase(id) > 0;
  if (auto it = saved_.find(id); it != saved_.end()) {
    std::error_code ec;
    fs::remove(it->second.path, ec);
    fs::remove(fs::path(it->second.path).replace_extension(".json"), ec);
    saved_.erase(it);
    found = true;
  }
  return found;
}

int SessionStore::save_all() {
  int n = 0;
  for (auto& [id, s] : idle_)
    if (saving() && s->dirty && !s->tokens.empty()) {
      save(*s, id);
      s->dirty = false;
      ++n;
    }
  return n;
}

std::size_t SessionStore::idle_bytes() const {
  std::size_t b = 0;
  for (const auto& [id, s] : idle_) b += allocated_bytes(s->cache);
  return b;
}

int SessionStore::enforce_budget(std::size_t budget, std::size_t busy_bytes) {
  if (budget == 0) return 0;
  int evicted = 0;
  while (!idle_.empty() && idle_bytes() + busy_bytes > budget) {
    auto lru = std::min_element(idle_.begin(), idle_.end(),
                                [](const auto& a, const auto& b) { return a.second->last_used < b.second->last_used; });
    Session& s = *lru->second;
    if (saving() && !s.tokens.empty() && (s.dirty || !saved_.count(s.id))) save(s, s.id);
    log_line(fmt::format("serve: evicted session {} ({} tokens, {} bytes){}", s.id, s.tokens.size(),
                         allocated_bytes(s.cache), saving() ? ", saved" : ""));
    idle_.erase(lru);
    ++evicted;
  }
  return evicted;
}

std::vector<SessionInfo> SessionStore::list() const {
  std::vector<SessionInfo> out;
  for (const auto& [id, s] : idle_)
    out.push_back({id, s->tokens.size(), s->cache.total_entries(), allocated_bytes(s->cache),
                   s->cache.longest_global_length(), s->compactions, true, saved_.count(id) > 0});
  for (const auto& [id, sv] : saved_)
    if (!idle_.count(id)) out.push_back({id, sv.tokens.size(), 0, 0, 0, 0, false, true});
  return out;
}

}  // namespace kvcompact::serve
