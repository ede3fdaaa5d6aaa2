// A file written whole or not at all (platform layer; atomic_file_posix.cpp,
// atomic_file_windows.cpp): through a unique temporary beside the target (so
// two writers to one path never share it; not inherited by child processes),
// moved over the target at commit() (rename on POSIX, MoveFileExW with
// MOVEFILE_REPLACE_EXISTING on Windows). An error, or destruction before
// commit(), leaves an earlier file as it was and removes the temporary. Only
// a regular file is replaced: a device, FIFO, socket or directory at the path
// is refused, and a symbolic link is followed (its target, a regular file, is
// replaced; the link stays). Paths are UTF-8. Errors: Error(io_error) naming
// the file and the reason.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace latte {

class AtomicFile {
 public:
  // what: the operation, for messages ("save session"). private_mode: only
  // the owner may read the file (POSIX mode 0600; on Windows a DACL granting
  // the owner alone); otherwise what a new file gets (0666 less the umask;
  // the folder's inherited ACL).
  AtomicFile(const std::string& path, const std::string& what, bool private_mode);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t n);
  std::FILE* stream() { return f_; }
  const std::string& temp_path() const { return tmp_; }
  // Whether a child process would inherit the temporary (never, by design).
  bool temp_inheritable() const;
  // Flushes (to disk too when sync), closes and renames over the target.
  void commit(bool sync);

  // The file a write to `path` replaces: path itself (a regular file, or
  // none yet), or a symbolic link's target (a regular file); anything else is
  // Error(io_error).
  static std::string target_of(const std::string& path, const std::string& what);

 private:
  [[noreturn]] void fail(const char* doing) const;
  std::string path_, tmp_, what_;
  std::string given_;  // the path as given, for messages (path_ is a link's target)
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace latte
