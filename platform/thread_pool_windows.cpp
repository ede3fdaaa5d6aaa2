// available_cpus and fork_generation (thread_pool.h) on Windows.
#include "platform/thread_pool.h"

#include "platform/windows_util.h"

namespace latte {

int available_cpus() {
  const DWORD n = GetActiveProcessorCount(ALL_PROCESSOR_GROUPS);
  return n > 0 ? static_cast<int>(n) : 1;
}

unsigned fork_generation() { return 0; }  // no fork

}  // namespace latte
