// Helpers the Windows implementation files of the platform layer share:
// UTF-8 <-> UTF-16 and GetLastError's message. Included by *_windows.cpp only.
#pragma once

#include <windows.h>

#include <string>

namespace latte::win {

inline std::wstring wide(const std::string& utf8) {
  if (utf8.empty()) return {};
  const int n = ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), nullptr, 0);
  std::wstring w(static_cast<std::size_t>(n > 0 ? n : 0), L'\0');
  if (n > 0) ::MultiByteToWideChar(CP_UTF8, 0, utf8.data(), static_cast<int>(utf8.size()), w.data(), n);
  return w;
}

inline std::string utf8(const wchar_t* w, std::size_t len) {
  if (len == 0) return {};
  const int n = ::WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(len), nullptr, 0, nullptr, nullptr);
  std::string s(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  if (n > 0) ::WideCharToMultiByte(CP_UTF8, 0, w, static_cast<int>(len), s.data(), n, nullptr, nullptr);
  return s;
}
inline std::string utf8(const std::wstring& w) { return utf8(w.data(), w.size()); }

// The system's message for an error code (GetLastError()), without the
// trailing newline.
inline std::string error_message(DWORD code) {
  wchar_t* buf = nullptr;
  const DWORD n = ::FormatMessageW(FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM |
                                       FORMAT_MESSAGE_IGNORE_INSERTS,
                                   nullptr, code, 0, reinterpret_cast<wchar_t*>(&buf), 0, nullptr);
  std::string s = n ? utf8(buf, n) : "error " + std::to_string(code);
  if (buf) ::LocalFree(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '.')) s.pop_back();
  return s;
}
inline std::string last_error_message() { return error_message(::GetLastError()); }

}  // namespace latte::win
