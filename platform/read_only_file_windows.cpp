// ReadOnlyFile (read_only_file.h) on Windows: CreateFileW with a
// non-inheritable handle, sharing reads, writes and deletes (so a file being
// read can still be replaced by a rename); GetFileType refuses pipes and
// devices; ReadFile at an offset (OVERLAPPED), as pread.
#include "platform/read_only_file.h"

#include <algorithm>

#include "platform/windows_util.h"
#include "runtime/error.h"

namespace latte {

namespace {

HANDLE as_handle(std::intptr_t h) { return reinterpret_cast<HANDLE>(h); }

}  // namespace

ReadOnlyFile::ReadOnlyFile(const std::string& path, const std::string& what) : what_(what) {
  const std::wstring w = win::wide(path);
  const DWORD attrs = ::GetFileAttributesW(w.c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY))
    throw Error(Status::io_error, what_ + " is a directory, not a regular file");
  // bInheritHandle false (no SECURITY_ATTRIBUTES): children never get it.
  HANDLE h = ::CreateFileW(w.c_str(), GENERIC_READ, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                           OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr);
  if (h == INVALID_HANDLE_VALUE) throw Error(Status::io_error, "cannot open " + what_ + ": " + win::last_error_message());
  if (::GetFileType(h) != FILE_TYPE_DISK) {
    ::CloseHandle(h);
    throw Error(Status::io_error, what_ + " is not a regular file");
  }
  BY_HANDLE_FILE_INFORMATION info{};
  if (!::GetFileInformationByHandle(h, &info)) {
    const std::string why = win::last_error_message();
    ::CloseHandle(h);
    throw Error(Status::io_error, "cannot stat " + what_ + ": " + why);
  }
  if (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
    ::CloseHandle(h);
    throw Error(Status::io_error, what_ + " is a directory, not a regular file");
  }
  handle_ = reinterpret_cast<std::intptr_t>(h);
  size_ = (static_cast<std::uint64_t>(info.nFileSizeHigh) << 32) | info.nFileSizeLow;
}

ReadOnlyFile::~ReadOnlyFile() {
  if (handle_ != -1) ::CloseHandle(as_handle(handle_));
}

bool ReadOnlyFile::inheritable() const {
  DWORD flags = 0;
  return ::GetHandleInformation(as_handle(handle_), &flags) && (flags & HANDLE_FLAG_INHERIT);
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
    const std::uint64_t at = offset + got;
    OVERLAPPED ov{};
    ov.Offset = static_cast<DWORD>(at);
    ov.OffsetHigh = static_cast<DWORD>(at >> 32);
    const DWORD want = static_cast<DWORD>(std::min<std::size_t>(n - got, 1u << 30));
    DWORD r = 0;
    if (!::ReadFile(as_handle(handle_), p + got, want, &r, &ov)) {
      if (::GetLastError() == ERROR_HANDLE_EOF) break;
      throw Error(Status::io_error, "cannot read " + what_ + ": " + win::last_error_message());
    }
    if (r == 0) break;  // the end of the file
    got += r;
  }
  return got;
}

void ReadOnlyFile::drop_cached(std::uint64_t, std::uint64_t) const {}  // no such hint

}  // namespace latte
