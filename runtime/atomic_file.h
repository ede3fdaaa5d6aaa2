// A file written whole or not at all: through a unique temporary beside the
// target (mkostemp, so two writers to one path never share it; close-on-exec),
// renamed over the target at commit(). An error, or destruction before commit(), leaves
// an earlier file as it was and removes the temporary. Only a regular file is
// replaced: a device, FIFO, socket or directory at the path is refused, and a
// symbolic link is followed (its target, a regular file, is replaced; the
// link stays). Errors: Error(io_error) naming the file and the reason.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace latte {

class AtomicFile {
 public:
  // what: the operation, for messages ("save session"). The file is created
  // with mode 0600 (mkostemp's), or 0666 less the umask when !private_mode.
  AtomicFile(const std::string& path, const std::string& what, bool private_mode);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(const void* data, std::size_t n);
  std::FILE* stream() { return f_; }
  const std::string& temp_path() const { return tmp_; }
  // Flushes (to disk too when sync), closes and renames over the target.
  void commit(bool sync);

  // The file a write to `path` replaces: path itself (a regular file, or
  // none yet), or a symbolic link's target (a regular file); anything else is
  // Error(io_error).
  static std::string target_of(const std::string& path, const std::string& what);

 private:
  [[noreturn]] void fail(const char* doing) const;
  std::string path_, tmp_, what_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace latte
