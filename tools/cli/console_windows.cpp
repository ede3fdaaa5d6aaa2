// The console (console.h) on Windows: a console control handler
// (SetConsoleCtrlHandler), which the system calls on a thread of its own;
// Ctrl-Break and closing the console still end the process (Windows has no
// termination request a process can finish its work after); _isatty and the
// handles' identities for the standard streams.
#include "tools/cli/console.h"

#include <windows.h>
#include <io.h>

#include <atomic>
#include <cstdio>

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

bool termination_pending() { return false; }
int termination_exit_status() { return 0; }
const char* termination_signal_name() { return ""; }

bool stdin_is_terminal() { return ::_isatty(::_fileno(stdin)) != 0; }
bool stderr_is_terminal() { return ::_isatty(::_fileno(stderr)) != 0; }

bool stdout_shares_stderr() {
  const HANDLE out = ::GetStdHandle(STD_OUTPUT_HANDLE), err = ::GetStdHandle(STD_ERROR_HANDLE);
  if (out == err) return true;
  DWORD mode = 0;
  // Two handles of one console.
  if (::GetConsoleMode(out, &mode) && ::GetConsoleMode(err, &mode)) return true;
  BY_HANDLE_FILE_INFORMATION a{}, b{};
  if (::GetFileInformationByHandle(out, &a) && ::GetFileInformationByHandle(err, &b))
    return a.dwVolumeSerialNumber == b.dwVolumeSerialNumber && a.nFileIndexHigh == b.nFileIndexHigh &&
           a.nFileIndexLow == b.nFileIndexLow;
  // Pipes cannot be compared: taken as shared (a note then starts a line of
  // its own on stderr, at worst after an empty one).
  return ::GetFileType(out) == FILE_TYPE_PIPE && ::GetFileType(err) == FILE_TYPE_PIPE;
}

}  // namespace latte
