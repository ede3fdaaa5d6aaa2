// The lines `latte run -i` reads: with line editing and history (libedit)
// where stdin is a terminal and the build has libedit, otherwise read plainly
// (read_line_bounded), as from a pipe or a file. The prompt goes to stderr,
// so that stdout carries the generated text alone.
#pragma once

#include <memory>
#include <string>

#include "tools/cli/commands.h"

namespace latte::cli {

class LineInput {
 public:
  explicit LineInput(std::string prompt);
  ~LineInput();
  LineInput(const LineInput&) = delete;
  LineInput& operator=(const LineInput&) = delete;

  // Shows the prompt and reads one line, without its newline. A signal that
  // interrupts the wait (Ctrl-C, a termination request) ends the input.
  LineRead read(std::string& line);
  // Whether lines are edited (libedit on a terminal): the terminal then
  // ends the prompt's line when Enter is pressed.
  bool editing() const;

 private:
  struct Editor;
  std::string prompt_;
  std::unique_ptr<Editor> editor_;  // null: plain reads
};

}  // namespace latte::cli
