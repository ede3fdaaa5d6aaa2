#include "runtime/read_only_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "runtime/error.h"

namespace latte {

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) : what_(what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) throw Error(Status::io_error, "cannot open " + what_ + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int e = errno;
    ::close(fd_);
    throw Error(Status::io_error, "cannot stat " + what_ + ": " + std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(Status::io_error, what_ + (S_ISDIR(st.st_mode) ? " is a directory, not a regular file" : " is not a regular file"));
  }
  size_ = static_cast<std::uint64_t>(st.st_size);
}

ReadOnlyFile::~ReadOnlyFile() {
  if (fd_ >= 0) ::close(fd_);
}

std::size_t ReadOnlyFile::read(void* dst, std::size_t n) {
  auto* p = static_cast<char*>(dst);
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd_, p + got, n - got, static_cast<off_t>(offset_ + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw Error(Status::io_error, "cannot read " + what_ + ": " + std::strerror(errno));
    if (r == 0) break;  // the end of the file
    got += static_cast<std::size_t>(r);
  }
  offset_ += got;
  return got;
}

}  // namespace latte
