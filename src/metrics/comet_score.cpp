#include "metrics/comet_score.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "metrics/external_command.h"
#include "core/error.h"

namespace kvcompact {

namespace {

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

std::string one_line(const std::string& s) {
  std::string out = s;
  for (char& c : out)
    if (c == '\n' || c == '\r') c = ' ';
  return out;
}

void write_lines(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path, std::ios::binary);
  for (const std::string& l : lines) out << one_line(l) << '\n';
  if (!out) throw Error(fmt::format("{}: cannot write comet-score input", path));
}

}  // namespace

std::string find_executable(const std::string& name) {
  if (name.empty()) return "";
  if (name.find('/') != std::string::npos) return is_executable_file(name) ? name : "";
  const char* path_env = std::getenv("PATH");
  if (path_env == nullptr) return "";
  const std::string path = path_env;
  std::size_t pos = 0;
  while (pos <= path.size()) {
    std::size_t end = path.find(':', pos);
    if (end == std::string::npos) end = path.size();
    const std::string dir = end > pos ? path.substr(pos, end - pos) : std::string(".");  // empty entry = cwd
    const std::string candidate = dir + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    pos = end + 1;
  }
  return "";
}

std::vector<double> parse_comet_output(const std::string& output, std::size_t segments) {
  std::vector<double> scores(segments, 0.0);
  std::vector<char> seen(segments, 0);
  std::size_t found = 0;
  std::istringstream in(output);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    const std::size_t seg = line.find("Segment ");
    if (seg == std::string::npos) continue;
    const std::size_t sc = line.find("score:", seg);
    if (sc == std::string::npos) continue;
    const char* idx_begin = line.c_str() + seg + 8;
    char* idx_end = nullptr;
    errno = 0;
    const long long idx = std::strtoll(idx_begin, &idx_end, 10);
    if (idx_end == idx_begin || errno != 0)
      throw Error(fmt::format("comet-score output line {}: no segment number in \"{}\"", line_no, line));
    if (idx < 0 || static_cast<unsigned long long>(idx) >= segments)
      throw Error(fmt::format("comet-score output line {}: segment {} out of range (0..{})", line_no, idx,
                              segments == 0 ? 0 : segments - 1));
    const char* val_begin = line.c_str() + sc + 6;
    char* val_end = nullptr;
    const double v = std::strtod(val_begin, &val_end);
    if (val_end == val_begin || !std::isfinite(v))
      throw Error(fmt::format("comet-score output line {}: score is not a number in \"{}\"", line_no, line));
    if (seen[idx]) throw Error(fmt::format("comet-score output line {}: segment {} scored twice", line_no, idx));
    seen[idx] = 1;
    scores[idx] = v;
    ++found;
  }
  if (found != segments)
    throw Error(fmt::format("comet-score printed {} segment scores, expected {}", found, segments));
  return scores;
}

std::vector<double> comet_score(const std::vector<std::string>& sources, const std::vector<std::string>& hypotheses,
                                const std::vector<std::string>& references, const CometOptions& options) {
  const std::string exe = find_executable(options.executable);
  if (exe.empty()) {
    if (options.executable == "comet-score")
      throw Error(
          "comet-score not found on PATH: install unbabel-comet (pip install unbabel-comet) or use --metric chrf");
    throw Error(fmt::format("{} not found (COMET executable): install unbabel-comet (pip install unbabel-comet) "
                            "or use --metric chrf",
                            options.executable));
  }
  if (hypotheses.empty()) throw Error("COMET: no segments to score");
  if (sources.size() != hypotheses.size() || references.size() != hypotheses.size())
    throw Error(fmt::format("COMET: {} sources, {} hypotheses and {} references (must be equal)", sources.size(),
                            hypotheses.size(), references.size()));
  TempDir dir("kvcompact_comet_");
  const std::string src = dir.path() + "/src.txt", hyp = dir.path() + "/hyp.txt", ref = dir.path() + "/ref.txt",
                    err = dir.path() + "/stderr.txt";
  write_lines(src, sources);
  write_lines(hyp, hypotheses);
  write_lines(ref, references);
  std::string cmd = fmt::format("{} -s {} -t {} -r {} --model {}", shell_quote(exe), shell_quote(src),
                                shell_quote(hyp), shell_quote(ref), shell_quote(options.model));
  if (options.gpus >= 0) cmd += fmt::format(" --gpus {}", options.gpus);
  if (options.batch_size > 0) cmd += fmt::format(" --batch_size {}", options.batch_size);
  const std::string output = run_capturing_stdout(cmd, err, exe);
  return parse_comet_output(output, hypotheses.size());
}

}  // namespace kvcompact
