// AtomicFile (atomic_file.h) on POSIX systems: mkostemp(O_CLOEXEC), fchmod
// to the umask's mode unless private, rename(2) over the target.
#include "platform/atomic_file.h"

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

// What a file of this mode is, for messages ("a FIFO").
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISLNK(m)) return "a symbolic link";
  return "not a regular file";
}

}  // namespace

std::string AtomicFile::target_of(const std::string& path, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return path;  // a new file
    throw Error(Status::io_error, what + ": cannot inspect '" + path + "': " + std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return path;
  if (S_ISLNK(st.st_mode)) {
    // A link is followed (the link stays; its target is replaced): the
    // target must be an existing regular file.
    char* real = ::realpath(path.c_str(), nullptr);
    if (real == nullptr)
      throw Error(Status::io_error, what + ": '" + path + "' is a symbolic link that cannot be followed (" +
                                        std::strerror(errno) + "): refusing to replace it");
    const std::string target(real);
    std::free(real);
    if (::stat(target.c_str(), &st) != 0)
      throw Error(Status::io_error, what + ": cannot inspect '" + target + "': " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      throw Error(Status::io_error, what + ": '" + path + "' links to '" + target + "', " + kind_of(st.st_mode) +
                                        ", not a regular file: refusing to replace it");
    return target;
  }
  throw Error(Status::io_error, what + ": '" + path + "' is " + kind_of(st.st_mode) +
                                    ", not a regular file: refusing to replace it");
}

AtomicFile::AtomicFile(const std::string& path, const std::string& what, bool private_mode)
    : path_(target_of(path, what)), tmp_(path_ + ".XXXXXX"), what_(what), given_(path) {
  // Close-on-exec: a child that a host forks and execs meanwhile (on another
  // thread) must not inherit it.
  const int fd = ::mkostemp(tmp_.data(), O_CLOEXEC);
  if (fd < 0)
    throw Error(Status::io_error, what_ + ": cannot create a temporary beside '" + given_ + "' ('" + tmp_ +
                                      "'): " + std::strerror(errno));
  if (!private_mode) ::fchmod(fd, 0666 & ~current_umask());
  f_ = ::fdopen(fd, "wb");
  if (f_ == nullptr) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    ::unlink(tmp_.c_str());
    throw Error(Status::io_error, what_ + ": cannot open the temporary '" + tmp_ + "' beside '" + given_ + "': " + why);
  }
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) ::unlink(tmp_.c_str());
}

bool AtomicFile::temp_inheritable() const {
  const int flags = f_ ? ::fcntl(::fileno(f_), F_GETFD) : -1;
  return flags >= 0 && !(flags & FD_CLOEXEC);
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, f_) != n) fail("writing");
}

void AtomicFile::commit(bool sync) {
  if (std::fflush(f_) != 0 || (sync && ::fsync(::fileno(f_)) != 0)) fail("writing");
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail("writing");
  // Judged again just before the rename: something else may have taken the
  // path since the constructor looked.
  if (target_of(path_, what_) != path_)
    throw Error(Status::io_error, what_ + ": '" + path_ + "' changed into a symbolic link while being written");
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw Error(Status::io_error, what_ + ": cannot replace '" + given_ + "' (renaming its temporary '" + tmp_ +
                                      "' over it): " + std::strerror(errno));
  committed_ = true;
}

void AtomicFile::fail(const char* doing) const {
  throw Error(Status::io_error, what_ + ": " + doing + " '" + given_ + "' failed (in its temporary '" + tmp_ + "'): " +
                                    std::strerror(errno));
}

}  // namespace latte
