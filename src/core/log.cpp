#include "core/log.h"

#include <cstdio>
#include <mutex>
#include <utility>

namespace kvcompact {
namespace {

std::mutex& log_mutex() {
  static std::mutex m;
  return m;
}

LogSink& log_sink() {
  static LogSink sink;
  return sink;
}

}  // namespace

void set_log_sink(LogSink sink) {
  const std::lock_guard<std::mutex> lock(log_mutex());
  log_sink() = std::move(sink);
}

void log_line(std::string_view line) {
  const std::lock_guard<std::mutex> lock(log_mutex());
  if (log_sink()) return log_sink()(line);
  std::fprintf(stderr, "%.*s\n", static_cast<int>(line.size()), line.data());
  std::fflush(stderr);
}

}  // namespace kvcompact
