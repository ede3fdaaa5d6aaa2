// AtomicFile (atomic_file.h) on Windows: the temporary made with CreateFileW
// (CREATE_NEW, a non-inheritable handle; for a private file a DACL granting
// only the current user), written through a C stream over its handle, then
// moved over the target with MoveFileExW(MOVEFILE_REPLACE_EXISTING |
// MOVEFILE_WRITE_THROUGH), retried while another writer holds the target.
// Links are resolved with GetFinalPathNameByHandleW.
#include "platform/atomic_file.h"

#include "platform/windows_util.h"  // <windows.h>, before <sddl.h>

#include <fcntl.h>
#include <io.h>
#include <sddl.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "runtime/error.h"

namespace latte {

namespace {

bool not_found(DWORD e) { return e == ERROR_FILE_NOT_FOUND || e == ERROR_PATH_NOT_FOUND; }

// A handle of an existing path for inspection only (no access rights asked;
// a folder opens too), following links; INVALID_HANDLE_VALUE on failure.
HANDLE open_for_inspection(const std::wstring& w) {
  return ::CreateFileW(w.c_str(), 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr, OPEN_EXISTING,
                       FILE_FLAG_BACKUP_SEMANTICS, nullptr);
}

// What the open handle is, for messages; "" for a regular file.
std::string kind_of(HANDLE h) {
  if (::GetFileType(h) != FILE_TYPE_DISK) return "a device or pipe";
  BY_HANDLE_FILE_INFORMATION info{};
  if (::GetFileInformationByHandle(h, &info) && (info.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY)) return "a directory";
  return "";
}

// A security descriptor whose DACL lets the current user alone at the file;
// LocalFree it. Null (with the reason in `why`) where it cannot be built.
PSECURITY_DESCRIPTOR owner_only_descriptor(std::string& why) {
  HANDLE token = nullptr;
  if (!::OpenProcessToken(::GetCurrentProcess(), TOKEN_QUERY, &token)) {
    why = win::last_error_message();
    return nullptr;
  }
  DWORD n = 0;
  ::GetTokenInformation(token, TokenUser, nullptr, 0, &n);
  std::string buf(n, '\0');
  wchar_t* sid = nullptr;
  const bool ok = n && ::GetTokenInformation(token, TokenUser, buf.data(), n, &n) &&
                  ::ConvertSidToStringSidW(reinterpret_cast<TOKEN_USER*>(buf.data())->User.Sid, &sid);
  if (!ok) why = win::last_error_message();
  ::CloseHandle(token);
  if (!ok) return nullptr;
  // P: protected (nothing inherited from the folder); FA: full access.
  const std::wstring sddl = L"D:P(A;;FA;;;" + std::wstring(sid) + L")";
  ::LocalFree(sid);
  PSECURITY_DESCRIPTOR sd = nullptr;
  if (!::ConvertStringSecurityDescriptorToSecurityDescriptorW(sddl.c_str(), SDDL_REVISION_1, &sd, nullptr)) {
    why = win::last_error_message();
    return nullptr;
  }
  return sd;
}

HANDLE stream_handle(std::FILE* f) { return reinterpret_cast<HANDLE>(::_get_osfhandle(::_fileno(f))); }

}  // namespace

std::string AtomicFile::target_of(const std::string& path, const std::string& what) {
  const std::wstring w = win::wide(path);
  const DWORD attrs = ::GetFileAttributesW(w.c_str());
  if (attrs == INVALID_FILE_ATTRIBUTES) {
    const DWORD e = ::GetLastError();
    if (not_found(e)) return path;  // a new file
    throw Error(Status::io_error, what + ": cannot inspect '" + path + "': " + win::error_message(e));
  }
  HANDLE h = open_for_inspection(w);
  if (h == INVALID_HANDLE_VALUE) {
    const std::string why = win::last_error_message();
    if (attrs & FILE_ATTRIBUTE_REPARSE_POINT)
      throw Error(Status::io_error, what + ": '" + path + "' is a symbolic link that cannot be followed (" + why +
                                        "): refusing to replace it");
    throw Error(Status::io_error, what + ": cannot inspect '" + path + "': " + why);
  }
  const std::string kind = kind_of(h);
  std::string target = path;
  if (kind.empty() && (attrs & FILE_ATTRIBUTE_REPARSE_POINT)) {
    std::wstring buf(1024, L'\0');
    DWORD n = ::GetFinalPathNameByHandleW(h, buf.data(), static_cast<DWORD>(buf.size()), FILE_NAME_NORMALIZED);
    if (n >= buf.size()) {
      buf.resize(n + 1);
      n = ::GetFinalPathNameByHandleW(h, buf.data(), static_cast<DWORD>(buf.size()), FILE_NAME_NORMALIZED);
    }
    if (n == 0 || n >= buf.size()) {
      const std::string why = win::last_error_message();
      ::CloseHandle(h);
      throw Error(Status::io_error, what + ": cannot resolve the link '" + path + "': " + why);
    }
    buf.resize(n);
    if (buf.rfind(L"\\\\?\\", 0) == 0 && buf.rfind(L"\\\\?\\UNC\\", 0) != 0) buf.erase(0, 4);
    target = win::utf8(buf);
  }
  ::CloseHandle(h);
  if (kind.empty()) return target;
  if (attrs & FILE_ATTRIBUTE_REPARSE_POINT)
    throw Error(Status::io_error, what + ": '" + path + "' links to " + kind + ", not a regular file: refusing to replace it");
  throw Error(Status::io_error, what + ": '" + path + "' is " + kind + ", not a regular file: refusing to replace it");
}

AtomicFile::AtomicFile(const std::string& path, const std::string& what, bool private_mode)
    : path_(target_of(path, what)), what_(what), given_(path) {
  SECURITY_ATTRIBUTES sa{};
  sa.nLength = sizeof sa;
  sa.bInheritHandle = FALSE;  // children never get it
  if (private_mode) {
    std::string why;
    sa.lpSecurityDescriptor = owner_only_descriptor(why);
    if (sa.lpSecurityDescriptor == nullptr)
      throw Error(Status::io_error, what_ + ": cannot make '" + path_ + "' private: " + why);
  }
  static constexpr char kChars[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  std::random_device rd;
  HANDLE h = INVALID_HANDLE_VALUE;
  DWORD err = 0;
  for (int attempt = 0; attempt < 100 && h == INVALID_HANDLE_VALUE; ++attempt) {
    tmp_ = path_ + ".";
    for (int i = 0; i < 6; ++i) tmp_ += kChars[rd() % (sizeof kChars - 1)];
    h = ::CreateFileW(win::wide(tmp_).c_str(), GENERIC_WRITE, 0, &sa, CREATE_NEW, FILE_ATTRIBUTE_NORMAL, nullptr);
    err = h == INVALID_HANDLE_VALUE ? ::GetLastError() : 0;
    if (err != ERROR_FILE_EXISTS && err != ERROR_ALREADY_EXISTS) break;
  }
  if (sa.lpSecurityDescriptor) ::LocalFree(sa.lpSecurityDescriptor);
  if (h == INVALID_HANDLE_VALUE)
    throw Error(Status::io_error, what_ + ": cannot create a temporary beside '" + given_ + "' ('" + tmp_ +
                                      "'): " + win::error_message(err));
  const int fd = ::_open_osfhandle(reinterpret_cast<std::intptr_t>(h), _O_BINARY | _O_WRONLY);
  f_ = fd >= 0 ? ::_fdopen(fd, "wb") : nullptr;
  if (f_ == nullptr) {
    const std::string why = std::strerror(errno);
    if (fd >= 0) ::_close(fd);
    else ::CloseHandle(h);
    ::DeleteFileW(win::wide(tmp_).c_str());
    throw Error(Status::io_error, what_ + ": cannot open the temporary '" + tmp_ + "' beside '" + given_ + "': " + why);
  }
}

AtomicFile::~AtomicFile() {
  if (f_ != nullptr) std::fclose(f_);
  if (!committed_) ::DeleteFileW(win::wide(tmp_).c_str());
}

bool AtomicFile::temp_inheritable() const {
  DWORD flags = 0;
  return f_ && ::GetHandleInformation(stream_handle(f_), &flags) && (flags & HANDLE_FLAG_INHERIT);
}

void AtomicFile::write(const void* data, std::size_t n) {
  if (n != 0 && std::fwrite(data, 1, n, f_) != n) fail("writing");
}

void AtomicFile::commit(bool sync) {
  if (std::fflush(f_) != 0) fail("writing");
  if (sync && !::FlushFileBuffers(stream_handle(f_)))
    throw Error(Status::io_error, what_ + ": writing '" + given_ + "' failed (in its temporary '" + tmp_ +
                                      "'): " + win::last_error_message());
  const int rc = std::fclose(f_);
  f_ = nullptr;
  if (rc != 0) fail("writing");
  // Judged again just before the move: something else may have taken the
  // path since the constructor looked.
  if (target_of(path_, what_) != path_)
    throw Error(Status::io_error, what_ + ": '" + path_ + "' changed into a symbolic link while being written");
  // Another writer's move onto the same path (or a reader opening it
  // without FILE_SHARE_DELETE) denies access for a moment: retried for up
  // to about a second before it counts as an error.
  const std::wstring from = win::wide(tmp_), to = win::wide(path_);
  DWORD err = 0;
  for (int attempt = 0; attempt < 50; ++attempt) {
    if (::MoveFileExW(from.c_str(), to.c_str(), MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) {
      err = 0;
      break;
    }
    err = ::GetLastError();
    if (err != ERROR_ACCESS_DENIED && err != ERROR_SHARING_VIOLATION) break;
    ::Sleep(20);
  }
  if (err != 0)
    throw Error(Status::io_error, what_ + ": cannot replace '" + given_ + "' (renaming its temporary '" + tmp_ +
                                      "' over it): " + win::error_message(err));
  committed_ = true;
}

void AtomicFile::fail(const char* doing) const {
  throw Error(Status::io_error, what_ + ": " + doing + " '" + given_ + "' failed (in its temporary '" + tmp_ + "'): " +
                                    std::strerror(errno));
}

}  // namespace latte
