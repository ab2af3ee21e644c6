// Where library code reports progress and warnings: one line at a time, to a sink the program
// chooses (default: the line plus '\n' on stderr). The CLI keeps the default; the Python package
// or a GUI can route the lines elsewhere. Thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <string_view>

namespace kvcompact {

/// Receives one line, without its trailing newline.
using LogSink = std::function<void(std::string_view line)>;

/// Replaces the sink; an empty function restores stderr.
void set_log_sink(LogSink sink);

/// Sends one line (e.g. "compact-eval: document 1/5 ..." or "kvcompact: warning: ...") to the sink.
void log_line(std::string_view line);

/// Wall time in seconds (steady clock) since t0, for progress lines and timings.
inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace kvcompact
