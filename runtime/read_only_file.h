// A regular file opened for reading: close-on-exec (a host that forks and
// execs on another thread meanwhile does not hand it to the child) and
// judged by fstat on the descriptor itself, opened non-blocking, so that a
// FIFO or device in the path's place (even one put there after a check of
// the path) is refused instead of waiting for a writer forever. Errors:
// Error(io_error) naming the file (`what`) and the reason.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace latte {

class ReadOnlyFile {
 public:
  // what: the file as messages name it ("session file 'x.lsess'").
  ReadOnlyFile(const std::string& path, const std::string& what);
  ReadOnlyFile(const ReadOnlyFile&) = delete;
  ReadOnlyFile& operator=(const ReadOnlyFile&) = delete;
  ~ReadOnlyFile();

  int fd() const { return fd_; }
  // The file's size when it was opened.
  std::uint64_t size() const { return size_; }
  // Reads up to n bytes from the current offset and moves it past them: the
  // count read, short only at the end of the file. A read error throws.
  std::size_t read(void* dst, std::size_t n);
  void seek(std::uint64_t offset) { offset_ = offset; }

 private:
  std::string what_;
  int fd_ = -1;
  std::uint64_t size_ = 0, offset_ = 0;
};

}  // namespace latte
