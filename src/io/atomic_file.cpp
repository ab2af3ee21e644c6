#include "io/atomic_file.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace kvcompact {

void write_file_atomic(const std::string& path, std::string_view contents) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  if (target.has_parent_path()) {
    fs::create_directories(target.parent_path(), ec);
    if (ec) throw Error(fmt::format("{}: cannot create folder: {}", path, ec.message()));
  }
  // Host and pid in the temporary name: writers on several machines of a shared file system never
  // collide on it.
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  const std::string tmp = fmt::format("{}.tmp.{}.{}", path, host, static_cast<long>(getpid()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot open for writing (through the temporary file {})", path, tmp));
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw Error(fmt::format("{}: write failed (disk full?) at the temporary file {}", path, tmp));
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw Error(fmt::format("{}: cannot move results into place: {}", path, ec.message()));
  }
}

}  // namespace kvcompact
