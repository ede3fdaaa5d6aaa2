// Progress of long work on stderr: one line updated in place ('\r') while
// stderr is a terminal, erased when the work is done or other output comes;
// nothing at all otherwise (a log or pipe keeps only the lines that say
// what was done).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace latte::cli {

class ProgressLine {
 public:
  ProgressLine();
  ~ProgressLine() { clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  bool enabled() const { return enabled_; }
  // Shows `text` (cut to one terminal line) in place of the last; at most
  // ten times a second unless `now`.
  void show(const std::string& text, bool now = false);
  // Erases the line, leaving the cursor at the start of it: before other
  // output to the terminal, and when the work is done.
  void clear();

 private:
  bool enabled_;
  std::size_t shown_ = 0;  // bytes of the line on screen
  std::chrono::steady_clock::time_point last_{};
};

// "1.2 GiB", "340.5 MiB", "12.0 KiB": binary units, one decimal.
std::string binary_bytes(double bytes);
// "1.2 / 9.0 GiB": both in the unit of the total.
std::string binary_bytes_of(double done, double total);
// "loading x.gguf: 37%": a model load's progress line, of its total (the
// file read or its tensors bound, then any re-layout: latte.h's progress).
std::string load_progress_text(const std::string& name, std::uint64_t done, std::uint64_t total);
// A path's last component, for progress lines ("models/x.gguf" -> "x.gguf").
std::string file_name_of(const std::string& path);

}  // namespace latte::cli
