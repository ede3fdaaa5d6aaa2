// Loading a model through the public API (latte.hpp): the progress line on
// a terminal, then what was loaded and, where the library logged why a file
// was mapped rather than read, that note.
#include <chrono>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "latte/latte.hpp"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"

namespace latte::cli {

api::Model open_model(const std::string& path, bool no_mmap, bool mmap) {
  latte_model_options options = latte_model_default_options();
  options.use_mmap = no_mmap ? 0 : mmap ? 1 : -1;
  ProgressLine progress;  // erased by its destructor if the load fails
  const std::string name = file_name_of(path);
  // The load's warnings (the library's log, at warn): said after the
  // "loaded" line, as notes about the load.
  std::mutex m;
  std::vector<std::string> warnings;
  api::set_log([&](latte_log_level level, const char* message) {
    if (level != LATTE_LOG_WARN) return;
    const std::lock_guard<std::mutex> lock(m);
    warnings.emplace_back(message);
  });
  struct Unset {
    ~Unset() { api::set_log(nullptr); }
  } unset;
  const auto t0 = std::chrono::steady_clock::now();
  api::Model model(path, options, [&](std::uint64_t done, std::uint64_t total) {
    progress.show(load_progress_text(name, done, total));
    return true;
  });
  progress.clear();
  std::fprintf(stderr, "loaded %s: %s, %s, in %.1f s\n", path.c_str(),
               binary_bytes(static_cast<double>(model.file_size())).c_str(),
               model.is_mapped() ? "mapped" : "read into memory",
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  // The mapping note comes as "PATH: why"; the CLI says it as it always has.
  const std::string prefix = path + ": ";
  for (const std::string& w : warnings) {
    if (w.compare(0, prefix.size(), prefix) == 0)
      std::fprintf(stderr, "note: %s; --no-mmap reads it all the same\n", w.c_str() + prefix.size());
    else
      std::fprintf(stderr, "warning: %s\n", w.c_str());
  }
  return model;
}

}  // namespace latte::cli
