// executable_path (executable_path.h) on Linux: /proc/self/exe.
#include "runtime/platform/executable_path.h"

#include <unistd.h>

#include <vector>

namespace latte {

std::string executable_path() {
  std::vector<char> buf(4096);
  for (;;) {
    const ssize_t n = ::readlink("/proc/self/exe", buf.data(), buf.size());
    if (n < 0) return {};
    if (static_cast<std::size_t>(n) < buf.size()) return std::string(buf.data(), static_cast<std::size_t>(n));
    if (buf.size() >= (1u << 20)) return {};
    buf.resize(buf.size() * 2);
  }
}

}  // namespace latte
