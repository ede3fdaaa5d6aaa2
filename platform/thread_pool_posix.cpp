// available_cpus and fork_generation (thread_pool.h) on POSIX systems.
#include "platform/thread_pool.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>

#if defined(__linux__)
#include <sched.h>
#endif

namespace latte {

namespace {
std::atomic<unsigned> g_forks{0};
void on_fork_child() { g_forks.fetch_add(1, std::memory_order_relaxed); }
}  // namespace

int available_cpus() {
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
#endif
  const long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

unsigned fork_generation() {
  static const bool registered = pthread_atfork(nullptr, nullptr, on_fork_child) == 0;
  (void)registered;
  return g_forks.load(std::memory_order_relaxed);
}

}  // namespace latte
