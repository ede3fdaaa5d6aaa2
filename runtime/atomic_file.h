// A file written whole or not at all: through a unique temporary beside the
// target (mkostemp, so two writers to one path never share it; close-on-exec),
// renamed over the target at commit(). An error, or destruction before commit(), leaves
// an earlier file as it was and removes the temporary. Errors:
// Error(io_error) naming the file and the system's reason.
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

 private:
  [[noreturn]] void fail(const char* doing) const;
  std::string path_, tmp_, what_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

}  // namespace latte
