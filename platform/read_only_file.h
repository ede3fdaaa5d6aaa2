// A regular file opened for reading (platform layer; read_only_file_posix.cpp,
// read_only_file_windows.cpp). Its handle is not inherited by child processes
// (close-on-exec on POSIX, a non-inheritable handle on Windows: a host that
// starts a program on another thread meanwhile does not hand it over), and
// the file is judged through the handle itself, opened without blocking, so
// that a FIFO or device in the path's place (even one put there after a check
// of the path) is refused instead of waiting for a writer forever. Paths are
// UTF-8. Errors: Error(io_error) naming the file (`what`) and the reason.
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

  // The OS's handle: a file descriptor on POSIX, a HANDLE on Windows.
  std::intptr_t native_handle() const { return handle_; }
  // Whether a child process would inherit the handle (never, by design).
  bool inheritable() const;
  // The file's size when it was opened.
  std::uint64_t size() const { return size_; }
  // Reads up to n bytes from the current offset and moves it past them: the
  // count read, short only at the end of the file. A read error throws.
  std::size_t read(void* dst, std::size_t n);
  void seek(std::uint64_t offset) { offset_ = offset; }
  // Reads up to n bytes at `offset`, leaving the current offset alone (safe
  // from several threads at once): the count read, short only at the end of
  // the file. A read error throws.
  std::size_t read_at(void* dst, std::size_t n, std::uint64_t offset) const;
  // A hint that [offset, offset + n) will not be read again: the page
  // cache may let go of it (POSIX_FADV_DONTNEED; nothing on Windows).
  void drop_cached(std::uint64_t offset, std::uint64_t n) const;

 private:
  std::string what_;
  std::intptr_t handle_ = -1;
  std::uint64_t size_ = 0, offset_ = 0;
};

}  // namespace latte
