// ProgressLine (progress.h): the in-place line on a terminal's stderr.
#include "tools/cli/progress.h"

#include <algorithm>
#include <cstdio>
#include <string>

#include "tools/cli/console.h"

namespace latte::cli {

namespace {

// Wide enough for a progress line, narrow enough that an 80-column terminal
// does not wrap it (a wrapped line cannot be rewritten with '\r').
constexpr std::size_t kMaxColumns = 79;

// `s` cut to at most n bytes at a UTF-8 character boundary.
std::string cut_utf8(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

}  // namespace

ProgressLine::ProgressLine() : enabled_(stderr_is_terminal()) {}

void ProgressLine::show(const std::string& text, bool now) {
  if (!enabled_) return;
  const auto t = std::chrono::steady_clock::now();
  if (!now && shown_ > 0 && t - last_ < std::chrono::milliseconds(100)) return;
  last_ = t;
  const std::string line = cut_utf8(text, kMaxColumns);
  // The new text over the old, then spaces over what is left of it
  // (appended: GCC 12 warns, a false -Wrestrict, on "\r" + a string).
  std::string out(1, '\r');
  out += line;
  if (line.size() < shown_) out.append(shown_ - line.size(), ' ').append("\r").append(line);
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
  shown_ = line.size();
}

void ProgressLine::clear() {
  if (!enabled_ || shown_ == 0) return;
  std::string out(1, '\r');
  out.append(shown_, ' ').append("\r");
  std::fwrite(out.data(), 1, out.size(), stderr);
  std::fflush(stderr);
  shown_ = 0;
}

namespace {

struct Unit {
  double size;
  const char* name;
};

Unit unit_for(double bytes) {
  if (bytes >= 1024.0 * 1024 * 1024) return {1024.0 * 1024 * 1024, "GiB"};
  if (bytes >= 1024.0 * 1024) return {1024.0 * 1024, "MiB"};
  return {1024.0, "KiB"};
}

}  // namespace

std::string binary_bytes(double bytes) {
  const Unit u = unit_for(bytes);
  char b[48];
  std::snprintf(b, sizeof b, "%.1f %s", bytes / u.size, u.name);
  return b;
}

std::string load_progress_text(const std::string& name, std::uint64_t done, std::uint64_t total) {
  const auto percent = total == 0 ? 100u
                                  : static_cast<unsigned>(static_cast<double>(done) * 100.0 / static_cast<double>(total));
  return "loading " + name + ": " + std::to_string(std::min(percent, 100u)) + "%";
}

std::string binary_bytes_of(double done, double total) {
  const Unit u = unit_for(total);
  char b[64];
  std::snprintf(b, sizeof b, "%.1f / %.1f %s", done / u.size, total / u.size, u.name);
  return b;
}

std::string file_name_of(const std::string& path) {
  const std::size_t at = path.find_last_of("/\\");
  return at == std::string::npos || at + 1 == path.size() ? path : path.substr(at + 1);
}

}  // namespace latte::cli
