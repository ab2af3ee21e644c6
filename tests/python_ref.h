// Test helpers for reference comparisons run in the project's Python virtual environment
// (.venv, made by scripts/setup.sh from scripts/requirements-ref.txt): transformers, tokenizers,
// jinja2, gguf-py, llama-cpp-python. The scripts live in tests/ref/. Header-only.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace kvcompact::testing {

inline const std::string kPython = KVC_PYTHON;
inline const std::string kRefDir = std::string(KVC_SOURCE_DIR) + "/tests/ref";
inline const std::string kModelsDir = KVC_MODELS_DIR;

/// Success when the reference Python exists and has `modules` (space-separated) installed;
/// otherwise a failure that says how to set it up. Reference tests fail (never pass silently)
/// without it. It asks importlib's find_spec instead of importing: `import torch, transformers`
/// costs seconds per test process, and a module that is installed but broken still fails the
/// test at the script that imports it (its log is printed).
inline ::testing::AssertionResult python_ready(const std::string& modules) {
  if (!std::filesystem::exists(kPython))
    return ::testing::AssertionFailure() << "reference Python " << kPython
                                         << " is missing: run `bash scripts/setup.sh` (creates .venv)";
  std::string names;
  for (std::istringstream in(modules); in;) {
    std::string m;
    if (in >> m) names += "\"" + m + "\",";
  }
  const std::string cmd = "'" + kPython + "' -c 'import importlib.util, sys; sys.exit(any(importlib.util.find_spec(m) is None for m in (" +
                          names + ")))' > /dev/null 2>&1";
  if (std::system(cmd.c_str()) != 0)
    return ::testing::AssertionFailure() << kPython << " lacks one of " << modules
                                         << ": run `bash scripts/setup.sh` (scripts/requirements-ref.txt)";
  return ::testing::AssertionSuccess();
}

/// Path of a fetched real model (scripts/fetch_models.sh), or "" when it is absent.
inline std::string real_model(const std::string& file) {
  const std::string p = kModelsDir + "/" + file;
  return std::filesystem::exists(p) ? p : std::string();
}

/// Runs tests/ref/<script> with `args` (already shell-quoted) under the reference Python; stdout
/// goes to `out_file`, stderr to out_file + ".log". Returns the exit status.
inline int run_python_ref(const std::string& script, const std::string& args, const std::string& out_file) {
  const std::string cmd = "'" + kPython + "' '" + kRefDir + "/" + script + "' " + args + " > '" + out_file +
                          "' 2> '" + out_file + ".log'";
  return std::system(cmd.c_str());
}

/// Lower-case hex of raw bytes: how the reference scripts receive texts that may be invalid UTF-8
/// (tests/ref/llama_cpp_tokenize.py `texts_hex`).
inline std::string hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string out;
  out.reserve(s.size() * 2);
  for (unsigned char c : s) {
    out.push_back(d[c >> 4]);
    out.push_back(d[c & 15]);
  }
  return out;
}

/// Whole file as a string ("" when unreadable).
inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace kvcompact::testing
