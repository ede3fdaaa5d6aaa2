#include "tools/output_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "latte/latte.hpp"
#include "platform/atomic_file.h"
#include "tools/paths.h"

namespace latte {

void write_output_file(const std::string& path, const void* data, std::size_t n, const std::string& what) {
  std::error_code ec;
  const auto kind = std::filesystem::status(path_from_utf8(path), ec).type();
  if (kind == std::filesystem::file_type::fifo || kind == std::filesystem::file_type::character) {
    std::FILE* f = fopen_utf8(path, "wb");
    if (!f) throw api::Exception(LATTE_ERR_IO, "cannot open '" + path + "' for writing: " + std::strerror(errno));
    const bool ok = std::fwrite(data, 1, n, f) == n;
    if (std::fclose(f) != 0 || !ok)
      throw api::Exception(LATTE_ERR_IO, "writing '" + path + "' failed: " + std::strerror(errno));
    return;
  }
  AtomicFile f(path, what, /*private_mode=*/false);
  f.write(data, n);
  f.commit(/*sync=*/false);
}

}  // namespace latte
