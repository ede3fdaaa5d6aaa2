#include "runtime/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "runtime/error.h"

namespace latte {

namespace {

// The process's umask, read without changing it for good (umask() both sets
// and returns it; /proc says it without a race where it exists).
mode_t current_umask() {
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[128];
    unsigned mask = 0;
    bool found = false;
    while (!found && std::fgets(line, sizeof line, f)) found = std::sscanf(line, "Umask: %o", &mask) == 1;
    std::fclose(f);
    if (found) return static_cast<mode_t>(mask);
  }
  return 022;
}

}  // namespace

AtomicFile::AtomicFile(const std::string& path, const std::string& what, bool private_mode)
    : path_(path), tmp_(path + ".XXXXXX"), what_(what) {
  // Close-on-exec: a child that a host forks and execs meanwhile (on another
  // thread) must not inherit it.
  const int fd = ::mkostemp(tmp_.data(), O_CLOEXEC);
  if (fd < 0) throw Error(Status::io_error, what_ + ": cannot create '" + tmp_ + "': " + std::strerror(errno));
  if (!private_mode) ::fchmod(fd, 0666 & ~current_umask());
  f_ = ::fdopen(fd, "wb");
  if (f_ == nullptr) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp_.c_str());
    throw Error(Status::io_error, what_ + ": cannot open '" + tmp_ + "': " + why);
  }
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, f_) != n) fail("writing");
}

void AtomicFile::commit(bool sync) {
  if (std::fflush(f_) != 0 || (sync && ::fsync(::fileno(f_)) != 0)) fail("writing");
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail("writing");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw Error(Status::io_error, what_ + ": cannot rename '" + tmp_ + "' to '" + path_ + "': " + std::strerror(errno));
  committed_ = true;
}

void AtomicFile::fail(const char* doing) const {
  throw Error(Status::io_error, what_ + ": " + doing + " '" + tmp_ + "' failed: " + std::strerror(errno));
}

}  // namespace latte
