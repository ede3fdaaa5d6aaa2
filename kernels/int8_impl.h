// The int8 primitives every kernel family uses (matvec's quantized rows and
// packed GEMM, mla_attn's int8 latent cache): the four-byte dot product and
// the horizontal reductions of int8 quantization. Per-ISA intrinsics, one
// overload per register type, not xsimd: the dot products (vpdpbusd,
// vpmaddubsw + vpmaddwd, sdot) have no xsimd spelling, and xsimd's integer
// batches on NEON leave weak symbols in per-ISA objects (isa_object_hygiene).
// In an anonymous namespace: each ISA's object keeps its own copy.
// What only one family needs stays there: matvec's weight decoders
// (matvec_int8_{x86,neon}_impl.h), mla_attn's cache transposes and weight
// packing (I8<Arch> in mla_attn_impl.h).
//
// sdot on aarch64: the neon and asimd ISAs compile the same NEON bodies with
// the same ARMv8.0 flags (CMakeLists.txt). neon's files have the instruction
// (LATTE_NEON_SDOT; ARMv8.2 cores with dot products), asimd's the same sums
// from widening multiplies and pairwise adds (Cortex-A53, A72).
#pragma once

#include "kernels/isa_body_impl.h"

#include <cstdint>

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

#if defined(__AVX2__)
// acc + per int32 lane the sum of its 4 byte products, u unsigned times s
// signed. Without VNNI the byte pairs are first summed in int16 by
// vpmaddubsw, which saturates: callers keep |u0 s0 + u1 s1| < 2^15.
inline __m256i dot4(__m256i acc, __m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(acc, u, s);
#else
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)));
#endif
}
inline std::int32_t hsum_i32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
  return _mm_cvtsi128_si32(h);
}
inline float hmax_f32(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_movehdup_ps(m));
  return _mm_cvtss_f32(m);
}
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// as the __m256i form, with no saturation
inline __m512i dot4(__m512i acc, __m512i u, __m512i s) { return _mm512_dpbusd_epi32(acc, u, s); }
#endif
#if defined(__AVX512F__)
inline std::int32_t hsum_i32(__m512i v) { return _mm512_reduce_add_epi32(v); }
inline float hmax_f32(__m512 v) { return _mm512_reduce_max_ps(v); }
#endif

#if defined(__aarch64__)
// acc + per int32 lane the sum of its 4 byte products, both signed (sdot).
// Exact either way: a product is at most 2^14 in size.
[[gnu::always_inline]] inline int32x4_t dot4(int32x4_t acc, int8x16_t a, int8x16_t b) {
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
inline std::int32_t hsum_i32(int32x4_t v) { return vaddvq_s32(v); }
inline float hmax_f32(float32x4_t v) { return vmaxvq_f32(v); }
#endif

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
