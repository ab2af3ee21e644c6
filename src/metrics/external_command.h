// Running an external command from a study (the COMET and similarity scorers): a temporary folder
// for its files, shell quoting, and a run that captures standard output and turns a failure into
// one line.
#pragma once

#include <string>

namespace kvcompact {

/// A fresh folder under $TMPDIR (or /tmp) named `<prefix>XXXXXX`, removed with everything in it
/// when the object goes out of scope. Throws Error when it cannot be created.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "kvcompact_");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

/// `s` in single quotes for /bin/sh (a quote inside written as '\'').
std::string shell_quote(const std::string& s);

/// The last line of `text` holding something other than white space ("" when none).
std::string last_nonempty_line(const std::string& text);

/// Runs `command` through /bin/sh with standard input from /dev/null and standard error into
/// `stderr_path`, and returns its standard output. Throws Error "<what> exited with status N: <the
/// last non-empty line of its stderr>" when it exits non-zero (128 + signal when killed).
std::string run_capturing_stdout(const std::string& command, const std::string& stderr_path,
                                 const std::string& what);

}  // namespace kvcompact
