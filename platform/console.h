// Ctrl-C for interactive programs (platform layer; console_posix.cpp with
// sigaction, console_windows.cpp with SetConsoleCtrlHandler). While a
// CtrlCScope lives, Ctrl-C does not end the process: it sets a flag the
// program polls (to stop the reply being generated); a second Ctrl-C before
// the flag is cleared ends the process at once with status 130.
#pragma once

namespace latte {

class CtrlCScope {
 public:
  CtrlCScope();
  ~CtrlCScope();
  CtrlCScope(const CtrlCScope&) = delete;
  CtrlCScope& operator=(const CtrlCScope&) = delete;
};

// Whether a Ctrl-C came since the last clear_ctrl_c().
bool ctrl_c_pending();
void clear_ctrl_c();

}  // namespace latte
