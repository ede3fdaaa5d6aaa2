// The int8 operation layer on x86 (kernels/int8/int8_ops_impl.h says what it
// owns and why intrinsics): 256-bit operations on AVX2, with AVX-512 VL/BW/
// VNNI forms where the TU's flags have them, then the 512-bit forms the zmm
// kernels and mla_attn's avx512 body use.
#pragma once

#include "kernels/isa_body_impl.h"

#include <cstdint>
#include <cstring>

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// ------------------------------------------------------------------ 256-bit
using I8x32 = __m256i;  // 32 bytes: one weight group or one activation group
using I32 = __m256i;    // 8 int32 lanes; over a group, lanes 0-3 cover bytes 0-15
using Acc = __m256;     // f32 partial sums

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
inline float hsum(Acc a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

inline float h2f(std::uint16_t v) { return _cvtsh_ss(v); }
inline std::uint16_t ld_u16(const void* p) { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
inline I8x32 ld32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void st32(I8x32 v, void* p) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline void st_i32(__m256i v, std::int32_t* p) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
inline I32 i32_zero() { return _mm256_setzero_si256(); }
// the 4 bytes at p in every int32 lane
inline __m256i bcast4_x32(const void* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline Acc acc_zero() { return _mm256_setzero_ps(); }
inline __m256 cvt_i32_f32(__m256i v) { return _mm256_cvtepi32_ps(v); }

inline I8x32 splat8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
inline I8x32 or8(I8x32 a, I8x32 b) { return _mm256_or_si256(a, b); }
inline I8x32 sub8(I8x32 a, I8x32 b) { return _mm256_sub_epi8(a, b); }
inline I8x32 xor8(I8x32 a, I8x32 b) { return _mm256_xor_si256(a, b); }
// 16 bytes of nibble pairs -> [low nibbles of 0..15, high nibbles of 0..15]
inline I8x32 nib16(const std::uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), splat8(15));
}
// (v << n) & mask and (v >> n) & mask per byte, n < 8: a 16-bit shift, so
// the bits it moves in from the neighbour byte must fall outside the mask
// (shl_and: mask above bit n - 1; shr_and: mask below bit 8 - n)
template <int n>
inline I8x32 shl_and(I8x32 v, int mask) {
  if constexpr (n == 0) return _mm256_and_si256(v, splat8(mask));
  else return _mm256_and_si256(_mm256_slli_epi16(v, n), splat8(mask));
}
template <int n>
inline I8x32 shr_and(I8x32 v, int mask) {
  if constexpr (n == 0) return _mm256_and_si256(v, splat8(mask));
  else return _mm256_and_si256(_mm256_srli_epi16(v, n), splat8(mask));
}
inline I8x32 lo_nib(I8x32 v) { return _mm256_and_si256(v, splat8(15)); }
inline I8x32 hi_nib(I8x32 v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), splat8(15)); }
// byte i = table[idx[i]], idx in 0..15 (a 16-byte table, 16-byte aligned)
inline I8x32 lookup16(const std::int8_t* table, I8x32 idx) {
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(table))), idx);
}
// every 16-byte lane of x permuted by the same 16 byte indices
template <std::uint8_t... i>
inline __m256i tbl16_lanes(__m256i x) {
  static_assert(sizeof...(i) == 16);
  return _mm256_shuffle_epi8(x, _mm256_broadcastsi128_si256(_mm_setr_epi8(static_cast<char>(i)...)));
}
// bytes 0..15 times a, 16..31 times b (the products must fit a signed byte):
// in 16 bits, packed back (packs interleaves the 128-bit lanes; the permute
// undoes it)
inline I8x32 mul8_halves(I8x32 v, int a, int b) {
  const __m256i lo = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)), _mm256_set1_epi16(static_cast<short>(a)));
  const __m256i hi = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)), _mm256_set1_epi16(static_cast<short>(b)));
  return _mm256_permute4x64_epi64(_mm256_packs_epi16(lo, hi), 0xD8);
}
// v[i] holds 8 words of row i; afterwards v[k] holds word k of rows 0..7
// (the packed GEMM's row interleave)
inline void transpose8_words(I8x32 (&v)[8]) {
  __m256i u[8];
  for (int h = 0; h < 8; h += 4) {
    const __m256i t0 = _mm256_unpacklo_epi32(v[h], v[h + 1]), t1 = _mm256_unpackhi_epi32(v[h], v[h + 1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[h + 2], v[h + 3]), t3 = _mm256_unpackhi_epi32(v[h + 2], v[h + 3]);
    u[h] = _mm256_unpacklo_epi64(t0, t2);      // words 0 and 4 of rows h..h+3
    u[h + 1] = _mm256_unpackhi_epi64(t0, t2);  // 1, 5
    u[h + 2] = _mm256_unpacklo_epi64(t1, t3);  // 2, 6
    u[h + 3] = _mm256_unpackhi_epi64(t1, t3);  // 3, 7
  }
  for (int k = 0; k < 4; ++k) {
    v[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
    v[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
  }
}

// 8 int32 lanes; lane l = sum of bytes 4l..4l+3 of u*x (u unsigned <= 127 or
// 128 from abs(-128); x signed, never -128: no int16 saturation)
inline __m256i dot_lanes_u8s8(I8x32 u, I8x32 x) { return dot4(_mm256_setzero_si256(), u, x); }
// acc += s * dot(u, x)
inline Acc fma_dot_u(Acc acc, I8x32 u, I8x32 x, float s) {
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot_lanes_u8s8(u, x)), _mm256_set1_ps(s), acc);
}
// signed weights: |w| * (x with w's sign)
inline Acc fma_dot_s(Acc acc, I8x32 w, I8x32 x, float s) {
  return fma_dot_u(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w), s);
}
// acc += s0 * dot(first 16) + s1 * dot(last 16), signed weights
inline Acc fma_dot2_s(Acc acc, I8x32 w, I8x32 x, float s0, float s1) {
  const __m256i d = dot_lanes_u8s8(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_setr_m128(_mm_set1_ps(s0), _mm_set1_ps(s1)), acc);
}
inline Acc fma_i32(Acc acc, I32 v, float s) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(s), acc); }

// widen: out[j] = q[j] * (j < 16 ? s0 : s1) + m, j < 32 (q signed bytes)
inline void store32(I8x32 q, float s0, float s1, float m, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m256 vs0 = _mm256_set1_ps(s0), vs1 = _mm256_set1_ps(s1), vm = _mm256_set1_ps(m);
  auto cv = [](__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); };
  _mm256_storeu_ps(out, _mm256_fmadd_ps(cv(lo), vs0, vm));
  _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(cv(_mm_srli_si128(lo, 8)), vs0, vm));
  _mm256_storeu_ps(out + 16, _mm256_fmadd_ps(cv(hi), vs1, vm));
  _mm256_storeu_ps(out + 24, _mm256_fmadd_ps(cv(_mm_srli_si128(hi, 8)), vs1, vm));
}

// ------------------------------------------------------------------ 512-bit
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// as the __m256i form, with no saturation
inline __m512i dot4(__m512i acc, __m512i u, __m512i s) { return _mm512_dpbusd_epi32(acc, u, s); }
// dot4 against the 4 bytes at p in every lane, as vpdpbusd's embedded
// broadcast (GCC 12 keeps a separate vpbroadcastd for the intrinsic).
inline __m512i dot4_bcast(__m512i acc, __m512i u, const void* p) {
  __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*static_cast<const std::int32_t*>(p)));
  return acc;
}
#endif
#if defined(__AVX512F__)
inline std::int32_t hsum_i32(__m512i v) { return _mm512_reduce_add_epi32(v); }
inline float hmax_f32(__m512 v) { return _mm512_reduce_max_ps(v); }
inline __m512i ld64(const void* p) { return _mm512_loadu_si512(p); }
inline void st_i32(__m512i v, std::int32_t* p) { _mm512_storeu_si512(p, v); }
inline __m512i bcast4_x64(const void* p) {
  int v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}
inline __m512 cvt_i32_f32(__m512i v) { return _mm512_cvtepi32_ps(v); }
#endif
#if defined(__AVX512BW__)
inline __m512i lo_nib(__m512i v) { return _mm512_and_si512(v, _mm512_set1_epi8(15)); }
inline __m512i hi_nib(__m512i v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(15)); }
template <std::uint8_t... i>
inline __m512i tbl16_lanes(__m512i x) {
  static_assert(sizeof...(i) == 16);
  return _mm512_shuffle_epi8(x, _mm512_broadcast_i32x4(_mm_setr_epi8(static_cast<char>(i)...)));
}
#endif

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
