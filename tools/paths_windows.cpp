// paths.h on Windows: UTF-8 converted to and from the wide (UTF-16) calls;
// the executable from GetModuleFileNameW, the arguments from
// GetCommandLineW.
#include "tools/paths.h"

#include "platform/windows_util.h"  // <windows.h>, before <shellapi.h>; the wide conversions

#include <shellapi.h>

namespace latte {

std::string executable_path() {
  std::wstring buf(MAX_PATH, L'\0');
  for (;;) {
    const DWORD n = ::GetModuleFileNameW(nullptr, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0) return {};
    if (n < buf.size()) return win::utf8(buf.data(), n);
    if (buf.size() >= (1u << 16)) return {};  // longer than any path Windows allows
    buf.resize(buf.size() * 2);
  }
}

std::FILE* fopen_utf8(const std::string& path, const char* mode) {
  return ::_wfopen(win::wide(path).c_str(), win::wide(mode).c_str());
}

std::vector<std::string> utf8_arguments(int argc, char** argv) {
  int n = 0;
  wchar_t** w = ::CommandLineToArgvW(::GetCommandLineW(), &n);
  if (w == nullptr || n != argc) {  // not this program's arguments after all
    if (w) ::LocalFree(w);
    return std::vector<std::string>(argv, argv + argc);
  }
  std::vector<std::string> out;
  for (int i = 0; i < n; ++i) out.push_back(win::utf8(std::wstring(w[i])));
  ::LocalFree(w);
  return out;
}

void console_output_utf8() { ::SetConsoleOutputCP(CP_UTF8); }

}  // namespace latte
