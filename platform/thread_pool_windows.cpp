// available_cpus, fork_generation and the sleep on a word (thread_pool.h)
// on Windows.
#include "platform/thread_pool.h"

#include "platform/windows_util.h"

namespace latte {

int available_cpus() {
  const DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  return n > 0 ? static_cast<int>(n) : 1;
}

unsigned fork_generation() { return 0; }  // no fork

void wait_while_equal(std::atomic<std::uint32_t>& word, std::uint32_t old) {
  static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
  WaitOnAddress(reinterpret_cast<volatile VOID*>(&word), &old, sizeof old, INFINITE);
}

void wake_all(std::atomic<std::uint32_t>& word) { WakeByAddressAll(reinterpret_cast<PVOID>(&word)); }

}  // namespace latte
