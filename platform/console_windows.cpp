// CtrlCScope (console.h) on Windows: a console control handler
// (SetConsoleCtrlHandler), which the system calls on a thread of its own;
// Ctrl-Break and closing the console still end the process.
#include "platform/console.h"

#include <windows.h>

#include <atomic>

namespace latte {

namespace {

std::atomic<bool> g_pending{false};

BOOL WINAPI on_ctrl(DWORD type) {
  if (type != CTRL_C_EVENT) return FALSE;  // the next handler: the default ends the process
  if (g_pending.exchange(true)) ::ExitProcess(130);
  return TRUE;
}

}  // namespace

CtrlCScope::CtrlCScope() { ::SetConsoleCtrlHandler(on_ctrl, TRUE); }
CtrlCScope::~CtrlCScope() { ::SetConsoleCtrlHandler(on_ctrl, FALSE); }

bool ctrl_c_pending() { return g_pending.load(); }
void clear_ctrl_c() { g_pending.store(false); }

}  // namespace latte
