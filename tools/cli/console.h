// The CLI's console, the only OS code outside platform/ (console_posix.cpp
// with sigaction and isatty, console_windows.cpp with SetConsoleCtrlHandler):
// Ctrl-C and termination requests, and what the standard streams are.
//
// While a CtrlCScope lives, Ctrl-C does not end the process: it sets a flag
// the program polls (to stop the reply being generated); a second Ctrl-C
// before the flag is cleared ends the process at once with status 130. A
// termination request (POSIX: SIGTERM, SIGHUP) sets a flag of its own that
// stays set: the program finishes or abandons its work cleanly (temporaries
// removed, files whole) and exits with termination_exit_status(); a second
// one before that ends the process at once with that status.
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

// Whether a termination request came while a CtrlCScope lived.
bool termination_pending();
// 128 + the request's signal number (SIGTERM: 143, SIGHUP: 129), as the
// shell reports a program the signal ended; 0 when none came.
int termination_exit_status();
// The request's signal name ("SIGTERM"), or "" when none came.
const char* termination_signal_name();

// Whether the stream is a terminal (a console on Windows).
bool stdin_is_terminal();
bool stderr_is_terminal();
// Whether stdout and stderr reach the same place (one terminal, pipe or
// file), so that a note on stderr lands among stdout's text.
bool stdout_shares_stderr();

}  // namespace latte
