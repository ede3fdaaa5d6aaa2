// Parallel regions from per-ISA kernel bodies (included by *_impl.h after
// kernels/isa_body_impl.h): slots on the calling thread's pool
// (platform/thread_pool.h), whose rule holds here too: a slot never waits
// for another. The lambdas' trampolines are templates in an anonymous
// namespace, so each ISA's object keeps its own copies (isa_object_hygiene);
// the pool is baseline code reached through a plain function.
#pragma once

#include <cstddef>
#include <type_traits>

#include "platform/thread_pool.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

template <class F>
void isa_slot_trampoline(void* ctx, int slot, int n_slots) {
  (*static_cast<F*>(ctx))(slot, n_slots);
}

// body(slot, n_slots) for every slot in [0, n); on the calling thread alone
// where n <= 1 (no region at all).
template <class F>
void isa_parallel(int n, F&& body) {
  if (n <= 1) {
    body(0, 1);
    return;
  }
  using B = std::remove_reference_t<F>;
  ::latte::parallel_run(n, &isa_slot_trampoline<B>, const_cast<void*>(static_cast<const void*>(&body)));
}

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
