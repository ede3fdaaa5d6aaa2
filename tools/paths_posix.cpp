// paths.h on POSIX systems: file names and arguments are bytes, taken as
// UTF-8. The executable: /proc/self/exe (Linux, Android), _NSGetExecutablePath
// (macOS, iOS), none elsewhere.
#include "tools/paths.h"

#include <unistd.h>

#if defined(__APPLE__)
#include <mach-o/dyld.h>
#include <cstdint>
#include <cstdlib>
#endif

namespace latte {

std::string executable_path() {
#if defined(__APPLE__)
  std::uint32_t n = 0;
  _NSGetExecutablePath(nullptr, &n);  // says the size needed
  std::string buf(n, '\0');
  if (_NSGetExecutablePath(buf.data(), &n) != 0) return {};
  buf.resize(std::char_traits<char>::length(buf.c_str()));
  char* real = ::realpath(buf.c_str(), nullptr);  // without symbolic links or "..", as /proc's
  if (real == nullptr) return buf;
  std::string out(real);
  std::free(real);
  return out;
#else
  std::string buf(4096, '\0');
  for (;;) {
    const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
    if (n < 0) return {};
    if (static_cast<std::size_t>(n) < buf.size()) return buf.substr(0, static_cast<std::size_t>(n));
    if (buf.size() >= (1u << 20)) return {};
    buf.resize(buf.size() * 2);
  }
#endif
}

std::FILE* fopen_utf8(const std::string& path, const char* mode) { return std::fopen(path.c_str(), mode); }

std::vector<std::string> utf8_arguments(int argc, char** argv) { return std::vector<std::string>(argv, argv + argc); }

void console_output_utf8() {}

}  // namespace latte
