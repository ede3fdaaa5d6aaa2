// available_cpus, fork_generation and the sleep on a word (thread_pool.h)
// on POSIX systems.
#include "platform/thread_pool.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <climits>
#include <cstdint>

#if defined(__linux__)
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
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

void wait_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old) {
#if defined(__linux__)
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  if (word.load(std::memory_order_seq_cst) != old) return;
  // EAGAIN (changed already), EINTR: the caller rechecks.
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
#else
  word.wait(old, std::memory_order_seq_cst);
#endif
}

void wake_all(std::atomic<std::uint32_t>& word) {
#if defined(__linux__)
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(&word), FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr, nullptr, 0);
#else
  word.notify_all();
#endif
}

}  // namespace latte
