// preload_unwinder (process.h): glibc's backtrace() loads its unwinder link.
#include "platform/process.h"

#include <atomic>
#include <cstdlib>  // defines __GLIBC__ where it is glibc

#if defined(__GLIBC__)
#include <execinfo.h>
#endif

namespace latte {

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
