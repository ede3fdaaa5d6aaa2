// The OS-independent part of paths.h: UTF-8 <-> std::filesystem::path, which
// the standard library converts to the OS's encoding (wide on Windows).
#include "tools/paths.h"

namespace latte {

std::filesystem::path path_from_utf8(const std::string& utf8) {
  return std::filesystem::path(std::u8string(utf8.begin(), utf8.end()));
}

std::string path_to_utf8(const std::filesystem::path& p) {
  const std::u8string s = p.u8string();
  return std::string(s.begin(), s.end());
}

}  // namespace latte
