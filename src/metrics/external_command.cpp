#include "metrics/external_command.h"

#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "core/error.h"

namespace kvcompact {

TempDir::TempDir(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  const std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr)
    throw Error(fmt::format("{}: cannot create a temporary folder: {}", templ, std::strerror(errno)));
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string last_nonempty_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

std::string run_capturing_stdout(const std::string& command, const std::string& stderr_path,
                                 const std::string& what) {
  const std::string cmd = command + " 2>" + shell_quote(stderr_path) + " </dev/null";
  std::fflush(nullptr);
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) throw Error(fmt::format("{}: cannot run: {}", what, std::strerror(errno)));
  std::string output;
  char buf[4096];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
  const int raw = ::pclose(pipe);
  if (raw != 0) {
    std::ifstream in(stderr_path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string last = last_nonempty_line(ss.str());
    const int status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    throw Error(fmt::format("{} exited with status {}{}", what, status, last.empty() ? "" : ": " + last));
  }
  return output;
}

}  // namespace kvcompact
