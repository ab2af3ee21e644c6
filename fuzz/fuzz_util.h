// Shared helpers of the libFuzzer harnesses (fuzz/*_fuzz.cpp): the fuzz input written to a
// per-process temp file for readers that take a path, and the one rule every harness checks.
//
// The rule: a parser fed arbitrary bytes either succeeds or throws kvcompact::Error. Every other
// outcome is a bug libFuzzer reports: another exception type escaping (uncaught -> abort), a
// crash or sanitizer report, an allocation over -malloc_limit_mb / -rss_limit_mb, a hang.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/error.h"

namespace kvcompact::fuzz {

/// A per-process folder under $TMPDIR (or /tmp) for the harness's input files, created once.
inline const std::filesystem::path& temp_dir() {
  static const std::filesystem::path dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::filesystem::path d = std::filesystem::path(base != nullptr && *base != '\0' ? base : "/tmp") /
                              ("kvc_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

/// Writes `bytes` to temp_dir()/name (replacing it) and returns the path. Aborts when the file
/// cannot be written (a broken fuzzing setup, not a finding).
inline std::string write_temp(const std::string& name, std::string_view bytes) {
  const std::string path = (temp_dir() / name).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr || std::fwrite(bytes.data(), 1, bytes.size(), f) != bytes.size() || std::fclose(f) != 0) {
    std::perror(path.c_str());
    std::abort();
  }
  return path;
}

/// The fuzz input as a string_view.
inline std::string_view as_view(const std::uint8_t* data, std::size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

/// Splits the input at its first NUL byte: (before, after). No NUL: (all, `fallback`). JSON and
/// Jinja sources never hold a raw NUL, so harnesses use it to append a second input (a text to
/// encode) to a seed file.
inline std::pair<std::string_view, std::string_view> split_at_nul(std::string_view in,
                                                                  std::string_view fallback) {
  const std::size_t k = in.find('\0');
  if (k == std::string_view::npos) return {in, fallback};
  return {in.substr(0, k), in.substr(k + 1)};
}

/// Runs fn(); a kvcompact::Error (the documented failure) with a non-empty message is swallowed,
/// anything else escapes. Messages may quote bytes of the file, newlines included, so only
/// emptiness is checked. With $KVC_FUZZ_VERBOSE set each message is printed, to check that the
/// seeds parse: `KVC_FUZZ_VERBOSE=1 build-fuzz/gguf_fuzz fuzz/corpus/gguf/*`.
template <class Fn>
void expect_ok_or_error(Fn fn) {
  try {
    fn();
  } catch (const Error& e) {
    const std::string_view msg = e.what();
    if (std::getenv("KVC_FUZZ_VERBOSE") != nullptr) std::fprintf(stderr, "kvcompact::Error: %s\n", e.what());
    if (msg.empty()) {
      std::fprintf(stderr, "kvcompact::Error with an empty message\n");
      std::abort();
    }
  }
}

}  // namespace kvcompact::fuzz
