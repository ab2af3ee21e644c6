// The server's sessions: in memory within a byte budget (least recently used evicted), and in a
// save folder as .kvc files (docs/kvc_format.md) that survive a restart.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "serve/session.h"

namespace kvcompact::serve {

/// A session taken out of the store for one request, and how much of its history the request
/// reuses.
struct Checkout {
  std::unique_ptr<Session> session;
  int reused = 0;  ///< leading prompt tokens already in the cache (the session was rolled back to this)
};

/// What the store holds, for metrics and GET /slots.
struct SessionInfo {
  std::string id;
  std::size_t tokens = 0, entries = 0, bytes = 0, longest = 0;
  int compactions = 0;
  bool in_memory = false, saved = false;
};

/// Idle sessions (in memory or saved) keyed by id. Not thread-safe: the engine's worker owns it.
class SessionStore {
 public:
  /// `save_dir` empty: no saving. Otherwise the folder is created if needed and every .kvc file
  /// in it made for `model` is indexed (its token history read; the cache loaded on demand);
  /// files for another model or that fail their checksum are skipped with a warning.
  SessionStore(const Model& model, uint64_t fingerprint, std::string save_dir);

  /// The idle session whose history the prompt extends, reusing as much as possible: a session
  /// qualifies when the prompt agrees with all of its history but at most its last `max_rollback`
  /// tokens and the agreement reaches past its compacted part; it is rolled back to the agreed
  /// length (at most prompt.size() - 1, so one token is left to feed). A rollback also needs the
  /// agreement to cover more than half of the history after the session's protected prefix, so
  /// that a conversation sharing only the system prompt starts its own session. A saved session is read
  /// from its file. Returns a new empty session when none qualifies.
  Checkout take(std::span<const int> prompt, int max_rollback);

  /// Gives a session back (idle, most recently used).
  void put(std::unique_ptr<Session> s);

  /// Writes a session to `<save_dir>/<name>.kvc` (+ .json with its serve state), atomically.
  /// Throws Error when there is no save folder, the name is not a plain file name
  /// ([A-Za-z0-9_.-], not starting with '.'), or writing fails.
  void save(const Session& s, const std::string& name);
  /// save() of the idle session `id` under `name`; false when no idle session has that id.
  bool save_idle(const std::string& id, const std::string& name);
  /// Reads `<save_dir>/<name>.kvc` into an idle session named `name` (replacing one of that id).
  /// Throws Error naming the file when it is missing, corrupt or made for another model.
  void restore(const std::string& name);
  /// Drops session `id` from memory and its saved files. Returns false when there was none.
  bool erase(const std::string& id);
  /// Saves every dirty session in memory (SIGTERM). Returns how many were written.
  int save_all();

  /// Evicts least recently used idle sessions (saving them first when there is a save folder)
  /// until the idle sessions' allocated bytes plus `busy_bytes` fit in `budget` (0: no limit).
  /// Returns the number evicted.
  int enforce_budget(std::size_t budget, std::size_t busy_bytes);

  /// Allocated KV bytes of the idle sessions in memory.
  std::size_t idle_bytes() const;
  std::vector<SessionInfo> list() const;
  bool saving() const { return !save_dir_.empty(); }
  const std::string& save_dir() const { return save_dir_; }
  /// A fresh id "s<n>".
  std::string new_id();

  /// Whether `prompt` continues `history` but for at most its last max_rollback tokens (the rule
  /// by which take() reuses a session).
  static bool extends(std::span<const int> history, std::span<const int> prompt, int max_rollback);

  /// Checks a slot name: a plain file name of [A-Za-z0-9_.-], 1-128 bytes, not starting with '.'.
  /// Throws Error otherwise.
  static void check_name(const std::string& name);

 private:
  struct Saved {
    std::string path;
    std::vector<int> tokens;
    int compacted_until = 0;
    int protected_prefix = 0;
  };
  /// Reads a saved session: its .kvc file (checked against the model) and the .json of its serve
  /// state beside it. Throws Error naming the file.
  std::unique_ptr<Session> read_session(const std::string& path, const std::string& id) const;

  const Model& model_;
  uint64_t fingerprint_;
  std::string save_dir_;
  std::map<std::string, std::unique_ptr<Session>> idle_;
  std::map<std::string, Saved> saved_;  ///< saved sessions (also those in memory)
  uint64_t clock_ = 0;
  uint64_t next_id_ = 1;
};

}  // namespace kvcompact::serve
