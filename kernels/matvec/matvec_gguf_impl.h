// The GGUF formats' decoders for this TU's architecture, over the int8
// operation layer (kernels/int8/int8_ops_impl.h): the bit-field decoders
// below are written once; the K-quants' scales, mins and the Q5 fifth bits
// per ISA (matvec_gguf_{x86,neon}_impl.h), where the two register layouts
// differ. One decoder per format is issue 59's next step; until then they
// are matvec's.
#pragma once

#if defined(__AVX2__)
#include "kernels/matvec/matvec_gguf_x86_impl.h"
#elif defined(__aarch64__)
#include "kernels/matvec/matvec_gguf_neon_impl.h"
#else
#error "matvec_gguf_impl.h: no SIMD primitives for this target"
#endif

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// byte i = 0x10 where bit j of v[i] is set (Q5_K fifth bit)
template <int j>
inline I8x32 bitplane_x10(I8x32 v) {
  if constexpr (j <= 4) return shl_and<4 - j>(v, 0x10);
  else return shr_and<j - 4>(v, 0x10);
}
// ((v >> 2k) & 3) << 4 per byte (Q6_K high bits), k = 0..3
template <int k>
inline I8x32 q6_hi(I8x32 v) {
  if constexpr (k <= 2) return shl_and<4 - 2 * k>(v, 0x30);
  else return shr_and<2>(v, 0x30);
}
// (v >> s) & 3 per byte (Q2_K / Q3_K low bits), s even < 8
template <int s>
inline I8x32 crumb(I8x32 v) {
  return shr_and<s>(v, 3);
}
// byte i = 4 where bit j of v[i] is set (Q3_K third bit)
template <int j>
inline I8x32 bit_x04(I8x32 v) {
  if constexpr (j <= 2) return shl_and<2 - j>(v, 4);
  else return shr_and<j - 2>(v, 4);
}
// IQ4_NL / IQ4_XS: nibble indices (0..15) -> their signed table values
inline I8x32 iq4nl_lookup(I8x32 idx) { return lookup16(kIq4Table, idx); }

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
