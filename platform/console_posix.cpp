// CtrlCScope (console.h) on POSIX systems: a SIGINT handler installed with
// sigaction, without SA_RESTART, so a Ctrl-C at an interactive prompt ends
// the blocking read instead of being held until Enter.
#include "platform/console.h"

#include <signal.h>
#include <unistd.h>

namespace latte {

namespace {

volatile sig_atomic_t g_pending = 0;
struct sigaction g_old {};

void on_sigint(int) {
  if (g_pending) _exit(130);
  g_pending = 1;
}

}  // namespace

CtrlCScope::CtrlCScope() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_old);
}

CtrlCScope::~CtrlCScope() { sigaction(SIGINT, &g_old, nullptr); }

bool ctrl_c_pending() { return g_pending != 0; }
void clear_ctrl_c() { g_pending = 0; }

}  // namespace latte
