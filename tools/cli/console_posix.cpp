// The console (console.h) on POSIX systems: SIGINT, SIGTERM and SIGHUP
// handlers installed with sigaction, without SA_RESTART, so that a signal at
// an interactive prompt ends the blocking read instead of being held until
// Enter; isatty and fstat for the standard streams.
#include "tools/cli/console.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

namespace latte {

namespace {

volatile sig_atomic_t g_pending = 0;
volatile sig_atomic_t g_termination = 0;  // the signal number
struct sigaction g_old_int {}, g_old_term {}, g_old_hup {};

void on_sigint(int) {
  if (g_pending) _exit(130);
  g_pending = 1;
}

void on_termination(int sig) {
  if (g_termination) _exit(128 + g_termination);
  g_termination = sig;
}

}  // namespace

CtrlCScope::CtrlCScope() {
  struct sigaction sa {};
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = on_sigint;
  sigaction(SIGINT, &sa, &g_old_int);
  // A termination signal the process was started with ignored (nohup's
  // SIGHUP) stays ignored.
  sa.sa_handler = on_termination;
  for (auto [sig, old] : {std::pair{SIGTERM, &g_old_term}, std::pair{SIGHUP, &g_old_hup}}) {
    sigaction(sig, nullptr, old);
    if (old->sa_handler != SIG_IGN) sigaction(sig, &sa, nullptr);
  }
}

CtrlCScope::~CtrlCScope() {
  sigaction(SIGINT, &g_old_int, nullptr);
  sigaction(SIGTERM, &g_old_term, nullptr);
  sigaction(SIGHUP, &g_old_hup, nullptr);
}

bool ctrl_c_pending() { return g_pending != 0; }
void clear_ctrl_c() { g_pending = 0; }

bool termination_pending() { return g_termination != 0; }
int termination_exit_status() { return g_termination ? 128 + g_termination : 0; }
const char* termination_signal_name() {
  switch (g_termination) {
    case 0: return "";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a termination signal";
  }
}

bool stdin_is_terminal() { return ::isatty(STDIN_FILENO) == 1; }
bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

bool stdout_shares_stderr() {
  struct stat a {}, b {};
  if (::fstat(STDOUT_FILENO, &a) != 0 || ::fstat(STDERR_FILENO, &b) != 0) return false;
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_rdev == b.st_rdev;
}

}  // namespace latte
