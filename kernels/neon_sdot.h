// sdot for the NEON kernel bodies, which the neon and asimd ISAs compile with
// the same ARMv8.0 flags (see CMakeLists.txt): the instruction in neon's
// files (LATTE_NEON_SDOT; ARMv8.2 cores with dot products), the same sums
// from widening multiplies and pairwise adds in asimd's (ARMv8.0 cores such
// as the Cortex-A53 and A72). In an anonymous namespace: each ISA's object
// keeps its own copy.
#pragma once

#if defined(__aarch64__)
#include <arm_neon.h>

namespace latte::kernels {
namespace {

// acc + the sums of a's and b's signed byte products four by four: lane i
// gets bytes 4i..4i+3. Exact either way: a product is at most 2^14 in size.
[[gnu::always_inline]] inline int32x4_t sdot_s32(int32x4_t acc, int8x16_t a, int8x16_t b) {
#if defined(LATTE_NEON_SDOT)
  // Enabled for the assembler for this one instruction (the file's own
  // .arch, the flags', is armv8-a): the compiler emits nothing beyond ARMv8.0
  // anywhere else in the file. (GAS 2.40 refused .arch_extension dotprod.)
  asm(".arch armv8.2-a+dotprod\n\tsdot %0.4s, %1.16b, %2.16b\n\t.arch armv8-a" : "+w"(acc) : "w"(a), "w"(b));
  return acc;
#else
  const int16x8_t lo = vmull_s8(vget_low_s8(a), vget_low_s8(b));  // bytes 0-7
  const int16x8_t hi = vmull_high_s8(a, b);                        // bytes 8-15
  return vaddq_s32(acc, vpaddq_s32(vpaddlq_s16(lo), vpaddlq_s16(hi)));
#endif
}

}  // namespace
}  // namespace latte::kernels
#endif
