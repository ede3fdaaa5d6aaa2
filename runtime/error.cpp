// Status names, and the unwinder preloaded for errors thrown under memory
// pressure.
#include "runtime/error.h"

#if defined(__GLIBC__)
#include <execinfo.h>
#endif

#include <atomic>

namespace latte {

const char* status_name(Status s) {
  switch (s) {
    case Status::ok: return "ok";
    case Status::invalid_argument: return "invalid argument";
    case Status::io_error: return "I/O error";
    case Status::bad_file: return "bad file";
    case Status::unsupported: return "unsupported";
    case Status::out_of_memory: return "out of memory";
    case Status::context_overflow: return "context overflow";
    case Status::internal: return "internal error";
  }
  return "unknown status";
}

void preload_unwinder() {
#if defined(__GLIBC__)
  // backtrace() loads glibc's unwinder link (libgcc_s) and keeps it for the
  // life of the process, for pthread_once's and pthread_cancel's cleanups.
  static std::atomic<bool> done{false};
  if (done.load(std::memory_order_acquire)) return;
  void* frame[2];
  ::backtrace(frame, 2);
  done.store(true, std::memory_order_release);
#endif
}

}  // namespace latte
