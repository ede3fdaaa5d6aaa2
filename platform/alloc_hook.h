// Allocation-failure injection for tests (platform layer, no OS calls): the
// allocations Latte makes other than through operator new (aligned_alloc,
// calloc, the memory ranges of platform/memory.h) ask this hook first.
// Nothing in the library sets it, so the shipped build pays one load and a
// predictable branch where it allocates anyway; the allocation fault test
// (tests/reliability/) sets it to fail the N-th allocation.
#pragma once

#include <atomic>
#include <cstddef>

namespace latte {

// Returns true to fail an allocation of `bytes`.
using AllocFailHook = bool (*)(std::size_t bytes);

extern std::atomic<AllocFailHook> g_alloc_fail_hook;

// Whether an allocation of `bytes` about to be made must fail instead.
inline bool alloc_should_fail(std::size_t bytes) {
  const AllocFailHook h = g_alloc_fail_hook.load(std::memory_order_relaxed);
  return h != nullptr && h(bytes);
}

}  // namespace latte
