// ReadOnlyFile (read_only_file.h) on POSIX systems: open(O_CLOEXEC |
// O_NONBLOCK), fstat on the descriptor, pread.
#include "platform/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace latte {

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) : what_(what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(Status::io_error, "cannot open " + what_ + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    throw Error(Status::io_error, "cannot stat " + what_ + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(Status::io_error, what_ + (S_ISDIR(st.st_mode) ? " is a directory, not a regular file" : " is not a regular file"));
  }
  handle_ = fd;
  size_ = static_cast<std::uint64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_ >= 0) ::close(static_cast<int>(handle_));
}

bool ReadOnlyFile::inheritable() const {
  const int flags = ::fcntl(static_cast<int>(handle_), F_GETFD);
  return flags >= 0 && !(flags & FD_CLOEXEC);
}

std::size_t ReadOnlyFile::read(void* dst, std::size_t n) {
  const std::size_t got = read_at(dst, n, offset_);
  offset_ += got;
  return got;
}

std::size_t ReadOnlyFile::read_at(void* dst, std::size_t n, std::uint64_t offset) const {
  auto* p = static_cast<char*>(dst);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(static_cast<int>(handle_), p + got, n - got, static_cast<off_t>(offset + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(Status::io_error, "cannot read " + what_ + ": " + std::strerror(errno));
    if (r == 0) break;  // the end of the file
    got += static_cast<std::size_t>(r);
  }
  return got;
}

void ReadOnlyFile::drop_cached(std::uint64_t offset, std::uint64_t n) const {
#if defined(POSIX_FADV_DONTNEED)
  (void)::posix_fadvise(static_cast<int>(handle_), static_cast<off_t>(offset), static_cast<off_t>(n), POSIX_FADV_DONTNEED);
#else
  (void)offset;
  (void)n;
#endif
}

}  // namespace latte
