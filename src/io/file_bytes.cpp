// Whole-file byte access: see file_bytes.h.
#include "io/file_bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <fmt/format.h>

namespace kvcompact {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

FileBytes::FileBytes(const std::string& path, bool use_mmap) : path_(path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    throw Error(fmt::format("{}: cannot open file: {}", path, errno_text(errno)));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    throw Error(fmt::format("{}: cannot stat file: {}", path, errno_text(err)));
  }
  if (S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: is a directory, not a file", path));
  }
  if (!S_ISREG(st.st_mode)) use_mmap = false;
  size_ = static_cast<std::size_t>(st.st_size);
  if (use_mmap && size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m != MAP_FAILED) {
      map_ = m;
      data_ = static_cast<const std::uint8_t*>(m);
      ::close(fd);
      return;
    }
  }
  // Plain read (also for empty files and non-regular files).
  copy_.clear();
  std::uint8_t buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      throw Error(fmt::format("{}: read error: {}", path, errno_text(err)));
    }
    if (n == 0) break;
    copy_.insert(copy_.end(), buf, buf + n);
  }
  ::close(fd);
  size_ = copy_.size();
  data_ = copy_.data();
}

FileBytes::~FileBytes() { release(); }

void FileBytes::release() noexcept {
  if (map_ != nullptr) ::munmap(map_, size_);
  map_ = nullptr;
  data_ = nullptr;
  size_ = 0;
  copy_.clear();
}

FileBytes::FileBytes(FileBytes&& other) noexcept { *this = std::move(other); }

FileBytes& FileBytes::operator=(FileBytes&& other) noexcept {
  if (this != &other) {
    release();
    path_ = std::move(other.path_);
    size_ = other.size_;
    map_ = other.map_;
    copy_ = std::move(other.copy_);
    data_ = map_ != nullptr ? static_cast<const std::uint8_t*>(map_) : copy_.data();
    other.map_ = nullptr;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void ByteReader::fail_truncated(std::size_t n, const char* what) const {
  throw Error(fmt::format("{}: truncated or corrupt: need {} bytes for {} at offset {}, file has {} bytes",
                          name_, n, what, pos_, size_));
}

}  // namespace kvcompact
