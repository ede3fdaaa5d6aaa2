// One body for every ISA: included only by matvec__<isa>.cpp.
//
// Everything here is either a template over the xsimd Arch or in an anonymous
// namespace (per-TU copies compiled with that TU's flags), and nothing uses
// std templates: an inline copy compiled with -mavx512f must never be the one
// the linker keeps for baseline callers.
//
// Quantized types: the activations are quantized once to int8 (ActQ8: one
// scale per 32; ActQ8K: one per 256 for the K-quants); each 32-element weight
// group is decoded to 32 bytes (unsigned 0..31 or signed int8) and dotted
// with the int8 activations (VNNI / maddubs / sdot). *_0/*_1/Q8_0: scaled by
// d_w * d_x into an f32 accumulator per group. K-quants: the integer sub-block
// scales multiply the int32 dots, one f32 FMA per 256. Offsets and mins
// (Q4_0's -8, Q4_1's m, K-quant mins) are applied through activation sums,
// so the integer path stays unsigned x signed.
#pragma once

#include "kernels/gcc_avx512_warnings.h"  // before the intrinsic headers

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include <omp.h>

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>

#include "kernels/neon_sdot.h"
#endif

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"

#ifndef LATTE_KERNEL_ISA_NS
#error "a kernel body is compiled in its ISA's file, which names the ISA's namespace (CMakeLists.txt)"
#endif
namespace latte::kernels {
// Each ISA's instances in a namespace of their own: two ISAs compiled with
// the same flags (neon, asimd) still never share a template instance.
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

inline std::size_t mv_min(std::size_t a, std::size_t b) { return a < b ? a : b; }

// IQ4_NL's table, copied by value into this file's own (internal) array:
// taking the address of the header's inline variable here made it a weak
// symbol of this per-ISA object (isa_object_hygiene).
alignas(16) constexpr std::int8_t kIq4Table[16] = {
    kIq4nlValues[0], kIq4nlValues[1], kIq4nlValues[2],  kIq4nlValues[3],  kIq4nlValues[4],  kIq4nlValues[5],
    kIq4nlValues[6], kIq4nlValues[7], kIq4nlValues[8],  kIq4nlValues[9],  kIq4nlValues[10], kIq4nlValues[11],
    kIq4nlValues[12], kIq4nlValues[13], kIq4nlValues[14], kIq4nlValues[15]};

// ------------------------------------------------------------ int8 primitives
#if defined(__AVX2__)

using I8x32 = __m256i;  // 32 bytes: one weight group or one activation group
using Acc = __m256;     // f32 partial sums

inline float h2f(std::uint16_t v) { return _cvtsh_ss(v); }
inline std::uint16_t ld_u16(const void* p) { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
inline I8x32 ld32(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
inline void st32(I8x32 v, void* p) { _mm256_storeu_si256(static_cast<__m256i*>(p), v); }
inline I8x32 splat8(int v) { return _mm256_set1_epi8(static_cast<char>(v)); }
inline I8x32 or8(I8x32 a, I8x32 b) { return _mm256_or_si256(a, b); }
inline I8x32 sub8(I8x32 a, I8x32 b) { return _mm256_sub_epi8(a, b); }
// 16 bytes of nibble pairs -> [low nibbles of 0..15, high nibbles of 0..15]
inline I8x32 nib16(const std::uint8_t* qs) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(v, 4), v), splat8(15));
}
inline I8x32 lo_nib(I8x32 v) { return _mm256_and_si256(v, splat8(15)); }
inline I8x32 hi_nib(I8x32 v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), splat8(15)); }
// byte i = 0x10 where bit i of `bits` is set (Q5_0/Q5_1 fifth bit)
inline I8x32 bits32_x10(std::uint32_t bits) {
#if defined(__AVX512BW__) && defined(__AVX512VL__)
  // the bits are a byte mask as they stand
  return _mm256_maskz_mov_epi8(static_cast<__mmask32>(bits), splat8(0x10));
#else
  const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), shuf);
  v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
  return _mm256_and_si256(v, splat8(0x10));
#endif
}
// byte i = 0x10 where bit j of v[i] is set (Q5_K fifth bit): bit j moved to
// bit 4 by a 16-bit shift (less than 8, so within each byte) and masked.
template <int j>
inline I8x32 bitplane_x10(I8x32 v) {
  if constexpr (j <= 4) return _mm256_and_si256(_mm256_slli_epi16(v, 4 - j), splat8(0x10));
  else return _mm256_and_si256(_mm256_srli_epi16(v, j - 4), splat8(0x10));
}
// ((v >> 2k) & 3) << 4 per byte (Q6_K high bits), k = 0..3
template <int k>
inline I8x32 q6_hi(I8x32 v) {
  if constexpr (k == 0) return _mm256_and_si256(_mm256_slli_epi16(v, 4), splat8(0x30));
  else if constexpr (k == 1) return _mm256_and_si256(_mm256_slli_epi16(v, 2), splat8(0x30));
  else if constexpr (k == 2) return _mm256_and_si256(v, splat8(0x30));
  else return _mm256_and_si256(_mm256_srli_epi16(v, 2), splat8(0x30));
}
// (v >> s) & 3 per byte (Q2_K / Q3_K low bits), s even < 8; the 16-bit
// shift's bits from the neighbour byte land above bit 1 and are masked.
template <int s>
inline I8x32 crumb(I8x32 v) {
  return _mm256_and_si256(_mm256_srli_epi16(v, s), splat8(3));
}
// byte i = 4 where bit j of v[i] is set (Q3_K third bit)
template <int j>
inline I8x32 bit_x04(I8x32 v) {
  if constexpr (j <= 2) return _mm256_and_si256(_mm256_slli_epi16(v, 2 - j), splat8(4));
  else return _mm256_and_si256(_mm256_srli_epi16(v, j - 2), splat8(4));
}
// IQ4_NL / IQ4_XS: nibble indices (0..15) -> their signed table values
inline I8x32 iq4nl_lookup(I8x32 idx) {
  return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4Table))), idx);
}
// bytes 0..15 times a, 16..31 times b (the products must fit a signed byte):
// in 16 bits, packed back (packs interleaves the 128-bit lanes; the permute
// undoes it)
inline I8x32 mul8_halves(I8x32 v, int a, int b) {
  const __m256i lo = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)), _mm256_set1_epi16(static_cast<short>(a)));
  const __m256i hi = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)), _mm256_set1_epi16(static_cast<short>(b)));
  return _mm256_permute4x64_epi64(_mm256_packs_epi16(lo, hi), 0xD8);
}
inline I8x32 xor8(I8x32 a, I8x32 b) { return _mm256_xor_si256(a, b); }
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
// 128 from abs(-128); x signed, never -128)
inline __m256i dot_lanes_u8s8(I8x32 u, I8x32 x) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, x);
#else
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), _mm256_set1_epi16(1));
#endif
}
inline Acc acc_zero() { return _mm256_setzero_ps(); }
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
inline float hsum(Acc a) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// Integer accumulation for the K-quants (activations share one scale per 256):
// I32 lanes 0-3 cover bytes 0-15 of a group, lanes 4-7 bytes 16-31.
using I32 = __m256i;
inline I32 i32_zero() { return _mm256_setzero_si256(); }
// A K-quant block's 8 or 16 integer sub-block scales as int16, in both
// 128-bit halves, so that one in-lane shuffle (not a multiply) spreads any of
// them over a register.
struct KScales {
  __m256i v;
};
inline KScales k_scales_u8(const std::uint8_t* sc8) {
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc8))))};
}
inline KScales k_scales_s8(const std::int8_t* sc8) {
  return {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc8))))};
}
inline KScales k_scales_s8_word(std::uint64_t packed) {
  return {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(_mm_cvtsi64_si128(static_cast<long long>(packed))))};
}
// int16 scale j0 in the lanes of bytes 0-15, j1 in those of bytes 16-31 (j < 8)
template <int j0, int j1>
inline __m256i k_scale(KScales s) {
  constexpr short lo = static_cast<short>((2 * j0 + 1) << 8 | 2 * j0), hi = static_cast<short>((2 * j1 + 1) << 8 | 2 * j1);
  return _mm256_shuffle_epi8(s.v, _mm256_setr_m128i(_mm_set1_epi16(lo), _mm_set1_epi16(hi)));
}
// acc + dot(u, x) * sc per int16 lane pair; u unsigned <= 63 (Q4_K/Q5_K
// weights, |Q6_K| <= 32), |x| <= 127: the byte-pair sums stay far from int16
// saturation (2 * 63 * 127). Two instructions on the multiply ports, as
// VNNI's dot plus an int32 multiply would be, but the scale needs no
// broadcast from a scalar.
inline I32 madd_sc_u(I32 acc, I8x32 u, I8x32 x, __m256i sc) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, x), sc));
}
inline I32 madd_sc_s(I32 acc, I8x32 w, I8x32 x, __m256i sc) {
  return madd_sc_u(acc, _mm256_abs_epi8(w), _mm256_sign_epi8(x, w), sc);
}
// acc - s * (mn[j] * sums[j], j < 8): a K-quant block's mins against the
// activation sums per 32, kept in the lanes (products < 2^24, exact in f32)
// rather than reduced per block.
inline Acc fnma_mins(Acc acc, const std::uint8_t* mn, const std::int32_t* sums, float s) {
  const __m256i p = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn))),
                                       _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums)));
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(s), acc);
}
inline Acc fma_i32(Acc acc, I32 v, float s) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(s), acc); }
// A Q3_K block's 16 scales minus 32 as int8 in one register, built there (a
// byte array from scalar code costs a slow move back into the vector unit):
// low nibbles of bytes 0-7, then their high nibbles; the top two bits of
// scale k from bits 2 * (k / 4) of byte 8 + k % 4, one 32-bit lane per k / 4.
struct Q3KScales {
  __m128i v;
};
inline Q3KScales q3k_scales(const std::uint8_t* s12) {
  const __m128i lo8 = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(s12));
  std::uint32_t h;
  std::memcpy(&h, s12 + 8, 4);
  const __m128i m4 = _mm_set1_epi8(15);
  const __m128i low = _mm_unpacklo_epi64(_mm_and_si128(lo8, m4), _mm_and_si128(_mm_srli_epi16(lo8, 4), m4));
  const __m128i top = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32(static_cast<int>(h)), _mm_setr_epi32(0, 2, 4, 6)),
                                    _mm_set1_epi8(3));
  return {_mm_sub_epi8(_mm_or_si128(low, _mm_slli_epi16(top, 4)), _mm_set1_epi8(32))};
}
template <int h>
inline KScales q3k_half(Q3KScales s) {
  return {_mm256_broadcastsi128_si256(_mm_cvtepi8_epi16(h == 0 ? s.v : _mm_srli_si128(s.v, 8)))};
}
// A Q2_K block's 16 4-bit scales and 16 4-bit mins, each as bytes in one
// register (the 16 scale bytes come first in the block, so one load).
struct Q2KScales {
  __m128i sc, mn;
};
inline Q2KScales q2k_scales(const std::uint8_t* s16) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s16));
  const __m128i m4 = _mm_set1_epi8(15);
  return {_mm_and_si128(raw, m4), _mm_and_si128(_mm_srli_epi16(raw, 4), m4)};
}
template <int h>
inline KScales q2k_half(const Q2KScales& s) {
  return {_mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(h == 0 ? s.sc : _mm_srli_si128(s.sc, 8)))};
}
// acc - f * (mins[k] * sums16[k]): kept in the lanes, as fnma_mins does
inline Acc q2k_fnma_mins(Acc acc, const Q2KScales& s, const std::int16_t* sums16, float f) {
  const __m256i p = _mm256_madd_epi16(_mm256_cvtepu8_epi16(s.mn), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums16)));
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f), acc);
}
// acc - f * (scales[k] * sums16[k]) (the format's -4 per weight), in the lanes
inline Acc q3k_fnma(Acc acc, Q3KScales s, const std::int16_t* sums16, float f) {
  const __m256i p = _mm256_madd_epi16(_mm256_cvtepi8_epi16(s.v), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(sums16)));
  return _mm256_fnmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(f), acc);
}

// out[j] = q[j] * (j < 16 ? s0 : s1) + m, j < 32 (q signed bytes)
inline void store32(I8x32 q, float s0, float s1, float m, float* out) {
  const __m128i lo = _mm256_castsi256_si128(q), hi = _mm256_extracti128_si256(q, 1);
  const __m256 vs0 = _mm256_set1_ps(s0), vs1 = _mm256_set1_ps(s1), vm = _mm256_set1_ps(m);
  auto cv = [](__m128i v) { return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v)); };
  _mm256_storeu_ps(out, _mm256_fmadd_ps(cv(lo), vs0, vm));
  _mm256_storeu_ps(out + 8, _mm256_fmadd_ps(cv(_mm_srli_si128(lo, 8)), vs0, vm));
  _mm256_storeu_ps(out + 16, _mm256_fmadd_ps(cv(hi), vs1, vm));
  _mm256_storeu_ps(out + 24, _mm256_fmadd_ps(cv(_mm_srli_si128(hi, 8)), vs1, vm));
}

#elif defined(__aarch64__)

struct I8x32 {
  int8x16_t a, b;
};
using Acc = float32x4_t;

inline float h2f(std::uint16_t v) {
  __fp16 f;
  std::memcpy(&f, &v, 2);
  return static_cast<float>(f);
}
inline std::uint16_t ld_u16(const void* p) { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
inline I8x32 ld32(const void* p) {
  const auto* q = static_cast<const std::int8_t*>(p);
  return {vld1q_s8(q), vld1q_s8(q + 16)};
}
inline void st32(I8x32 v, void* p) {
  auto* q = static_cast<std::int8_t*>(p);
  vst1q_s8(q, v.a);
  vst1q_s8(q + 16, v.b);
}
inline I8x32 splat8(int v) { return {vdupq_n_s8(static_cast<std::int8_t>(v)), vdupq_n_s8(static_cast<std::int8_t>(v))}; }
inline I8x32 or8(I8x32 x, I8x32 y) { return {vorrq_s8(x.a, y.a), vorrq_s8(x.b, y.b)}; }
inline I8x32 sub8(I8x32 x, I8x32 y) { return {vsubq_s8(x.a, y.a), vsubq_s8(x.b, y.b)}; }
inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }
inline uint8x16_t u8(int8x16_t v) { return vreinterpretq_u8_s8(v); }
inline I8x32 nib16(const std::uint8_t* qs) {
  const uint8x16_t v = vld1q_u8(qs);
  return {s8(vandq_u8(v, vdupq_n_u8(15))), s8(vshrq_n_u8(v, 4))};
}
inline I8x32 lo_nib(I8x32 v) { return {s8(vandq_u8(u8(v.a), vdupq_n_u8(15))), s8(vandq_u8(u8(v.b), vdupq_n_u8(15)))}; }
inline I8x32 hi_nib(I8x32 v) { return {s8(vshrq_n_u8(u8(v.a), 4)), s8(vshrq_n_u8(u8(v.b), 4))}; }
inline I8x32 bits32_x10(std::uint32_t bits) {
  static const std::uint8_t kIdx[32] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                        2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3};
  static const std::uint8_t kBit[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};
  const uint8x16_t t = vreinterpretq_u8_u32(vdupq_n_u32(bits));
  const uint8x16_t bit = vld1q_u8(kBit), x10 = vdupq_n_u8(0x10);
  const uint8x16_t a = vandq_u8(vtstq_u8(vqtbl1q_u8(t, vld1q_u8(kIdx)), bit), x10);
  const uint8x16_t b = vandq_u8(vtstq_u8(vqtbl1q_u8(t, vld1q_u8(kIdx + 16)), bit), x10);
  return {s8(a), s8(b)};
}
template <int j>
inline I8x32 bitplane_x10(I8x32 v) {
  const uint8x16_t x10 = vdupq_n_u8(0x10);
  auto f = [&](int8x16_t x) {
    if constexpr (j <= 4) return s8(vandq_u8(vshlq_n_u8(u8(x), 4 - j), x10));
    else return s8(vandq_u8(vshrq_n_u8(u8(x), j - 4), x10));
  };
  return {f(v.a), f(v.b)};
}
template <int k>
inline I8x32 q6_hi(I8x32 v) {
  const uint8x16_t m = vdupq_n_u8(0x30);
  auto f = [&](int8x16_t x) {
    if constexpr (k == 0) return s8(vandq_u8(vshlq_n_u8(u8(x), 4), m));
    else if constexpr (k == 1) return s8(vandq_u8(vshlq_n_u8(u8(x), 2), m));
    else if constexpr (k == 2) return s8(vandq_u8(u8(x), m));
    else return s8(vandq_u8(vshrq_n_u8(u8(x), 2), m));
  };
  return {f(v.a), f(v.b)};
}
template <int s>
inline I8x32 crumb(I8x32 v) {
  const uint8x16_t m = vdupq_n_u8(3);
  auto f = [&](int8x16_t x) {
    if constexpr (s == 0) return s8(vandq_u8(u8(x), m));
    else return s8(vandq_u8(vshrq_n_u8(u8(x), s), m));
  };
  return {f(v.a), f(v.b)};
}
template <int j>
inline I8x32 bit_x04(I8x32 v) {
  const uint8x16_t m = vdupq_n_u8(4);
  auto f = [&](int8x16_t x) {
    if constexpr (j < 2) return s8(vandq_u8(vshlq_n_u8(u8(x), 2 - j), m));
    else if constexpr (j == 2) return s8(vandq_u8(u8(x), m));
    else return s8(vandq_u8(vshrq_n_u8(u8(x), j - 2), m));
  };
  return {f(v.a), f(v.b)};
}
inline I8x32 iq4nl_lookup(I8x32 idx) {
  const int8x16_t t = vld1q_s8(kIq4Table);
  return {vqtbl1q_s8(t, u8(idx.a)), vqtbl1q_s8(t, u8(idx.b))};
}
// bytes 0..15 times a, 16..31 times b (the products must fit a signed byte)
inline I8x32 mul8_halves(I8x32 v, int a, int b) {
  return {vmulq_s8(v.a, vdupq_n_s8(static_cast<std::int8_t>(a))), vmulq_s8(v.b, vdupq_n_s8(static_cast<std::int8_t>(b)))};
}
inline I8x32 xor8(I8x32 x, I8x32 y) { return {veorq_s8(x.a, y.a), veorq_s8(x.b, y.b)}; }
// 4x4 transpose of 32-bit words
inline void transpose4_words(int32x4_t& r0, int32x4_t& r1, int32x4_t& r2, int32x4_t& r3) {
  const int32x4x2_t p = vtrnq_s32(r0, r1), q = vtrnq_s32(r2, r3);
  r0 = vcombine_s32(vget_low_s32(p.val[0]), vget_low_s32(q.val[0]));
  r1 = vcombine_s32(vget_low_s32(p.val[1]), vget_low_s32(q.val[1]));
  r2 = vcombine_s32(vget_high_s32(p.val[0]), vget_high_s32(q.val[0]));
  r3 = vcombine_s32(vget_high_s32(p.val[1]), vget_high_s32(q.val[1]));
}
// v[i] holds 8 words of row i; afterwards v[k] holds word k of rows 0..7
// (the packed GEMM's row interleave)
inline void transpose8_words(I8x32 (&v)[8]) {
  int32x4_t lo[8], hi[8];  // words 0..3, 4..7 of each row
  for (int i = 0; i < 8; ++i) {
    lo[i] = vreinterpretq_s32_s8(v[i].a);
    hi[i] = vreinterpretq_s32_s8(v[i].b);
  }
  for (int h = 0; h < 8; h += 4) {
    transpose4_words(lo[h], lo[h + 1], lo[h + 2], lo[h + 3]);  // lo[h + k]: word k of rows h..h+3
    transpose4_words(hi[h], hi[h + 1], hi[h + 2], hi[h + 3]);  // hi[h + k]: word 4 + k
  }
  for (int k = 0; k < 4; ++k) {
    v[k] = {vreinterpretq_s8_s32(lo[k]), vreinterpretq_s8_s32(lo[k + 4])};
    v[k + 4] = {vreinterpretq_s8_s32(hi[k]), vreinterpretq_s8_s32(hi[k + 4])};
  }
}
inline Acc acc_zero() { return vdupq_n_f32(0.f); }
// sdot is signed x signed: unsigned weights <= 127 are the same bytes.
inline Acc fma_dot_s(Acc acc, I8x32 w, I8x32 x, float s) {
  const int32x4_t d = sdot_s32(sdot_s32(vdupq_n_s32(0), w.a, x.a), w.b, x.b);
  return vfmaq_n_f32(acc, vcvtq_f32_s32(d), s);
}
inline Acc fma_dot_u(Acc acc, I8x32 u, I8x32 x, float s) { return fma_dot_s(acc, u, x, s); }
inline Acc fma_dot2_s(Acc acc, I8x32 w, I8x32 x, float s0, float s1) {
  acc = vfmaq_n_f32(acc, vcvtq_f32_s32(sdot_s32(vdupq_n_s32(0), w.a, x.a)), s0);
  return vfmaq_n_f32(acc, vcvtq_f32_s32(sdot_s32(vdupq_n_s32(0), w.b, x.b)), s1);
}
inline float hsum(Acc a) { return vaddvq_f32(a); }
struct I32 {
  int32x4_t a, b;  // bytes 0-15, bytes 16-31
};
inline I32 i32_zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
// A K-quant block's integer sub-block scales: sdot's int32 results are
// multiplied by a scalar lane (vmlaq_n_s32).
struct KScales {
  std::int32_t v[8];
};
inline KScales k_scales_u8(const std::uint8_t* sc8) {
  KScales s;
  for (int j = 0; j < 8; ++j) s.v[j] = sc8[j];
  return s;
}
inline KScales k_scales_s8(const std::int8_t* sc8) {
  KScales s;
  for (int j = 0; j < 8; ++j) s.v[j] = sc8[j];
  return s;
}
inline KScales k_scales_s8_word(std::uint64_t packed) {
  KScales s;
  for (int j = 0; j < 8; ++j) s.v[j] = static_cast<std::int8_t>(packed >> (8 * j));
  return s;
}
struct KScale2 {
  std::int32_t lo, hi;
};
template <int j0, int j1>
inline KScale2 k_scale(const KScales& s) {
  return {s.v[j0], s.v[j1]};
}
inline I32 madd_sc_s(I32 acc, I8x32 w, I8x32 x, KScale2 sc) {
  return {vmlaq_n_s32(acc.a, sdot_s32(vdupq_n_s32(0), w.a, x.a), sc.lo),
          vmlaq_n_s32(acc.b, sdot_s32(vdupq_n_s32(0), w.b, x.b), sc.hi)};
}
inline I32 madd_sc_u(I32 acc, I8x32 u, I8x32 x, KScale2 sc) { return madd_sc_s(acc, u, x, sc); }
inline Acc fnma_mins(Acc acc, const std::uint8_t* mn, const std::int32_t* sums, float s) {
  const uint16x8_t m16 = vmovl_u8(vld1_u8(mn));
  const int32x4_t lo = vreinterpretq_s32_u32(vmovl_u16(vget_low_u16(m16)));
  const int32x4_t hi = vreinterpretq_s32_u32(vmovl_u16(vget_high_u16(m16)));
  return vfmsq_n_f32(acc, vcvtq_f32_s32(vmlaq_s32(vmulq_s32(lo, vld1q_s32(sums)), hi, vld1q_s32(sums + 4))), s);
}
inline Acc fma_i32(Acc acc, I32 v, float s) { return vfmaq_n_f32(acc, vcvtq_f32_s32(vaddq_s32(v.a, v.b)), s); }
// acc - f * (a[k] * b[k], k < 16), in the lanes
inline Acc fnma_dot16(Acc acc, const std::int8_t* a, const std::int16_t* b, float f) {
  const int8x16_t v = vld1q_s8(a);
  const int16x8_t lo = vmovl_s8(vget_low_s8(v)), hi = vmovl_s8(vget_high_s8(v));
  int32x4_t p = vmull_s16(vget_low_s16(lo), vld1_s16(b));
  p = vmlal_s16(p, vget_high_s16(lo), vld1_s16(b + 4));
  p = vmlal_s16(p, vget_low_s16(hi), vld1_s16(b + 8));
  p = vmlal_s16(p, vget_high_s16(hi), vld1_s16(b + 12));
  return vfmsq_n_f32(acc, vcvtq_f32_s32(p), f);
}
// A Q3_K block's 16 scales minus 32 (q3_k_scales, in 32-bit words).
struct Q3KScales {
  std::int8_t v[16];
};
inline Q3KScales q3k_scales(const std::uint8_t* s12) {
  std::uint32_t a0, a1, a2;
  std::memcpy(&a0, s12, 4);
  std::memcpy(&a1, s12 + 4, 4);
  std::memcpy(&a2, s12 + 8, 4);
  constexpr std::uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const std::uint32_t w[4] = {(a0 & m4) | ((a2 & m2) << 4), (a1 & m4) | (((a2 >> 2) & m2) << 4),
                              ((a0 >> 4) & m4) | (((a2 >> 4) & m2) << 4), ((a1 >> 4) & m4) | (((a2 >> 6) & m2) << 4)};
  Q3KScales r;
  std::memcpy(r.v, w, 16);  // little-endian targets only
  for (int k = 0; k < 16; ++k) r.v[k] = static_cast<std::int8_t>(r.v[k] - 32);
  return r;
}
template <int h>
inline KScales q3k_half(const Q3KScales& s) {
  return k_scales_s8(s.v + 8 * h);
}
inline Acc q3k_fnma(Acc acc, const Q3KScales& s, const std::int16_t* sums16, float f) {
  return fnma_dot16(acc, s.v, sums16, f);
}
struct Q2KScales {
  std::uint8_t sc[16];
  std::int8_t mn[16];
};
inline Q2KScales q2k_scales(const std::uint8_t* s16) {
  Q2KScales r;
  for (int k = 0; k < 16; ++k) {
    r.sc[k] = s16[k] & 15;
    r.mn[k] = static_cast<std::int8_t>(s16[k] >> 4);
  }
  return r;
}
template <int h>
inline KScales q2k_half(const Q2KScales& s) {
  return k_scales_u8(s.sc + 8 * h);
}
inline Acc q2k_fnma_mins(Acc acc, const Q2KScales& s, const std::int16_t* sums16, float f) {
  return fnma_dot16(acc, s.mn, sums16, f);
}
inline void store32(I8x32 q, float s0, float s1, float m, float* out) {
  const float32x4_t vm = vdupq_n_f32(m);
  auto half = [&](int8x16_t v, float sc, float* o) {
    const int16x8_t a = vmovl_s8(vget_low_s8(v)), b = vmovl_s8(vget_high_s8(v));
    vst1q_f32(o, vfmaq_n_f32(vm, vcvtq_f32_s32(vmovl_s16(vget_low_s16(a))), sc));
    vst1q_f32(o + 4, vfmaq_n_f32(vm, vcvtq_f32_s32(vmovl_s16(vget_high_s16(a))), sc));
    vst1q_f32(o + 8, vfmaq_n_f32(vm, vcvtq_f32_s32(vmovl_s16(vget_low_s16(b))), sc));
    vst1q_f32(o + 12, vfmaq_n_f32(vm, vcvtq_f32_s32(vmovl_s16(vget_high_s16(b))), sc));
  };
  half(q.a, s0, out);
  half(q.b, s1, out + 16);
}

#else
#error "matvec_impl.h: no SIMD primitives for this target"
#endif

// ------------------------------------------------------------ row kernels
// Each computes out[t] = dot(W row, x_t) for NT tokens, decoding every weight
// group once. xq[t]: token t's ActQ8 blocks [cols/32].
//
// Two accumulator sets (A for even groups, B for odd) so consecutive groups
// do not wait on one FMA chain: with one set, a single token is bound by the
// FMA latency (about 4 cycles per 32 elements), not by loads or decoding.

// step(i, u) over blocks i < nb, u (the accumulator set, a compile-time
// constant: a run-time index put the accumulators on the stack, one
// store-to-load chain per block) alternating 0, 1 so consecutive blocks do not
// wait on one FMA chain.
template <class Step>
__attribute__((always_inline)) inline void for_block_pairs(std::size_t nb, Step& step) {
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) {
    step(i, std::integral_constant<int, 0>{});
    step(i + 1, std::integral_constant<int, 1>{});
  }
  if (i < nb) step(i, std::integral_constant<int, 0>{});
}

template <int NT>
struct Accs {
  Acc v[2][NT];
  float c[2][NT];  // scalar corrections (offsets, mins)
  Accs() {
    for (int u = 0; u < 2; ++u)
      for (int t = 0; t < NT; ++t) { v[u][t] = acc_zero(); c[u][t] = 0.f; }
  }
  void finish(float* out) const {
    for (int t = 0; t < NT; ++t) out[t] = hsum(v[0][t] + v[1][t]) + (c[0][t] + c[1][t]);
  }
};

template <int NT>
void row_q8_0(const BlockQ8_0* w, std::size_t nb, const ActQ8* const* xq, float* out) {
#if defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
  // Two groups per 512-bit register, their two scales built in one xmm and
  // spread over the halves by one permute: the 256-bit step spent as many
  // instructions on each group's scale (f16 conversion, multiply,
  // broadcast) as on its dot, which left Q8_0 decode short of the read rate.
  // Two accumulator sets, so consecutive pairs do not wait on one FMA chain.
  const __m512i halves = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2][NT];
  for (int u = 0; u < 2; ++u)
    for (int t = 0; t < NT; ++t) acc[u][t] = _mm512_setzero_ps();
  auto pair = [&](std::size_t i, int u) {
    // [d_i, d_i+1, ...]: only lanes 0 and 1 are used, so none are zeroed
    const __m128 dw = _mm_cvtph_ps(_mm_insert_epi16(_mm_cvtsi32_si128(ld_u16(&w[i].d)), ld_u16(&w[i + 1].d), 1));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(ld32(w[i].qs)), ld32(w[i + 1].qs), 1);
    const __m512i qa = _mm512_abs_epi8(q);
    const __mmask64 neg = _mm512_movepi8_mask(q);  // x takes w's sign: |w| * (+-x)
    for (int t = 0; t < NT; ++t) {
      const ActQ8* a = xq[t] + i;
      const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(ld32(a[0].qs)), ld32(a[1].qs), 1);
      const __m512i xs = _mm512_mask_sub_epi8(x, neg, _mm512_setzero_si512(), x);
      const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), qa, xs);
      const __m128 sc = _mm_mul_ps(dw, _mm_insert_ps(_mm_load_ss(&a[0].d), _mm_load_ss(&a[1].d), 0x10));
      acc[u][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_permutexvar_ps(halves, _mm512_castps128_ps512(sc)),
                                  acc[u][t]);
    }
  };
  std::size_t i = 0;
  for (; i + 4 <= nb; i += 4) {
    pair(i, 0);
    pair(i + 2, 1);
  }
  if (i + 2 <= nb) {
    pair(i, 0);
    i += 2;
  }
  for (int t = 0; t < NT; ++t) {
    float r = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][t], acc[1][t]));
    if (i < nb) r += hsum(fma_dot_s(acc_zero(), ld32(w[i].qs), ld32(xq[t][i].qs), h2f(ld_u16(&w[i].d)) * xq[t][i].d));
    out[t] = r;
  }
#else
  Accs<NT> s;
  auto step = [&](std::size_t i, int u) {
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = ld32(w[i].qs);
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
#endif
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: value = d*q + m, q unsigned (m = -8d / -16d for *_0).
template <int NT, class Block, bool kFive, bool kHasMin>
void row_q32(const Block* w, std::size_t nb, const ActQ8* const* xq, float* out) {
  Accs<NT> s;
  auto step = [&](std::size_t i, int u) {
    const float d = h2f(ld_u16(&w[i].d));
    float m;
    if constexpr (kHasMin) m = h2f(ld_u16(&w[i].m));
    else m = (kFive ? -16.f : -8.f) * d;
    I8x32 q = nib16(w[i].qs);
    if constexpr (kFive) {
      std::uint32_t qh;
      std::memcpy(&qh, w[i].qh, 4);  // little-endian targets only
      q = or8(q, bits32_x10(qh));
    }
    for (int t = 0; t < NT; ++t) {
      const ActQ8& a = xq[t][i];
      s.v[u][t] = fma_dot_u(s.v[u][t], q, ld32(a.qs), d * a.d);
      s.c[u][t] += m * a.s;
    }
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
}

// A Q4_K / Q5_K block's 12 bytes of 6-bit scales and mins -> bytes sc[0..7],
// mn[0..7] (sc[j] = q[j] & 63, mn[j] = q[j+4] & 63; for j + 4 the low four
// bits from q[j+8], the top two from q[j] and q[j+4]), four at a time in
// 32-bit words (little-endian targets only, as row_q32's qh).
inline void unpack_k4_scales_u8(const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* mn) {
  std::uint32_t u0, u1, u2;
  std::memcpy(&u0, q, 4);
  std::memcpy(&u1, q + 4, 4);
  std::memcpy(&u2, q + 8, 4);
  constexpr std::uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const std::uint32_t s_lo = u0 & m6, m_lo = u1 & m6;
  const std::uint32_t s_hi = (u2 & m4) | (((u0 >> 6) & m2) << 4);
  const std::uint32_t m_hi = ((u2 >> 4) & m4) | (((u1 >> 6) & m2) << 4);
  std::memcpy(sc, &s_lo, 4);
  std::memcpy(sc + 4, &s_hi, 4);
  std::memcpy(mn, &m_lo, 4);
  std::memcpy(mn + 4, &m_hi, 4);
}

// Unsigned weights of a Q4_K / Q5_K block's sub-blocks 2c (q0) and 2c + 1
// (q1): the low and high nibbles of qs[32c, 32c + 32), and for Q5_K the
// fifth bits from bit planes 2c and 2c + 1 of qh (the block's 32 qh bytes).
template <int c, bool kFive, class Block>
inline void k45_pair(const Block& b, I8x32 qh, I8x32& q0, I8x32& q1) {
  const I8x32 v = ld32(b.qs + 32 * c);
  q0 = lo_nib(v);
  q1 = hi_nib(v);
  if constexpr (kFive) {
    q0 = or8(q0, bitplane_x10<2 * c>(qh));
    q1 = or8(q1, bitplane_x10<2 * c + 1>(qh));
  }
}

// Q4_K / Q5_K against ActQ8K: sub-block j of 32 is value = d*sc_j*q - dmin*m_j.
// The 6-bit scales multiply the integer dots (one f32 FMA per 256 per token);
// the mins meet the activation sums per 32.
template <int NT, class Block, bool kFive>
void row_k45(const Block* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  // u: the accumulator set, a compile-time index (a runtime i & 1 put the
  // accumulators on the stack, one store-to-load chain per block).
  auto step = [&](std::size_t i, auto u_) {
    constexpr int u = decltype(u_)::value;
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(w[i].scales, sc, mn);
    const KScales ks = k_scales_u8(sc);
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    I8x32 qh{};
    if constexpr (kFive) qh = ld32(w[i].qh);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto pair = [&](auto c_) {
      constexpr int c = decltype(c_)::value;
      I8x32 q0, q1;
      k45_pair<c, kFive>(w[i], qh, q0, q1);
      const auto s0 = k_scale<2 * c, 2 * c>(ks), s1 = k_scale<2 * c + 1, 2 * c + 1>(ks);
      for (int t = 0; t < NT; ++t) {
        const std::int8_t* xs = xq[t][i].qs + 64 * c;
        ai[t] = madd_sc_u(ai[t], q0, ld32(xs), s0);
        ai[t] = madd_sc_u(ai[t], q1, ld32(xs + 32), s1);
      }
    };
    pair(std::integral_constant<int, 0>{});
    pair(std::integral_constant<int, 1>{});
    pair(std::integral_constant<int, 2>{});
    pair(std::integral_constant<int, 3>{});
    for (int t = 0; t < NT; ++t) {
      const ActQ8K& a = xq[t][i];
      s.v[u][t] = fnma_mins(fma_i32(s.v[u][t], ai[t], d * a.d), mn, a.sums, dmin * a.d);
    }
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

// Q2_K against ActQ8K: in half h, the 2-bit field j of the 32 qs bytes is
// elements 128h + 32j + (0..31), sub-blocks 8h + 2j and 8h + 2j + 1 (16
// each), whose 4-bit scales multiply the integer dots; the 4-bit mins meet
// the activation sums per 16.
template <int NT>
void row_q2_k(const BlockQ2_K* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in row_k45, inlined as row_q3_k's
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    const Q2KScales sc = q2k_scales(w[i].scales);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto half = [&](auto h_) __attribute__((always_inline)) {
      constexpr int h = decltype(h_)::value;
      const I8x32 v = ld32(w[i].qs + 32 * h);
      const KScales ks = q2k_half<h>(sc);
      auto group = [&](auto j_) __attribute__((always_inline)) {
        constexpr int j = decltype(j_)::value;
        const I8x32 q = crumb<2 * j>(v);
        const auto sg = k_scale<2 * j, 2 * j + 1>(ks);
        for (int t = 0; t < NT; ++t) ai[t] = madd_sc_u(ai[t], q, ld32(xq[t][i].qs + 128 * h + 32 * j), sg);
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    };
    half(std::integral_constant<int, 0>{});
    half(std::integral_constant<int, 1>{});
    for (int t = 0; t < NT; ++t) {
      const ActQ8K& a = xq[t][i];
      s.v[u][t] = q2k_fnma_mins(fma_i32(s.v[u][t], ai[t], d * a.d), sc, a.sums16, dmin * a.d);
    }
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

// Q3_K against ActQ8K: the low bits as Q2_K's, the third from bit plane
// 4h + j of hmask: unsigned 0..7 in the dots, and the format's -4 applied
// once per block through the activation sums per 16 (no sign juggling per
// group); signed 6-bit scales.
template <int NT>
void row_q3_k(const BlockQ3_K* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  // Inlined by force: GCC otherwise keeps the even blocks' step out of line,
  // with the accumulators in memory.
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in row_k45
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d));
    const Q3KScales sc = q3k_scales(w[i].scales);
    const I8x32 hm = ld32(w[i].hmask);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto half = [&](auto h_) __attribute__((always_inline)) {
      constexpr int h = decltype(h_)::value;
      const I8x32 v = ld32(w[i].qs + 32 * h);
      const KScales ks = q3k_half<h>(sc);
      auto group = [&](auto j_) __attribute__((always_inline)) {
        constexpr int j = decltype(j_)::value;
        const I8x32 q = or8(crumb<2 * j>(v), bit_x04<4 * h + j>(hm));
        const auto sg = k_scale<2 * j, 2 * j + 1>(ks);
        for (int t = 0; t < NT; ++t) ai[t] = madd_sc_u(ai[t], q, ld32(xq[t][i].qs + 128 * h + 32 * j), sg);
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    };
    half(std::integral_constant<int, 0>{});
    half(std::integral_constant<int, 1>{});
    for (int t = 0; t < NT; ++t) {
      const ActQ8K& a = xq[t][i];
      s.v[u][t] = q3k_fnma(fma_i32(s.v[u][t], ai[t], d * a.d), sc, a.sums16, 4.f * d * a.d);
    }
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

// IQ4_NL against ActQ8: each group's nibbles looked up in the 16-value table
// (an in-lane byte shuffle / tbl), signed weights dotted as Q8_0's.
template <int NT>
void row_iq4_nl(const BlockIQ4_NL* w, std::size_t nb, const ActQ8* const* xq, float* out) {
  Accs<NT> s;
  auto step = [&](std::size_t i, int u) {
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = iq4nl_lookup(nib16(w[i].qs));
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
}

// IQ4_XS sub-block j's scale minus 32: its 4 low bits are nibble j of
// scales_l, its 2 high bits at bit 2j of scales_h
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return ((((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((ld_u16(&b.scales_h) >> (2 * j)) & 3) << 4))) - 32;
}
// IQ4_XS's 8 sub-block scales minus 32, one per byte of a word
inline std::uint64_t iq4_xs_scales(const BlockIQ4_XS& b) {
  std::uint64_t packed = 0;
  for (int k = 0; k < 8; ++k)
    packed |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(iq4_xs_scale(b, k))) << (8 * k);
  return packed;
}

// IQ4_XS against ActQ8K: IQ4_NL's values in sub-blocks of 32 whose signed
// 6-bit scales multiply the integer dots (as the K-quants).
template <int NT>
void row_iq4_xs(const BlockIQ4_XS* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in row_k45
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d));
    const KScales ks = k_scales_s8_word(iq4_xs_scales(w[i]));
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto sub = [&](auto b_) __attribute__((always_inline)) {
      constexpr int b = decltype(b_)::value;
      const I8x32 q = iq4nl_lookup(nib16(w[i].qs + 16 * b));
      const auto sg = k_scale<b, b>(ks);
      for (int t = 0; t < NT; ++t) ai[t] = madd_sc_s(ai[t], q, ld32(xq[t][i].qs + 32 * b), sg);
    };
    sub(std::integral_constant<int, 0>{});
    sub(std::integral_constant<int, 1>{});
    sub(std::integral_constant<int, 2>{});
    sub(std::integral_constant<int, 3>{});
    sub(std::integral_constant<int, 4>{});
    sub(std::integral_constant<int, 5>{});
    sub(std::integral_constant<int, 6>{});
    sub(std::integral_constant<int, 7>{});
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_i32(s.v[u][t], ai[t], d * xq[t][i].d);
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

// The block-32 types besides Q8_0 (per 32-weight group: value = d * u + m,
// u unsigned, or IQ4_NL's table value): each one's block and how its
// weights decode, for the decode rows and the GEMM's packing.
template <GgmlType T>
struct Block32;
template <>
struct Block32<GgmlType::Q4_0> {
  using Block = BlockQ4_0;
  static constexpr bool kFive = false, kHasMin = false, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kFive = false, kHasMin = true, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kFive = true, kHasMin = false, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kFive = true, kHasMin = true, kIq4 = false;
};
template <>
struct Block32<GgmlType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr bool kFive = false, kHasMin = false, kIq4 = true;
};
// The types Block32 describes (each with a two-groups-a-zmm decode row).
constexpr bool has_b32_zmm_row(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
         t == GgmlType::IQ4_NL;
}

// ------------------------------------ block-32 decode rows, two groups a zmm
// One token's activations for row_b32_zmm, rearranged once per call:
//   qs (nb / 2, 64): pair p = [x_2p[0:16], x_2p+1[0:16], x_2p[16:32], x_2p+1[16:32]],
//       the order of a pair of weight groups' low and high nibbles as one
//       shift and one insert leave them; or, `natural`, [x_2p, x_2p+1]
//       (Q5_0 / Q5_1: their fifth bits are then a byte mask as they stand);
//   dx, sx (nb rounded up to 16): each group's d and s, zero-padded.
struct ActPairs {
  const std::int8_t* qs;
  const float* dx;
  const float* sx;
};
inline ActPairs build_act_pairs(const ActQ8* xq, std::size_t nb, std::uint8_t* buf, bool natural) {
  auto* qs = reinterpret_cast<std::int8_t*>(buf);
  auto* dx = reinterpret_cast<float*>(buf + nb / 2 * 64);
  const std::size_t padded = (nb + 15) / 16 * 16;
  float* sx = dx + padded;
  for (std::size_t p = 0; p < nb / 2; ++p) {
    std::int8_t* o = qs + 64 * p;
    if (natural) {
      std::memcpy(o, xq[2 * p].qs, 32);
      std::memcpy(o + 32, xq[2 * p + 1].qs, 32);
    } else {
      std::memcpy(o, xq[2 * p].qs, 16);
      std::memcpy(o + 16, xq[2 * p + 1].qs, 16);
      std::memcpy(o + 32, xq[2 * p].qs + 16, 16);
      std::memcpy(o + 48, xq[2 * p + 1].qs + 16, 16);
    }
  }
  for (std::size_t i = 0; i < padded; ++i) {
    dx[i] = i < nb ? xq[i].d : 0.f;
    sx[i] = i < nb ? xq[i].s : 0.f;
  }
  return {qs, dx, sx};
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// IQ4_NL's values + 128, unsigned, so they enter vpdpbusd as they are; the
// -128 comes back through the activation sums, as Q4_0's -8 does.
alignas(16) constexpr std::uint8_t kIq4TableU[16] = {
    static_cast<std::uint8_t>(kIq4Table[0] + 128),  static_cast<std::uint8_t>(kIq4Table[1] + 128),
    static_cast<std::uint8_t>(kIq4Table[2] + 128),  static_cast<std::uint8_t>(kIq4Table[3] + 128),
    static_cast<std::uint8_t>(kIq4Table[4] + 128),  static_cast<std::uint8_t>(kIq4Table[5] + 128),
    static_cast<std::uint8_t>(kIq4Table[6] + 128),  static_cast<std::uint8_t>(kIq4Table[7] + 128),
    static_cast<std::uint8_t>(kIq4Table[8] + 128),  static_cast<std::uint8_t>(kIq4Table[9] + 128),
    static_cast<std::uint8_t>(kIq4Table[10] + 128), static_cast<std::uint8_t>(kIq4Table[11] + 128),
    static_cast<std::uint8_t>(kIq4Table[12] + 128), static_cast<std::uint8_t>(kIq4Table[13] + 128),
    static_cast<std::uint8_t>(kIq4Table[14] + 128), static_cast<std::uint8_t>(kIq4Table[15] + 128)};

// One token, one row of Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL (value = d*u +
// m, u unsigned: m = -8d, -16d, the stored m, or -128d against kIq4TableU).
// The 256-bit row kernels spend most of each group on scalar work: its
// fp16 scale converted, multiplied by the activation's and broadcast, and
// m * s added. Here 16 groups' scales come in one gather and one multiply,
// the m * s terms in one FMA, and two groups share each zmm of weights:
// vpdpbusd, then a permute spreads the pair's two scales over the lanes.
template <class Block, bool kFive, bool kHasMin, bool kIq4>
float row_b32_zmm(const Block* w, std::size_t nb, const ActQ8* xq, const ActPairs& ap) {
  const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int>(sizeof(Block))));
  // which group of the pair each int32 lane of the dot products belongs to
  const __m512i pair_lanes = kFive ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
                                   : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i tab = _mm512_setzero_si512();
  if constexpr (kIq4) tab = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4TableU)));
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), cm = _mm512_setzero_ps();
  const std::size_t npair = nb / 2 * 2;  // groups taken in pairs; an odd last one below
  for (std::size_t i0 = 0; i0 < npair; i0 += 16) {
    const int n = static_cast<int>(mv_min(16, npair - i0));  // even
    // the groups' first 4 bytes: d (and Q4_1 / Q5_1's m above it)
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), static_cast<__mmask16>((1u << n) - 1), vidx,
                                                  static_cast<const void*>(w + i0), 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
    const __m512 sc = _mm512_mul_ps(dw, _mm512_loadu_ps(ap.dx + i0));
    if constexpr (kHasMin)
      cm = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))), _mm512_loadu_ps(ap.sx + i0), cm);
    else
      cm = _mm512_fmadd_ps(dw, _mm512_loadu_ps(ap.sx + i0), cm);
    auto pair = [&](int p, __m512& acc) __attribute__((always_inline)) {
      const Block* b = w + i0 + 2 * p;
      const __m256i v = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
      // [lo 0, lo 1, hi 0, hi 1] (16-byte lanes; lo g = group g's low nibbles)
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
      if constexpr (kFive) {
        // [lo 0, hi 0, lo 1, hi 1]: each group's 32 weights in order, so
        // its 32 fifth bits (qh, little-endian) mask its bytes directly
        q = _mm512_and_si512(_mm512_shuffle_i64x2(q, q, 0xD8), m4);
        std::uint32_t h0, h1;
        std::memcpy(&h0, b[0].qh, 4);
        std::memcpy(&h1, b[1].qh, 4);
        const __mmask64 bits = _mm512_kunpackd(_cvtu32_mask32(h1), _cvtu32_mask32(h0));
        q = _mm512_mask_add_epi8(q, bits, q, _mm512_set1_epi8(16));
      } else {
        q = _mm512_and_si512(q, m4);
      }
      if constexpr (kIq4) q = _mm512_shuffle_epi8(tab, q);
      const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q,
                                            _mm512_loadu_si512(ap.qs + (i0 / 2 + static_cast<std::size_t>(p)) * 64));
      const __m512 s2 = _mm512_permutexvar_ps(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * p)), sc);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s2, acc);
    };
    int p = 0;
    for (; p + 2 <= n / 2; p += 2) {  // two FMA chains
      pair(p, acc0);
      pair(p + 1, acc1);
    }
    if (p < n / 2) pair(p, acc0);
  }
  constexpr float kM = kHasMin ? 1.f : kIq4 ? -128.f : kFive ? -16.f : -8.f;
  float r = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + kM * _mm512_reduce_add_ps(cm);
  if (npair < nb) {  // the odd last group, with the 256-bit kernel
    const ActQ8* xt = xq + npair;
    float o;
    if constexpr (kIq4) row_iq4_nl<1>(reinterpret_cast<const BlockIQ4_NL*>(w + npair), 1, &xt, &o);
    else row_q32<1, Block, kFive, kHasMin>(w + npair, 1, &xt, &o);
    r += o;
  }
  return r;
}

// One token, one row of IQ4_XS: two sub-blocks per zmm against the
// activations as they lie in ActQ8K (the weights' 128-bit lanes shuffled to
// [lo 2c, hi 2c, lo 2c+1, hi 2c+1] instead), the table unsigned as in
// row_b32_zmm, and the signed 6-bit sub-block scales unpacked with vector
// shifts and applied to the integer dots with vpmulld. The 256-bit row
// spends an absolute value, a sign transfer and a scalar-unpacked scale on
// every 32 weights. The -128 of the unsigned table returns through the
// activations' sums per 32, times the same scales, in the block's integers.
// Exact in int32: per lane at most 4 pairs x 4 x 241 x 127 x 32, and the
// correction 8 x 32 x 4064 x 128, both < 2^25.
inline float row_iq4_xs_zmm(const BlockIQ4_XS* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i tab = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4TableU)));
  const __m256i sh_lo = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sh_hi = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  // the sub-block of each int32 lane of a pair's dot products, pair 0
  const __m512i pair_lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const BlockIQ4_XS& b = w[i];
    const ActQ8K& a = xq[i];
    std::uint32_t lo;
    std::memcpy(&lo, b.scales_l, 4);
    const __m256i sc = _mm256_sub_epi32(
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(lo)), sh_lo), _mm256_set1_epi32(15)),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(ld_u16(&b.scales_h)), sh_hi),
                                               _mm256_set1_epi32(3)),
                              4)),
        _mm256_set1_epi32(32));  // (8) ls - 32
    const __m512i scz = _mm512_zextsi256_si512(sc);
    // -128 * sum over sub-blocks of scale * activation sum
    __m512i ai = _mm512_zextsi256_si512(
        _mm256_slli_epi32(_mm256_mullo_epi32(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums))), 7));
    ai = _mm512_sub_epi32(_mm512_setzero_si512(), ai);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
      q = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_shuffle_i64x2(q, q, 0xD8), m4));
      const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(a.qs + 64 * c));
      const __m512i s2 = _mm512_permutexvar_epi32(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * c)), scz);
      ai = _mm512_add_epi32(ai, _mm512_mullo_epi32(d, s2));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

// One token, one row of Q4_K / Q5_K: sub-blocks 2c and 2c + 1 (the low and
// high nibbles of qs[32c, 32c + 32); Q5_K's fifth bits from bit planes 2c
// and 2c + 1 of qh, by a byte test into a mask) in one zmm against the
// activations as they lie, vpdpbusd, then vpmulld by the pair's 6-bit
// scales; the mins meet the activations' sums per 32 in one vpmulld per
// block. The 256-bit row spreads each sub-block's scale with a shuffle and
// multiplies it in with vpmaddubsw + vpmaddwd, 32 weights at a time.
template <class Block, bool kFive>
float row_k45_zmm(const Block* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15);
  // byte test patterns of pair c: bit 2c in the first 32 bytes, 2c + 1 in the rest
  const __m512i plane0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
  const __m512i pair_lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m256 accm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const Block& b = w[i];
    const ActQ8K& a = xq[i];
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kFive) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    alignas(8) std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(b.scales, sc, mn);
    const __m512i scz = _mm512_zextsi256_si512(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    const __m256i mins = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn))),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums)));
    __m512i ai = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
      if constexpr (kFive) {
        const __mmask64 hi = _mm512_test_epi8_mask(qh, _mm512_slli_epi16(plane0, 2 * c));
        q = _mm512_mask_add_epi8(q, hi, q, _mm512_set1_epi8(16));
      }
      const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, _mm512_loadu_si512(a.qs + 64 * c));
      const __m512i s2 = _mm512_permutexvar_epi32(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * c)), scz);
      ai = _mm512_add_epi32(ai, _mm512_mullo_epi32(d, s2));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
    accm[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(h2f(ld_u16(&b.dmin)) * a.d), accm[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) - hsum(_mm256_add_ps(accm[0], accm[1]));
}

// One token, one row of Q6_K: per half of 128, elements 0-63 (ql's low
// nibbles) and 64-127 (its high ones) in two zmm, each with its 2 high bits
// from qh by one 16-bit variable shift (a different count in each 32-byte
// half), vpdpbusd against the activations as they lie, vpmulld by the int8
// scales of their 16-element groups; the -32 returns through the
// activations' sums per 16 times the same scales, in the block's integers.
// Exact in int32: per lane at most 4 x (4 x 63 x 127 x 128), and the
// correction 32 x 128 x 16 x 127 x 16.
inline float row_q6_k_zmm(const BlockQ6_K* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
  // qh shift counts (16-bit lanes): elements 0-31 / 32-63 bits 0-1 / 2-3, elements 64-95 / 96-127 bits 4-5 / 6-7
  const __m512i cnt_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i cnt_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  // the 16-element group of each int32 lane of a 64-element dot, from the first
  const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const BlockQ6_K& b = w[i];
    const ActQ8K& a = xq[i];
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));  // (16)
    const __m512i corr = _mm512_mullo_epi32(sc, _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums16))));
    __m512i ai = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 5));
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(l, m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, cnt_lo), m3), 4));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, cnt_hi), m3), 4));
      const __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q0, _mm512_loadu_si512(a.qs + 128 * h));
      const __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q1, _mm512_loadu_si512(a.qs + 128 * h + 64));
      const __m512i s0 = _mm512_permutexvar_epi32(_mm512_add_epi32(quarter, _mm512_set1_epi32(8 * h)), sc);
      const __m512i s1 = _mm512_permutexvar_epi32(_mm512_add_epi32(quarter, _mm512_set1_epi32(8 * h + 4)), sc);
      ai = _mm512_add_epi32(ai, _mm512_add_epi32(_mm512_mullo_epi32(d0, s0), _mm512_mullo_epi32(d1, s1)));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}
#endif

// Q6_K against ActQ8K: group g (32 elements) of half h has scales sc[2g],
// sc[2g+1] (16 elements each); weights q-32 signed.
template <int NT>
void row_q6_k(const BlockQ6_K* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  const I8x32 k32 = splat8(32);
  auto step = [&](std::size_t i, auto u_) {  // u: as in row_k45
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d));
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    for (int h = 0; h < 2; ++h) {
      const I8x32 l0 = ld32(w[i].ql + 64 * h), l1 = ld32(w[i].ql + 64 * h + 32);
      const I8x32 hb = ld32(w[i].qh + 32 * h);
      const KScales ks = k_scales_s8(w[i].scales + 8 * h);
      I8x32 q[4];
      q[0] = sub8(or8(lo_nib(l0), q6_hi<0>(hb)), k32);
      q[1] = sub8(or8(lo_nib(l1), q6_hi<1>(hb)), k32);
      q[2] = sub8(or8(hi_nib(l0), q6_hi<2>(hb)), k32);
      q[3] = sub8(or8(hi_nib(l1), q6_hi<3>(hb)), k32);
      auto group = [&](auto g_) {
        constexpr int g = decltype(g_)::value;
        const auto sg = k_scale<2 * g, 2 * g + 1>(ks);
        for (int t = 0; t < NT; ++t) ai[t] = madd_sc_s(ai[t], q[g], ld32(xq[t][i].qs + 128 * h + 32 * g), sg);
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    }
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_i32(s.v[u][t], ai[t], d * xq[t][i].d);
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

// ------------------------------------------------------------ float weights
template <class Arch>
struct FloatLoads {
  using V = xsimd::batch<float, Arch>;
  static constexpr std::size_t W = V::size;
  static V f32(const std::uint8_t* p) { return V::load_unaligned(reinterpret_cast<const float*>(p)); }
  static V f16(const std::uint8_t* p) {
#if defined(__AVX512F__)
    if constexpr (W == 16) return V(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8) return V(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#endif
#if defined(__aarch64__)
    if constexpr (W == 4) return V(vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)))));
#endif
  }
  static V bf16(const std::uint8_t* p) {
#if defined(__AVX512F__)
    if constexpr (W == 16)
      return V(_mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16)));
#endif
#if defined(__AVX2__)
    if constexpr (W == 8)
      return V(_mm256_castsi256_ps(
          _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16)));
#endif
#if defined(__aarch64__)
    if constexpr (W == 4)
      return V(vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(reinterpret_cast<const std::uint16_t*>(p)), 16)));
#endif
  }
};

inline float scalar_f32(const std::uint8_t* p) { float v; std::memcpy(&v, p, 4); return v; }
inline float scalar_f16(const std::uint8_t* p) { return h2f(ld_u16(p)); }
inline float scalar_bf16(const std::uint8_t* p) {
  const std::uint32_t b = static_cast<std::uint32_t>(ld_u16(p)) << 16;
  float v;
  std::memcpy(&v, &b, 4);
  return v;
}

// kT: 0 f32, 1 f16, 2 bf16
template <class Arch, int NT, int kT>
void row_float(const std::uint8_t* w, std::size_t cols, const float* const* xf, float* out) {
  using L = FloatLoads<Arch>;
  using V = typename L::V;
  constexpr std::size_t W = L::W;
  constexpr std::size_t E = kT == 0 ? 4 : 2;  // bytes per element
  // U weight vectors per step: one token gets 4 FMA chains (FMA latency, not
  // loads, would bound it otherwise), several tokens 2 each.
  constexpr int U = NT == 1 ? 4 : 2;
  V acc[U][NT];
  for (int u = 0; u < U; ++u)
    for (int t = 0; t < NT; ++t) acc[u][t] = V(0.f);
  auto load = [](const std::uint8_t* p) {
    if constexpr (kT == 0) return L::f32(p);
    else if constexpr (kT == 1) return L::f16(p);
    else return L::bf16(p);
  };
  auto step = [&](std::size_t c) {
    for (int u = 0; u < U; ++u) {
      const V wv = load(w + (c + u * W) * E);
      for (int t = 0; t < NT; ++t) acc[u][t] = xsimd::fma(wv, V::load_unaligned(xf[t] + c + u * W), acc[u][t]);
    }
  };
  std::size_t c = 0;
  if constexpr (NT == 1) {
    // One token (decode): 4 steps per loop trip, unrolled. With the trip
    // count known only at run time, a trip per step streams an F16 matrix
    // slower; unrolled this way it matches a loop over compile-time columns
    // (docs/performance-log.md, "Figures moved out of code comments").
    for (; c + 4 * U * W <= cols; c += 4 * U * W) {
#pragma GCC unroll 4
      for (int k = 0; k < 4; ++k) step(c + static_cast<std::size_t>(k) * U * W);
    }
  }
  for (; c + U * W <= cols; c += U * W) step(c);
  for (; c + W <= cols; c += W) {
    const V w0 = load(w + c * E);
    for (int t = 0; t < NT; ++t) acc[0][t] = xsimd::fma(w0, V::load_unaligned(xf[t] + c), acc[0][t]);
  }
  for (int t = 0; t < NT; ++t) {
    V sum = acc[0][t];
    for (int u = 1; u < U; ++u) sum += acc[u][t];
    out[t] = xsimd::hadd(sum);
  }
  for (; c < cols; ++c) {
    const float wv = kT == 0 ? scalar_f32(w + c * E) : kT == 1 ? scalar_f16(w + c * E) : scalar_bf16(w + c * E);
    for (int t = 0; t < NT; ++t) out[t] += wv * xf[t][c];
  }
}

// ------------------------------------------------------------ dequantize
// The same decoders as the row kernels, written out as f32: out [32 * nb].
template <class Block, bool kFive, bool kHasMin>
void deq_q32(const Block* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i, out += 32) {
    const float d = h2f(ld_u16(&w[i].d));
    float m;
    if constexpr (kHasMin) m = h2f(ld_u16(&w[i].m));
    else m = (kFive ? -16.f : -8.f) * d;
    I8x32 q = nib16(w[i].qs);
    if constexpr (kFive) {
      std::uint32_t qh;
      std::memcpy(&qh, w[i].qh, 4);
      q = or8(q, bits32_x10(qh));
    }
    store32(q, d, d, m, out);
  }
}
inline void deq_q8_0_simd(const BlockQ8_0* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i, out += 32) {
    const float d = h2f(ld_u16(&w[i].d));
    store32(ld32(w[i].qs), d, d, 0.f, out);
  }
}
template <class Block, bool kFive>
void deq_k45(const Block* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(w[i].scales, sc, mn);
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    I8x32 qh{};
    if constexpr (kFive) qh = ld32(w[i].qh);
    auto pair = [&](auto c_) {
      constexpr int c = decltype(c_)::value;
      I8x32 q0, q1;
      k45_pair<c, kFive>(w[i], qh, q0, q1);
      const float s0 = d * sc[2 * c], s1 = d * sc[2 * c + 1];
      store32(q0, s0, s0, -(dmin * mn[2 * c]), out + 64 * c);
      store32(q1, s1, s1, -(dmin * mn[2 * c + 1]), out + 64 * c + 32);
    };
    pair(std::integral_constant<int, 0>{});
    pair(std::integral_constant<int, 1>{});
    pair(std::integral_constant<int, 2>{});
    pair(std::integral_constant<int, 3>{});
  }
}
inline void deq_q2_k_simd(const BlockQ2_K* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    for (int h = 0; h < 2; ++h) {
      const I8x32 v = ld32(w[i].qs + 32 * h);
      const std::uint8_t* sc = w[i].scales + 8 * h;
      auto group = [&](auto j_) {
        constexpr int j = decltype(j_)::value;
        const std::uint8_t s0 = sc[2 * j], s1 = sc[2 * j + 1];
        const float m0 = dmin * static_cast<float>(s0 >> 4), m1 = dmin * static_cast<float>(s1 >> 4);
        store32(crumb<2 * j>(v), d * static_cast<float>(s0 & 15), d * static_cast<float>(s1 & 15), -m0, out);
        for (int l = 16; l < 32; ++l) out[l] += m0 - m1;  // the second sub-block's own min
        out += 32;
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    }
  }
}
inline void deq_q3_k_simd(const BlockQ3_K* w, std::size_t nb, float* out) {
  const I8x32 k4 = splat8(4);
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h2f(ld_u16(&w[i].d));
    std::int8_t sc[16];
    q3_k_scales(w[i].scales, sc);
    const I8x32 hm = ld32(w[i].hmask);
    auto half = [&](auto h_) {
      constexpr int h = decltype(h_)::value;
      const I8x32 v = ld32(w[i].qs + 32 * h);
      auto group = [&](auto j_) {
        constexpr int j = decltype(j_)::value;
        const I8x32 q = sub8(or8(crumb<2 * j>(v), bit_x04<4 * h + j>(hm)), k4);
        store32(q, d * sc[8 * h + 2 * j], d * sc[8 * h + 2 * j + 1], 0.f, out);
        out += 32;
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    };
    half(std::integral_constant<int, 0>{});
    half(std::integral_constant<int, 1>{});
  }
}
inline void deq_iq4_nl_simd(const BlockIQ4_NL* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i, out += 32) {
    const float d = h2f(ld_u16(&w[i].d));
    store32(iq4nl_lookup(nib16(w[i].qs)), d, d, 0.f, out);
  }
}
inline void deq_iq4_xs_simd(const BlockIQ4_XS* w, std::size_t nb, float* out) {
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h2f(ld_u16(&w[i].d));
    const std::uint64_t sc = iq4_xs_scales(w[i]);
    for (int b = 0; b < 8; ++b, out += 32) {
      const float dl = d * static_cast<float>(static_cast<std::int8_t>(sc >> (8 * b)));
      store32(iq4nl_lookup(nib16(w[i].qs + 16 * b)), dl, dl, 0.f, out);
    }
  }
}
inline void deq_q6_k_simd(const BlockQ6_K* w, std::size_t nb, float* out) {
  const I8x32 k32 = splat8(32);
  for (std::size_t i = 0; i < nb; ++i) {
    const float d = h2f(ld_u16(&w[i].d));
    for (int h = 0; h < 2; ++h, out += 128) {
      const I8x32 l0 = ld32(w[i].ql + 64 * h), l1 = ld32(w[i].ql + 64 * h + 32);
      const I8x32 hb = ld32(w[i].qh + 32 * h);
      const std::int8_t* sc = w[i].scales + 8 * h;
      store32(sub8(or8(lo_nib(l0), q6_hi<0>(hb)), k32), d * sc[0], d * sc[1], 0.f, out);
      store32(sub8(or8(lo_nib(l1), q6_hi<1>(hb)), k32), d * sc[2], d * sc[3], 0.f, out + 32);
      store32(sub8(or8(hi_nib(l0), q6_hi<2>(hb)), k32), d * sc[4], d * sc[5], 0.f, out + 64);
      store32(sub8(or8(hi_nib(l1), q6_hi<3>(hb)), k32), d * sc[6], d * sc[7], 0.f, out + 96);
    }
  }
}

// f32 [n] -> bf16 bits [n], round to nearest even; a NaN stays a (quiet)
// NaN, as in f32_to_bf16 (rounding its mantissa would carry into the sign
// or the exponent: 0x7fffffff gave -0, 0x7f800001 +inf).
// Intrinsics, not xsimd integer batches: on NEON those take the addresses of
// xsimd's inline vreinterpret wrappers, which then become weak symbols here.
inline void f32_to_bf16_simd(const float* src, std::uint16_t* dst, std::size_t n) {
  std::size_t i = 0;
#if defined(__AVX2__)
  const __m256i bias = _mm256_set1_epi32(0x7fff), one = _mm256_set1_epi32(1);
  for (; i + 8 <= n; i += 8) {
    const __m256i x = _mm256_castps_si256(_mm256_loadu_ps(src + i));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(x, bias), _mm256_and_si256(_mm256_srli_epi32(x, 16), one)), 16);
    const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                           _mm256_set1_epi32(0x7f800000));
    const __m256i r = _mm256_blendv_epi8(
        rounded, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(0x40)), nan);
    // pack within 128-bit lanes, then gather the two low quarters
    const __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(r, r), 0x08);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), _mm256_castsi256_si128(p));
  }
#elif defined(__aarch64__)
  const uint32x4_t bias = vdupq_n_u32(0x7fff), one = vdupq_n_u32(1);
  for (; i + 4 <= n; i += 4) {
    const uint32x4_t x = vreinterpretq_u32_f32(vld1q_f32(src + i));
    const uint32x4_t rounded = vshrq_n_u32(vaddq_u32(vaddq_u32(x, bias), vandq_u32(vshrq_n_u32(x, 16), one)), 16);
    const uint32x4_t nan = vcgtq_u32(vandq_u32(x, vdupq_n_u32(0x7fffffffu)), vdupq_n_u32(0x7f800000u));
    const uint32x4_t r = vbslq_u32(nan, vorrq_u32(vshrq_n_u32(x, 16), vdupq_n_u32(0x40)), rounded);
    vst1_u16(dst + i, vmovn_u32(r));
  }
#endif
  for (; i < n; ++i) {
    std::uint32_t x;
    std::memcpy(&x, src + i, 4);
    dst[i] = (x & 0x7fffffffu) > 0x7f800000u ? static_cast<std::uint16_t>((x >> 16) | 0x40u)
                                             : static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
  }
}

// Activation quantization in vector registers, not generic code, whose
// scalar horizontal max over the lanes and int32 -> int8 narrowing through
// the stack are slow (docs/performance-log.md, "MoE regions, the activation
// quantizer"). act_amax: max |x|
// over n (a multiple of 32); a NaN may or may not survive it, act_round32
// catches it. act_round32: qs[j] = round(x[j] * id) (to nearest even), s0 /
// s1 the sums of the first / last 16; false where a product is NaN, inf or
// above 254 in magnitude (127 with room for rounding).
#if defined(__AVX512F__)
inline float act_amax(const float* x, std::size_t n) {
  __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
  for (std::size_t k = 0; k < n; k += 32) {
    m0 = _mm512_max_ps(m0, _mm512_abs_ps(_mm512_loadu_ps(x + k)));
    m1 = _mm512_max_ps(m1, _mm512_abs_ps(_mm512_loadu_ps(x + k + 16)));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(m0, m1));
}
inline bool act_round32(const float* x, float id, std::int8_t* qs, int& s0, int& s1) {
  const __m512 vid = _mm512_set1_ps(id), lim = _mm512_set1_ps(254.f);
  const __m512 y0 = _mm512_mul_ps(_mm512_loadu_ps(x), vid), y1 = _mm512_mul_ps(_mm512_loadu_ps(x + 16), vid);
  const __mmask16 ok = static_cast<__mmask16>(_mm512_cmp_ps_mask(_mm512_abs_ps(y0), lim, _CMP_LE_OQ) &
                                              _mm512_cmp_ps_mask(_mm512_abs_ps(y1), lim, _CMP_LE_OQ));
  const __m512i q0 = _mm512_cvtps_epi32(y0), q1 = _mm512_cvtps_epi32(y1);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs), _mm512_cvtepi32_epi8(q0));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qs + 16), _mm512_cvtepi32_epi8(q1));
  // GCC ends this reduction in scalar int adds: a NaN's conversion
  // (INT_MIN) would overflow them
  if (ok != 0xFFFF) return false;
  s0 = _mm512_reduce_add_epi32(q0);
  s1 = _mm512_reduce_add_epi32(q1);
  return true;
}
#elif defined(__AVX2__)
inline int hsum_i32(__m256i v) {
  __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  h = _mm_add_epi32(h, _mm_unpackhi_epi64(h, h));
  h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 1));
  return _mm_cvtsi128_si32(h);
}
inline float act_amax(const float* x, std::size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (std::size_t k = 0; k < n; k += 32)
    for (int i = 0; i < 4; ++i) m[i] = _mm256_max_ps(m[i], _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 8 * i)));
  const __m256 a = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_movehdup_ps(h));
  return _mm_cvtss_f32(h);
}
inline bool act_round32(const float* x, float id, std::int8_t* qs, int& s0, int& s1) {
  const __m256 vid = _mm256_set1_ps(id), lim = _mm256_set1_ps(254.f), sign = _mm256_set1_ps(-0.f);
  __m256i q[4];
  __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  for (int i = 0; i < 4; ++i) {
    const __m256 y = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), vid);
    ok = _mm256_and_ps(ok, _mm256_cmp_ps(_mm256_andnot_ps(sign, y), lim, _CMP_LE_OQ));
    q[i] = _mm256_cvtps_epi32(y);
  }
  // packs work within 128-bit lanes: dwords come out as q0[0..3], q1[0..3],
  // q2[0..3], q3[0..3], q0[4..7], ...; the permute puts them in order
  const __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(qs),
                      _mm256_permutevar8x32_epi32(b, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
  s0 = hsum_i32(_mm256_add_epi32(q[0], q[1]));
  s1 = hsum_i32(_mm256_add_epi32(q[2], q[3]));
  return _mm256_movemask_ps(ok) == 0xFF;
}
#elif defined(__aarch64__)
inline float act_amax(const float* x, std::size_t n) {
  float32x4_t m[4] = {vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f), vdupq_n_f32(0.f)};
  for (std::size_t k = 0; k < n; k += 16)
    for (int i = 0; i < 4; ++i) m[i] = vmaxq_f32(m[i], vabsq_f32(vld1q_f32(x + k + 4 * i)));
  return vmaxvq_f32(vmaxq_f32(vmaxq_f32(m[0], m[1]), vmaxq_f32(m[2], m[3])));
}
inline bool act_round32(const float* x, float id, std::int8_t* qs, int& s0, int& s1) {
  const float32x4_t lim = vdupq_n_f32(254.f);
  uint32x4_t ok = vdupq_n_u32(~0u);
  int32x4_t sum[2] = {vdupq_n_s32(0), vdupq_n_s32(0)};
  for (int h = 0; h < 4; ++h) {  // 8 values at a time
    const float32x4_t y0 = vmulq_n_f32(vld1q_f32(x + 8 * h), id), y1 = vmulq_n_f32(vld1q_f32(x + 8 * h + 4), id);
    ok = vandq_u32(ok, vandq_u32(vcaleq_f32(y0, lim), vcaleq_f32(y1, lim)));  // |y| <= 254, false for NaN
    const int32x4_t q0 = vcvtnq_s32_f32(y0), q1 = vcvtnq_s32_f32(y1);
    sum[h / 2] = vaddq_s32(sum[h / 2], vaddq_s32(q0, q1));
    vst1_s8(qs + 8 * h, vmovn_s16(vcombine_s16(vmovn_s32(q0), vmovn_s32(q1))));
  }
  s0 = vaddvq_s32(sum[0]);
  s1 = vaddvq_s32(sum[1]);
  return vminvq_u32(ok) == ~0u;
}
#endif

// 127 / amax, or 0 (amax then set to 0) where that is not finite
inline float act_inverse_scale(float& amax) {
  if (!__builtin_isfinite(127.f / amax)) amax = 0.f;  // zero, tiny, or NaN (caught by act_round32)
  return amax > 0.f ? 127.f / amax : 0.f;
}

inline bool is_float_type(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

}  // namespace

// ------------------------------------------------------------ Arch-templated
// Activation blocks are quantized to qs = round(x * 127 / amax), amax = max
// |x| over the block, scale d = amax / 127. amax 0 (quants 0) when the block
// is all zero or so small that 127 / amax overflows. A NaN or inf in the
// block (a model whose numbers overflow) gives zero quants and a NaN scale,
// so the product is NaN and the session's logits check reports it, instead
// of an int overflow in the sums or finite garbage (the conversion's result
// for NaN differs by ISA).

// x [cols] -> xq [cols/32]; and, where sums16 is not null, sums16 [cols/16]
// the integer sum of each half group's qs (the packed GEMM's offset terms:
// per 32 from two, per 16 for the types with 16-element sub-blocks)
template <class Arch>
void matvec_quantize_act(const float* x, std::size_t cols, ActQ8* xq, std::int32_t* sums16 = nullptr) {
  for (std::size_t b = 0; b < cols / 32; ++b) {
    float amax = act_amax(x + 32 * b, 32);
    const float id = act_inverse_scale(amax);
    int s0 = 0, s1 = 0;
    if (!act_round32(x + 32 * b, id, xq[b].qs, s0, s1)) {
      std::memset(xq[b].qs, 0, 32);
      s0 = s1 = 0;
      amax = __builtin_nanf("");
    }
    xq[b].d = amax / 127.f;
    xq[b].s = xq[b].d * static_cast<float>(s0 + s1);
    if (sums16) {
      sums16[2 * b] = s0;
      sums16[2 * b + 1] = s1;
    }
  }
}

// x [cols] -> xq [cols/256] (one scale per 256, sums per 32 and per 16)
template <class Arch>
void matvec_quantize_act_k(const float* x, std::size_t cols, ActQ8K* xq) {
  for (std::size_t b = 0; b < cols / 256; ++b) {
    const float* xb = x + 256 * b;
    float amax = act_amax(xb, 256);
    const float id = act_inverse_scale(amax);
    bool ok = true;
    for (int g = 0; g < 8; ++g) {
      int s0 = 0, s1 = 0;
      ok = act_round32(xb + 32 * g, id, xq[b].qs + 32 * g, s0, s1) && ok;
      xq[b].sums16[2 * g] = static_cast<std::int16_t>(s0);  // |sum| <= 16 * 127
      xq[b].sums16[2 * g + 1] = static_cast<std::int16_t>(s1);
      // Unsigned: after a NaN or inf (ok false, the block zeroed below) the
      // sums hold INT_MIN-based garbage whose int sum would overflow (UB).
      xq[b].sums[g] = static_cast<int>(static_cast<unsigned>(s0) + static_cast<unsigned>(s1));
    }
    if (!ok) {
      std::memset(xq[b].qs, 0, sizeof xq[b].qs);
      std::memset(xq[b].sums16, 0, sizeof xq[b].sums16);
      std::memset(xq[b].sums, 0, sizeof xq[b].sums);
      amax = __builtin_nanf("");
    }
    xq[b].d = amax / 127.f;
  }
}

// n elements of `type` at src -> dst [n] as f32
template <class Arch>
void dequantize_body(GgmlType type, const void* src, float* dst, std::size_t n) {
  matvec_check_args(type, n);
  const auto* p = static_cast<const std::uint8_t*>(src);
  using L = FloatLoads<Arch>;
  constexpr std::size_t W = L::W;
  switch (type) {
    case GgmlType::F32: std::memcpy(dst, src, n * 4); return;
    case GgmlType::F16:
    case GgmlType::BF16: {
      const bool h = type == GgmlType::F16;
      std::size_t i = 0;
      for (; i + W <= n; i += W) (h ? L::f16(p + 2 * i) : L::bf16(p + 2 * i)).store_unaligned(dst + i);
      for (; i < n; ++i) dst[i] = h ? scalar_f16(p + 2 * i) : scalar_bf16(p + 2 * i);
      return;
    }
    case GgmlType::Q8_0: return deq_q8_0_simd(reinterpret_cast<const BlockQ8_0*>(p), n / 32, dst);
    case GgmlType::Q4_0: return deq_q32<BlockQ4_0, false, false>(reinterpret_cast<const BlockQ4_0*>(p), n / 32, dst);
    case GgmlType::Q4_1: return deq_q32<BlockQ4_1, false, true>(reinterpret_cast<const BlockQ4_1*>(p), n / 32, dst);
    case GgmlType::Q5_0: return deq_q32<BlockQ5_0, true, false>(reinterpret_cast<const BlockQ5_0*>(p), n / 32, dst);
    case GgmlType::Q5_1: return deq_q32<BlockQ5_1, true, true>(reinterpret_cast<const BlockQ5_1*>(p), n / 32, dst);
    case GgmlType::Q2_K: return deq_q2_k_simd(reinterpret_cast<const BlockQ2_K*>(p), n / 256, dst);
    case GgmlType::Q3_K: return deq_q3_k_simd(reinterpret_cast<const BlockQ3_K*>(p), n / 256, dst);
    case GgmlType::Q4_K: return deq_k45<BlockQ4_K, false>(reinterpret_cast<const BlockQ4_K*>(p), n / 256, dst);
    case GgmlType::Q5_K: return deq_k45<BlockQ5_K, true>(reinterpret_cast<const BlockQ5_K*>(p), n / 256, dst);
    case GgmlType::Q6_K: return deq_q6_k_simd(reinterpret_cast<const BlockQ6_K*>(p), n / 256, dst);
    case GgmlType::IQ4_NL: return deq_iq4_nl_simd(reinterpret_cast<const BlockIQ4_NL*>(p), n / 32, dst);
    case GgmlType::IQ4_XS: return deq_iq4_xs_simd(reinterpret_cast<const BlockIQ4_XS*>(p), n / 256, dst);
  }
}

// n elements of `type` -> bf16 [n], through an f32 chunk on the stack.
template <class Arch>
void dequantize_bf16_body(GgmlType type, const void* src, std::uint16_t* dst, std::size_t n) {
  matvec_check_args(type, n);
  const std::size_t blk = ggml_block_elems(type);
  const std::size_t bytes_per_blk = ggml_row_bytes(type, blk);
  if (type == GgmlType::BF16) { std::memcpy(dst, src, 2 * n); return; }
  constexpr std::size_t kChunk = 1024;  // elements per pass (a multiple of every block size)
  alignas(64) float buf[kChunk];
  const auto* p = static_cast<const std::uint8_t*>(src);
  for (std::size_t i = 0; i < n; i += kChunk) {
    const std::size_t m = mv_min(kChunk, n - i);
    dequantize_body<Arch>(type, p + i / blk * bytes_per_blk, buf, m);
    f32_to_bf16_simd(buf, dst + i, m);
  }
}

// out[t] = W row . x_t for NT tokens, with the row kernel of type T.
template <class Arch, int NT, GgmlType T>
void row_of_type(const std::uint8_t* w, std::size_t cols, const float* const* xf, const void* const* xv, float* out) {
  const auto* xq = reinterpret_cast<const ActQ8* const*>(xv);
  const auto* xk = reinterpret_cast<const ActQ8K* const*>(xv);
  if constexpr (T == GgmlType::F32) row_float<Arch, NT, 0>(w, cols, xf, out);
  else if constexpr (T == GgmlType::F16) row_float<Arch, NT, 1>(w, cols, xf, out);
  else if constexpr (T == GgmlType::BF16) row_float<Arch, NT, 2>(w, cols, xf, out);
  else if constexpr (T == GgmlType::Q8_0) row_q8_0<NT>(reinterpret_cast<const BlockQ8_0*>(w), cols / 32, xq, out);
  else if constexpr (T == GgmlType::Q4_0)
    row_q32<NT, BlockQ4_0, false, false>(reinterpret_cast<const BlockQ4_0*>(w), cols / 32, xq, out);
  else if constexpr (T == GgmlType::Q4_1)
    row_q32<NT, BlockQ4_1, false, true>(reinterpret_cast<const BlockQ4_1*>(w), cols / 32, xq, out);
  else if constexpr (T == GgmlType::Q5_0)
    row_q32<NT, BlockQ5_0, true, false>(reinterpret_cast<const BlockQ5_0*>(w), cols / 32, xq, out);
  else if constexpr (T == GgmlType::Q5_1)
    row_q32<NT, BlockQ5_1, true, true>(reinterpret_cast<const BlockQ5_1*>(w), cols / 32, xq, out);
  else if constexpr (T == GgmlType::Q2_K) row_q2_k<NT>(reinterpret_cast<const BlockQ2_K*>(w), cols / 256, xk, out);
  else if constexpr (T == GgmlType::Q3_K) row_q3_k<NT>(reinterpret_cast<const BlockQ3_K*>(w), cols / 256, xk, out);
  else if constexpr (T == GgmlType::Q4_K)
    row_k45<NT, BlockQ4_K, false>(reinterpret_cast<const BlockQ4_K*>(w), cols / 256, xk, out);
  else if constexpr (T == GgmlType::Q5_K)
    row_k45<NT, BlockQ5_K, true>(reinterpret_cast<const BlockQ5_K*>(w), cols / 256, xk, out);
  else if constexpr (T == GgmlType::Q6_K) row_q6_k<NT>(reinterpret_cast<const BlockQ6_K*>(w), cols / 256, xk, out);
  else if constexpr (T == GgmlType::IQ4_NL) row_iq4_nl<NT>(reinterpret_cast<const BlockIQ4_NL*>(w), cols / 32, xq, out);
  else row_iq4_xs<NT>(reinterpret_cast<const BlockIQ4_XS*>(w), cols / 256, xk, out);
}

// fn(std::integral_constant<GgmlType, type>{}): a run-time type to a
// compile-time one, the one switch over the weight types.
template <class Arch, class Fn>
void with_type(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::F32: return fn(std::integral_constant<GgmlType, GgmlType::F32>{});
    case GgmlType::F16: return fn(std::integral_constant<GgmlType, GgmlType::F16>{});
    case GgmlType::BF16: return fn(std::integral_constant<GgmlType, GgmlType::BF16>{});
    case GgmlType::Q8_0: return fn(std::integral_constant<GgmlType, GgmlType::Q8_0>{});
    case GgmlType::Q4_0: return fn(std::integral_constant<GgmlType, GgmlType::Q4_0>{});
    case GgmlType::Q4_1: return fn(std::integral_constant<GgmlType, GgmlType::Q4_1>{});
    case GgmlType::Q5_0: return fn(std::integral_constant<GgmlType, GgmlType::Q5_0>{});
    case GgmlType::Q5_1: return fn(std::integral_constant<GgmlType, GgmlType::Q5_1>{});
    case GgmlType::Q2_K: return fn(std::integral_constant<GgmlType, GgmlType::Q2_K>{});
    case GgmlType::Q3_K: return fn(std::integral_constant<GgmlType, GgmlType::Q3_K>{});
    case GgmlType::Q4_K: return fn(std::integral_constant<GgmlType, GgmlType::Q4_K>{});
    case GgmlType::Q5_K: return fn(std::integral_constant<GgmlType, GgmlType::Q5_K>{});
    case GgmlType::Q6_K: return fn(std::integral_constant<GgmlType, GgmlType::Q6_K>{});
    case GgmlType::IQ4_NL: return fn(std::integral_constant<GgmlType, GgmlType::IQ4_NL>{});
    case GgmlType::IQ4_XS: return fn(std::integral_constant<GgmlType, GgmlType::IQ4_XS>{});
  }
}

// out[t] = W row . x_t for NT tokens
template <class Arch, int NT>
void matvec_row(GgmlType type, const std::uint8_t* w, std::size_t cols, const float* const* xf,
                const void* const* xv, float* out) {
  with_type<Arch>(type, [&](auto T) { row_of_type<Arch, NT, T.value>(w, cols, xf, xv, out); });
}

// True where the AVX-512 VNNI decode rows (row_b32_zmm, row_k45_zmm,
// row_q6_k_zmm, row_iq4_xs_zmm) replace the 256-bit ones.
template <class Arch>
constexpr bool uses_zmm_rows() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
  return std::is_same_v<Arch, xsimd::avx512bw>;
#else
  return false;
#endif
}

// One token: rows [r0, r1) straight through with the row kernel of `type`,
// dispatched once per call rather than per row. Decode streams every weight
// through this loop, and the general path's per-row switch, call and tile
// bookkeeping slow it down (docs/performance-log.md, "Figures moved out of
// code comments").
// pairs: the ActPairs of act where uses_zmm_rows and has_b32_zmm_row.
template <class Arch>
void rows_1(GgmlType type, const std::uint8_t* w, std::size_t rb, std::size_t r0, std::size_t r1, std::size_t cols,
            const float* x, const void* act, const ActPairs* pairs, float* y) {
  const float* xf[1] = {x};
  const void* xv[1] = {act};
  with_type<Arch>(type, [&](auto T) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
    if constexpr (uses_zmm_rows<Arch>() && (T.value == GgmlType::Q4_K || T.value == GgmlType::Q5_K)) {
      using Block = std::conditional_t<T.value == GgmlType::Q4_K, BlockQ4_K, BlockQ5_K>;
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_k45_zmm<Block, T.value == GgmlType::Q5_K>(reinterpret_cast<const Block*>(w + r * rb), cols / 256,
                                                             static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && T.value == GgmlType::Q6_K) {
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_q6_k_zmm(reinterpret_cast<const BlockQ6_K*>(w + r * rb), cols / 256, static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && T.value == GgmlType::IQ4_XS) {
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_iq4_xs_zmm(reinterpret_cast<const BlockIQ4_XS*>(w + r * rb), cols / 256,
                              static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && has_b32_zmm_row(T.value)) {
      const auto* xq = static_cast<const ActQ8*>(act);
      const std::size_t nb = cols / 32;
      using B = Block32<T.value>;
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_b32_zmm<typename B::Block, B::kFive, B::kHasMin, B::kIq4>(
            reinterpret_cast<const typename B::Block*>(w + r * rb), nb, xq, *pairs);
      return;
    }
#endif
    for (std::size_t r = r0; r < r1; ++r) row_of_type<Arch, 1, T.value>(w + r * rb, cols, xf, xv, y + r);
  });
}

// ------------------------------------------------- Q8_0 GEMM, packed panels
// For chunks of many tokens the row kernels above spend more on scaling and
// reducing than on multiplying (per 32-element group and token: one 32-byte
// dot, a conversion, a broadcast scale and an FMA). Here each tile of TR
// rows is repacked once per call, a column chunk at a time, its rows
// interleaved 4 bytes at a time so that one int32 lane holds one row: a
// register of V rows takes 8 full-width dot steps per 32-element group and
// token, then one conversion and one FMA by the rows' scales times the
// token's. Same quantized activations (ActQ8) as the row kernels, so the two
// agree up to f32 summation order.
//
// Packed tile, per group g of 32 columns (pack_group_bytes(T) * TR bytes):
//   float d[kS][TR]        the rows' scales of the group, or of its two
//                          16-element halves (0 past the last row)
//   float o[kO][TR]        the rows' offsets (none, per group or per half),
//                          W = d * q + o
//   byte  q[8][TR][4]      q[k][r][j] = the integer of W[r, 32g + 4k + j], XOR
//                          kFlip (the ISA's encoding)
// Besides Q8_0, every type whose 32-element groups are integers in
// [-127, 127] times one scale plus one offset packs this way (Q4_0, Q4_1,
// Q5_0, Q5_1, IQ4_NL, and Q4_K, Q5_K, IQ4_XS with their sub-block scales
// and mins folded in). Of the types with 16-element sub-blocks, Q2_K and
// Q3_K fold their small sub-block scales into the integers too (Q2_K keeps
// an offset per half); Q6_K's 8-bit scales times its 6-bit integers do not
// fit a byte, so it keeps a scale per half: group_ints below.
template <class Arch>
struct Q8Dot;

#if defined(__AVX512F__)
// u8 weights (q + 128) against s8 activations (vpdpbusd); the offset comes
// back out through the accumulator's start, -128 * sum(x of the group).
template <>
struct Q8Dot<xsimd::avx512bw> {
  static constexpr int V = 16, MR = 2, NT = 6;  // 32 rows x 6 tokens: 12 + 12 accumulators
  static constexpr bool kOffset = true;
  using I = __m512i;
  using Wv = __m512i;
  static constexpr std::uint32_t kFlip = 0x80808080u;  // q + 128 per byte, as u8
  static Wv load_w(const std::uint8_t* p) { return _mm512_load_si512(p); }
  static I start(std::int32_t c) { return _mm512_set1_epi32(c); }
  static I dot(I acc, const Wv& w, std::int32_t x4) { return _mm512_dpbusd_epi32(acc, w, _mm512_set1_epi32(x4)); }
  static __m512 to_f(I a) { return _mm512_cvtepi32_ps(a); }
};
#endif

#if defined(__AVX2__)
// s8 weights; |w| against x with w's sign (maddubs pairs stay below 2^15:
// x is never -128), pairs summed by madd.
template <>
struct Q8Dot<xsimd::fma3<xsimd::avx2>> {
  static constexpr int V = 8, MR = 2, NT = 2;  // 16 rows x 2 tokens
  static constexpr bool kOffset = false;
  using I = __m256i;
  struct Wv {
    __m256i s, u;
  };
  static constexpr std::uint32_t kFlip = 0;  // bytes as they are
  static Wv load_w(const std::uint8_t* p) {
    const __m256i s = _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
    return {s, _mm256_abs_epi8(s)};
  }
  static I start(std::int32_t) { return _mm256_setzero_si256(); }
  static I dot(I acc, const Wv& w, std::int32_t x4) {
    const __m256i xs = _mm256_sign_epi8(_mm256_set1_epi32(x4), w.s);
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w.u, xs), _mm256_set1_epi16(1)));
  }
  static __m256 to_f(I a) { return _mm256_cvtepi32_ps(a); }
};
#endif

#if defined(__aarch64__)
// s8 x s8 (sdot).
template <>
struct Q8Dot<xsimd::neon64> {
  static constexpr int V = 4, MR = 4, NT = 2;  // 16 rows x 2 tokens
  static constexpr bool kOffset = false;
  using I = int32x4_t;
  using Wv = int8x16_t;
  static constexpr std::uint32_t kFlip = 0;  // bytes as they are
  static Wv load_w(const std::uint8_t* p) { return vreinterpretq_s8_u8(vld1q_u8(p)); }
  static I start(std::int32_t) { return vdupq_n_s32(0); }
  static I dot(I acc, const Wv& w, std::int32_t x4) { return sdot_s32(acc, w, vreinterpretq_s8_s32(vdupq_n_s32(x4))); }
  static float32x4_t to_f(I a) { return vcvtq_f32_s32(a); }
};
#endif

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// The types q8_gemm packs; per 32-element group and row, how many scales
// (2: one per 16-element sub-block) and offsets (1 per group, 2 per
// sub-block) their packing carries besides the integers.
constexpr bool has_packed_gemm(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 ||
         t == GgmlType::Q5_1 || t == GgmlType::IQ4_NL || t == GgmlType::Q4_K || t == GgmlType::Q5_K ||
         t == GgmlType::IQ4_XS || t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::Q6_K;
}
constexpr int packed_scales(GgmlType t) { return t == GgmlType::Q6_K ? 2 : 1; }
constexpr int packed_offsets(GgmlType t) {
  return t == GgmlType::Q2_K                                                                        ? 2
         : t == GgmlType::Q4_1 || t == GgmlType::Q5_1 || t == GgmlType::Q4_K || t == GgmlType::Q5_K ? 1
                                                                                                    : 0;
}
// Bytes per row of a packed group: kS scales and kO offsets (floats), 32 integers.
constexpr std::size_t pack_group_bytes(int scales, int offsets) {
  return 32 + 4 * static_cast<std::size_t>(scales + offsets);
}
constexpr std::size_t pack_group_bytes(GgmlType t) { return pack_group_bytes(packed_scales(t), packed_offsets(t)); }

}  // namespace

// Group g (32 elements) of a row of type T: W[i] = d[h] * q[i] + o[h] for
// i in sub-block h (16 elements each; one d and o for the group unless
// packed_scales / packed_offsets say 2), q in [-127, 127] (Q3_K: -128 too,
// which every ISA's encoding takes: AVX-512's +128, AVX2's abs as unsigned
// and sign moved to x, sdot), with the row
// kernels' decoding primitives (not byte-wise scalar code: its byte stores
// cannot forward to the word loads that interleave the rows, so the packing
// would cost more than the products; docs/performance-log.md, "Figures
// moved out of code comments").
template <class Arch, GgmlType T>
inline void group_ints(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  o[0] = o[1] = 0.f;
  if constexpr (T == GgmlType::Q8_0) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[g];
    d[0] = h2f(ld_u16(&b.d));
    std::memcpy(q, b.qs, 32);
  } else if constexpr (has_b32_zmm_row(T)) {
    using B = Block32<T>;
    const auto& b = reinterpret_cast<const typename B::Block*>(row)[g];
    d[0] = h2f(ld_u16(&b.d));
    if constexpr (B::kHasMin) o[0] = h2f(ld_u16(&b.m));
    I8x32 v = nib16(b.qs);
    if constexpr (B::kFive) {
      std::uint32_t qh;
      std::memcpy(&qh, b.qh, 4);  // little-endian targets only, as row_q32
      v = or8(v, bits32_x10(qh));
    }
    if constexpr (B::kIq4) v = iq4nl_lookup(v);
    else if constexpr (!B::kHasMin) v = sub8(v, splat8(B::kFive ? 16 : 8));  // Q4_0's -8, Q5_0's -16
    st32(v, q);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    using B = std::conditional_t<T == GgmlType::Q4_K, BlockQ4_K, BlockQ5_K>;
    const auto& b = reinterpret_cast<const B*>(row)[g / 8];
    const int j = static_cast<int>(g % 8);  // sub-block: low (even j) or high nibbles of qs[32 (j / 2), +32)
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(b.scales, sc, mn);
    d[0] = h2f(ld_u16(&b.d)) * sc[j];
    o[0] = -h2f(ld_u16(&b.dmin)) * mn[j];
    const I8x32 v = ld32(b.qs + 32 * (j / 2));
    I8x32 r = (j & 1) ? hi_nib(v) : lo_nib(v);
    if constexpr (T == GgmlType::Q5_K) {
      const I8x32 h = ld32(b.qh);
      switch (j) {
        case 0: r = or8(r, bitplane_x10<0>(h)); break;
        case 1: r = or8(r, bitplane_x10<1>(h)); break;
        case 2: r = or8(r, bitplane_x10<2>(h)); break;
        case 3: r = or8(r, bitplane_x10<3>(h)); break;
        case 4: r = or8(r, bitplane_x10<4>(h)); break;
        case 5: r = or8(r, bitplane_x10<5>(h)); break;
        case 6: r = or8(r, bitplane_x10<6>(h)); break;
        default: r = or8(r, bitplane_x10<7>(h)); break;
      }
    }
    st32(r, q);
  } else if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K) {
    // Group g = 4 n + j: bits 2j, 2j+1 of qs[32 n + l] (l < 32), sub-block
    // scales 2g and 2g + 1; Q3_K's third bit is bit g of hmask[l].
    using B = std::conditional_t<T == GgmlType::Q2_K, BlockQ2_K, BlockQ3_K>;
    const auto& b = reinterpret_cast<const B*>(row)[g / 8];
    const int gi = static_cast<int>(g % 8);
    const I8x32 v = ld32(b.qs + 32 * (gi / 4));
    I8x32 r;
    switch (gi % 4) {
      case 0: r = crumb<0>(v); break;
      case 1: r = crumb<2>(v); break;
      case 2: r = crumb<4>(v); break;
      default: r = crumb<6>(v); break;
    }
    const float dd = h2f(ld_u16(&b.d));
    if constexpr (T == GgmlType::Q2_K) {  // q (0..3) times the 4-bit scale: 0..45
      const float dm = h2f(ld_u16(&b.dmin));
      const std::uint8_t s0 = b.scales[2 * gi], s1 = b.scales[2 * gi + 1];
      r = mul8_halves(r, s0 & 15, s1 & 15);
      d[0] = dd;
      o[0] = -dm * static_cast<float>(s0 >> 4);
      o[1] = -dm * static_cast<float>(s1 >> 4);
    } else {
      const I8x32 hm = ld32(b.hmask);
      switch (gi) {
        case 0: r = or8(r, bit_x04<0>(hm)); break;
        case 1: r = or8(r, bit_x04<1>(hm)); break;
        case 2: r = or8(r, bit_x04<2>(hm)); break;
        case 3: r = or8(r, bit_x04<3>(hm)); break;
        case 4: r = or8(r, bit_x04<4>(hm)); break;
        case 5: r = or8(r, bit_x04<5>(hm)); break;
        case 6: r = or8(r, bit_x04<6>(hm)); break;
        default: r = or8(r, bit_x04<7>(hm)); break;
      }
      // q (-4..3) times minus the scale (-31..32): -128..124, so W = -d *
      // that (the scale itself, -32..31, could make +128)
      int msc[2];
      for (int h = 0; h < 2; ++h) {  // scale k: low 4 bits in scales[k % 8], top 2 at bit 2 (k / 4) of scales[8 + k % 4]
        const int k = 2 * gi + h;
        const int lo = (b.scales[k % 8] >> (k < 8 ? 0 : 4)) & 15, hi = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
        msc[h] = 32 - (lo | hi << 4);
      }
      r = mul8_halves(sub8(r, splat8(4)), msc[0], msc[1]);
      d[0] = -dd;
    }
    st32(r, q);
  } else if constexpr (T == GgmlType::Q6_K) {
    // Group g = 4 n + j: the low nibbles (j < 2) or high ones of ql[64 n +
    // 32 (j % 2) + l], bits 2j, 2j+1 of qh[32 n + l]; scales 2g, 2g + 1.
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[g / 8];
    const int gi = static_cast<int>(g % 8), n = gi / 4, j = gi % 4;
    const I8x32 l = ld32(b.ql + 64 * n + 32 * (j % 2)), h = ld32(b.qh + 32 * n);
    I8x32 r = j < 2 ? lo_nib(l) : hi_nib(l);
    switch (j) {
      case 0: r = or8(r, q6_hi<0>(h)); break;
      case 1: r = or8(r, q6_hi<1>(h)); break;
      case 2: r = or8(r, q6_hi<2>(h)); break;
      default: r = or8(r, q6_hi<3>(h)); break;
    }
    st32(sub8(r, splat8(32)), q);
    const float dd = h2f(ld_u16(&b.d));
    d[0] = dd * static_cast<float>(b.scales[2 * gi]);
    d[1] = dd * static_cast<float>(b.scales[2 * gi + 1]);
  } else {
    static_assert(T == GgmlType::IQ4_XS);
    const auto& b = reinterpret_cast<const BlockIQ4_XS*>(row)[g / 8];
    const int j = static_cast<int>(g % 8);
    d[0] = h2f(ld_u16(&b.d)) * static_cast<float>(iq4_xs_scale(b, j));
    st32(iq4nl_lookup(nib16(b.qs + 16 * j)), q);
  }
}

// Packs rows [0, nr) of a tile (nr <= TR; the rest zero weights, zero
// scales) over groups [g0, g0 + ng) into dst (pack_group_bytes(T) * TR * ng
// bytes).
template <class Arch, GgmlType T>
void q8_pack_tile(const std::uint8_t* w, std::size_t rb, std::size_t nr, std::size_t g0, std::size_t ng,
                  std::uint8_t* dst) {
  using D = Q8Dot<Arch>;
  constexpr int TR = D::V * D::MR;
  constexpr int kS = packed_scales(T), kO = packed_offsets(T);
  constexpr std::size_t kGB = pack_group_bytes(T) * TR;
  for (std::size_t g = 0; g < ng; ++g) {
    std::uint8_t* blk = dst + g * kGB;
    float* d = reinterpret_cast<float*>(blk);  // (kS, TR)
    float* o = d + kS * TR;                    // (kO, TR)
    std::uint8_t* q = blk + 4 * (kS + kO) * TR;
    // 8 rows at a time: their groups' integers as (rows, 8) words,
    // transposed in registers (one word per row and step k), kFlip encodes:
    // word by word through scalar registers takes far more instructions
    // (docs/performance-log.md, "Figures moved out of code comments").
    const I8x32 flip = splat8(static_cast<std::int8_t>(D::kFlip & 0xff));
    for (int r0 = 0; r0 < TR; r0 += 8) {
      alignas(32) std::int8_t qi[8][32];
      I8x32 v[8];
      for (int i = 0; i < 8; ++i) {
        const int r = r0 + i;
        if (static_cast<std::size_t>(r) < nr) {
          float dr[2], orr[2];
          group_ints<Arch, T>(w + r * rb, g0 + g, qi[i], dr, orr);
          for (int h = 0; h < kS; ++h) d[h * TR + r] = dr[h];
          for (int h = 0; h < kO; ++h) o[h * TR + r] = orr[h];
          v[i] = ld32(qi[i]);
        } else {
          for (int h = 0; h < kS; ++h) d[h * TR + r] = 0.f;
          for (int h = 0; h < kO; ++h) o[h * TR + r] = 0.f;
          v[i] = splat8(0);
        }
      }
      transpose8_words(v);
      for (int k = 0; k < 8; ++k) st32(xor8(v[k], flip), q + (k * TR + r0) * 4);
    }
  }
}

// y[t] (the tile's outputs; only the first nr written) for tokens t < N over
// ng packed groups of a type with kS scales and kO offsets per group: =
// (first) or += the products. xq[t], xs[t]: token t's ActQ8 groups and
// their integer sums per 16, from the packed range's first.
// With two scales a group is two 16-element halves, each 4 dot steps then
// its own conversion and FMA (the sub-block scales differ per row, so they
// cannot fold into the activations' scale).
template <class Arch, int N, int kS, int kO>
void q8_tile_tokens(const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                    float* const* y, int nr, bool first) {
  using D = Q8Dot<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int V = D::V, MR = D::MR, TR = V * MR;
  constexpr std::size_t kGB = pack_group_bytes(kS, kO) * TR;
  static_assert(F::size == V);
  F acc[MR][N];  // (rows of the tile / V, tokens)
  alignas(64) float tmp[V];
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    for (int t = 0; t < N; ++t) {
      if (first || valid <= 0) {
        acc[m][t] = F(0.f);
      } else if (valid >= V) {
        acc[m][t] = F::load_unaligned(y[t] + m * V);
      } else {
        for (int l = 0; l < V; ++l) tmp[l] = l < valid ? y[t][m * V + l] : 0.f;
        acc[m][t] = F::load_aligned(tmp);
      }
    }
  }
  for (std::size_t g = 0; g < ng; ++g) {
    const std::uint8_t* blk = pk + g * kGB;
    const float* dw = reinterpret_cast<const float*>(blk);  // (kS, TR) scales, then (kO, TR) offsets
    const std::uint8_t* q = blk + 4 * (kS + kO) * TR;
    for (int h = 0; h < kS; ++h) {  // steps [k0, k1) of 4 bytes
      const int k0 = kS == 1 ? 0 : 4 * h, k1 = kS == 1 ? 8 : k0 + 4;
      typename D::I s[MR][N];  // int32 dots of the group (or half)
      for (int t = 0; t < N; ++t) {
        const std::int32_t xsum = kS == 1 ? xs[t][2 * g] + xs[t][2 * g + 1] : xs[t][2 * g + h];
        const typename D::I s0 = D::start(D::kOffset ? -128 * xsum : 0);
        for (int m = 0; m < MR; ++m) s[m][t] = s0;
      }
      for (int k = k0; k < k1; ++k) {
        typename D::Wv wv[MR];
        for (int m = 0; m < MR; ++m) wv[m] = D::load_w(q + (k * TR + m * V) * 4);
        for (int t = 0; t < N; ++t) {
          std::int32_t x4;
          std::memcpy(&x4, xq[t][g].qs + 4 * k, 4);
          for (int m = 0; m < MR; ++m) s[m][t] = D::dot(s[m][t], wv[m], x4);
        }
      }
      for (int m = 0; m < MR; ++m) {
        const F d = F::load_aligned(dw + h * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(F(D::to_f(s[m][t])), d * F(xq[t][g].d), acc[m][t]);
      }
    }
    if constexpr (kO == 1) {  // + o * sum(x of the group)
      for (int m = 0; m < MR; ++m) {
        const F o = F::load_aligned(dw + kS * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(o, F(xq[t][g].s), acc[m][t]);
      }
    } else if constexpr (kO == 2) {  // + o[h] * sum(x of half h)
      for (int h = 0; h < 2; ++h)
        for (int m = 0; m < MR; ++m) {
          const F o = F::load_aligned(dw + (kS + h) * TR + m * V);
          for (int t = 0; t < N; ++t)
            acc[m][t] = xsimd::fma(o, F(xq[t][g].d * static_cast<float>(xs[t][2 * g + h])), acc[m][t]);
        }
    }
  }
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    if (valid <= 0) break;
    for (int t = 0; t < N; ++t) {
      if (valid >= V) {
        acc[m][t].store_unaligned(y[t] + m * V);
      } else {
        acc[m][t].store_aligned(tmp);
        for (int l = 0; l < valid; ++l) y[t][m * V + l] = tmp[l];
      }
    }
  }
}

// q8_tile_tokens for n <= N tokens
template <class Arch, int N, int kS, int kO>
void q8_tile_upto(int n, const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                  float* const* y, int nr, bool first) {
  if constexpr (N > 1) {
    if (n < N) return q8_tile_upto<Arch, N - 1, kS, kO>(n, pk, ng, xq, xs, y, nr, first);
  }
  q8_tile_tokens<Arch, N, kS, kO>(pk, ng, xq, xs, y, nr, first);
}

// Y (n_tokens, ldy) = X W^T for W of a packed type T, the activations
// already quantized (xq: [n_tokens][cols/32] ActQ8; xs: [n_tokens][cols/16]
// their integer sums per 16). Threads take whole tiles; each packs its tile
// a column chunk at a time (kQ8PackGroups groups: 36.9 KB for 32 rows, 41
// KB with one scale and one offset, 45 KB with two and two, on the stack,
// in L1/L2) and runs every token over it before the next chunk.
constexpr std::size_t kQ8PackGroups = 32;

template <class Arch, GgmlType T>
void q8_gemm(const std::uint8_t* w, std::size_t rb, std::size_t rows, std::size_t cols, const ActQ8* xq,
             const std::int32_t* xs, std::size_t n_tokens, float* y, std::size_t ldy, int threads) {
  using D = Q8Dot<Arch>;
  constexpr int TR = D::V * D::MR, NT = D::NT;
  const std::size_t groups = cols / 32;
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>((rows + TR - 1) / TR);
#pragma omp parallel for schedule(static) num_threads(threads) if (threads > 1)
  for (std::ptrdiff_t tile = 0; tile < tiles; ++tile) {
    alignas(64) std::uint8_t pk[kQ8PackGroups * pack_group_bytes(T) * TR];  // one column chunk of the tile, packed
    const std::size_t r0 = static_cast<std::size_t>(tile) * TR;
    const int nr = static_cast<int>(mv_min(TR, rows - r0));
    // After packing a chunk, the next one's rows (TR short runs of a row
    // each, which the hardware prefetchers follow poorly) are prefetched
    // before the products, with prefetcht1 (faster with the weights in DRAM
    // than none or prefetcht0: docs/performance-log.md, "Figures moved out
    // of code comments").
    for (std::size_t g0 = 0; g0 < groups; g0 += kQ8PackGroups) {
      const std::size_t ng = mv_min(kQ8PackGroups, groups - g0);
      q8_pack_tile<Arch, T>(w + r0 * rb, rb, static_cast<std::size_t>(nr), g0, ng, pk);
      {  // the next chunk's rows (this tile's, or the next tile's first)
        const std::size_t gb = rb / groups;  // bytes per group
        std::size_t pr0 = r0, pg = g0 + ng, pn = static_cast<std::size_t>(nr);
        if (pg >= groups) {
          pr0 = r0 + TR;
          pg = 0;
          pn = pr0 < rows ? mv_min(TR, rows - pr0) : 0;
        }
        const std::size_t b0 = pg * gb, b1 = mv_min(groups, pg + kQ8PackGroups) * gb;
        for (std::size_t r = 0; r < pn; ++r) {
          const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(w + (pr0 + r) * rb);
          for (std::uintptr_t l = (a + b0) & ~std::uintptr_t{63}; l < a + b1; l += 64)
            __builtin_prefetch(reinterpret_cast<const void*>(l), 0, 2);
        }
      }
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += NT) {
        const int n = static_cast<int>(mv_min(NT, n_tokens - t0));
        const ActQ8* xa[NT];
        const std::int32_t* xi[NT];
        float* yo[NT];
        for (int k = 0; k < n; ++k) {
          xa[k] = xq + (t0 + k) * groups + g0;
          xi[k] = xs + (t0 + k) * 2 * groups + 2 * g0;
          yo[k] = y + (t0 + k) * ldy + r0;
        }
        q8_tile_upto<Arch, NT, packed_scales(T), packed_offsets(T)>(n, pk, ng, xa, xi, yo, nr, g0 == 0);
      }
    }
  }
}

// From how many tokens matmul takes the packed GEMM rather than the row
// kernels. The repacking decodes each weight group once, where the row
// kernels decode it once per 4 tokens, but it reads a tile's rows a column
// chunk at a time (TR short runs), which streams from DRAM slower than the
// row kernels' whole rows: with few tokens, where both are bound by the
// weights' reads, the row kernels win. The thresholds are the crossovers
// with the weights in DRAM, as in a model (docs/performance-log.md,
// "Figures moved out of code comments"):
// - AVX-512: the block-32 types and Q4_K, Q5_K, Q6_K, IQ4_XS from 8; Q2_K
//   and Q3_K, which fold their scales when packing, from 12.
// - AVX2 (two tokens per pass over a packed tile): the block-32 types from
//   8; Q4_K, Q5_K, Q6_K, IQ4_XS from 16; Q2_K and Q3_K, whose byte multiply
//   is a widen, multiply and pack there, from 32.
// - NEON: 16, not measured on hardware.
template <class Arch>
std::size_t packed_min_tokens(GgmlType t) {
  const bool small_k = t == GgmlType::Q2_K || t == GgmlType::Q3_K;
  const bool k256 = small_k || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ||
                    t == GgmlType::IQ4_XS;
  static_assert(kPackedGemmMinTokens <= 8 && kPackedGemmAllTokens >= 32);
  if constexpr (Q8Dot<Arch>::V == 16) return small_k ? 12 : 8;  // AVX-512 VNNI
  else if constexpr (Q8Dot<Arch>::V == 8) return small_k ? 32 : k256 ? 16 : 8;  // AVX2
  else return 16;
}

template <class Arch>
void matmul_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch, int threads) {
  matvec_check_args(type, cols);
  if (rows == 0 || n_tokens == 0) return;
  const std::size_t rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  const bool quant = !is_float_type(type);
  // (cols 0: the row paths write the zero sums; the packed GEMM has no group
  // to start its outputs from.)
  const bool q8_packed = has_packed_gemm(type) && n_tokens >= packed_min_tokens<Arch>(type) && cols > 0;
  // The packed GEMM takes ActQ8 (one scale per 32) whatever the type.
  const bool kq = ggml_has_super_blocks(type) && !q8_packed;
  // scratch: [n_tokens][cols/32] ActQ8, or [n_tokens][cols/256] ActQ8K for the K-quants
  auto* xb = static_cast<std::uint8_t*>(scratch);
  const std::size_t act_bytes = kq ? cols / 256 * sizeof(ActQ8K) : cols / 32 * sizeof(ActQ8);  // per token
  const int nth = threads > 1 ? threads : 1;
  // Packed: the activations' integer sums (n_tokens, cols/16), after the
  // ActQ8s (matvec_scratch_bytes)
  std::int32_t* xs = q8_packed ? reinterpret_cast<std::int32_t*>(xb + n_tokens * act_bytes) : nullptr;
  if (quant) {
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1 && n_tokens > 1)
    for (std::ptrdiff_t t = 0; t < static_cast<std::ptrdiff_t>(n_tokens); ++t) {
      const float* xt = x + static_cast<std::size_t>(t) * ldx;
      void* dst = xb + static_cast<std::size_t>(t) * act_bytes;
      std::int32_t* sums = q8_packed ? xs + static_cast<std::size_t>(t) * (cols / 16) : nullptr;
      if (kq) matvec_quantize_act_k<Arch>(xt, cols, static_cast<ActQ8K*>(dst));
      else matvec_quantize_act<Arch>(xt, cols, static_cast<ActQ8*>(dst), sums);
    }
  }
  if (q8_packed) {
    with_type<Arch>(type, [&](auto T) {
      if constexpr (has_packed_gemm(T.value))
        q8_gemm<Arch, T.value>(wb, rb, rows, cols, reinterpret_cast<const ActQ8*>(xb), xs, n_tokens, y, ldy, nth);
    });
    return;
  }
  if (n_tokens == 1) {
    // Each thread a contiguous run of 16-row tiles, each row read whole: one
    // sequential stream the prefetchers follow (chunking a single token's
    // rows into 16 interleaved streams reads DRAM far slower:
    // docs/performance-log.md, "Figures moved out of code comments").
    constexpr std::size_t kRows = 16;
    const std::size_t tiles = (rows + kRows - 1) / kRows;
    ActPairs pairs{};
    if (uses_zmm_rows<Arch>() && has_b32_zmm_row(type))  // after the ActQ8s (matvec_scratch_bytes)
      pairs = build_act_pairs(reinterpret_cast<const ActQ8*>(xb), cols / 32, xb + act_bytes,
                              type == GgmlType::Q5_0 || type == GgmlType::Q5_1);
#pragma omp parallel num_threads(nth) if (nth > 1)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num()), nt = static_cast<std::size_t>(omp_get_num_threads());
      const std::size_t r0 = mv_min(rows, tiles * t / nt * kRows), r1 = mv_min(rows, tiles * (t + 1) / nt * kRows);
      rows_1<Arch>(type, wb, rb, r0, r1, cols, x, quant ? xb : nullptr, &pairs, y);
    }
    return;
  }
  // Tiles of rows per thread; within a tile, groups of 4 tokens share every
  // decoded weight group. Columns go in chunks so the 4 tokens' activations
  // stay in L1 while the tile's weights stream from L2 (f32 activations:
  // 4 x 1024 x 4 bytes; int8: 4 x 4096 x ~1.2 bytes).
  constexpr std::size_t kRowTile = 16;
  const std::size_t chunk = mv_min(cols, quant ? 4096 : 1024);  // a multiple of 256
  // Weight bytes per block, so the parallel region calls nothing that throws.
  const std::size_t blk_elems = ggml_block_elems(type), blk_bytes = ggml_row_bytes(type, blk_elems);
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>((rows + kRowTile - 1) / kRowTile);
#pragma omp parallel for schedule(static) num_threads(nth) if (nth > 1)
  for (std::ptrdiff_t tile = 0; tile < tiles; ++tile) {
    const std::size_t r0 = static_cast<std::size_t>(tile) * kRowTile, r1 = mv_min(rows, r0 + kRowTile);
    for (std::size_t t0 = 0; t0 < n_tokens; t0 += 4) {
      const std::size_t n = mv_min(4, n_tokens - t0);
      float sum[kRowTile][4] = {};  // [rows of the tile][tokens of the group]
      for (std::size_t c0 = 0; c0 < cols; c0 += chunk) {
        const std::size_t cl = mv_min(chunk, cols - c0);
        const std::size_t w_off = c0 / blk_elems * blk_bytes;
        const std::size_t a_off = kq ? c0 / 256 * sizeof(ActQ8K) : c0 / 32 * sizeof(ActQ8);
        const float* xf[4];
        const void* xa[4];
        for (std::size_t k = 0; k < n; ++k) {
          xf[k] = x + (t0 + k) * ldx + c0;
          xa[k] = quant ? xb + (t0 + k) * act_bytes + a_off : nullptr;
        }
        for (std::size_t r = r0; r < r1; ++r) {
          float out[4];
          const std::uint8_t* wr = wb + r * rb + w_off;
          switch (n) {
            case 1: matvec_row<Arch, 1>(type, wr, cl, xf, xa, out); break;
            case 2: matvec_row<Arch, 2>(type, wr, cl, xf, xa, out); break;
            case 3: matvec_row<Arch, 3>(type, wr, cl, xf, xa, out); break;
            default: matvec_row<Arch, 4>(type, wr, cl, xf, xa, out); break;
          }
          for (std::size_t k = 0; k < n; ++k) sum[r - r0][k] += out[k];
        }
      }
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t k = 0; k < n; ++k) y[(t0 + k) * ldy + r] = sum[r - r0][k];
    }
  }
}

template <class Arch>
void matvec_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x, float* y,
                 void* scratch, int threads) {
  matmul_body<Arch>(type, w, rows, cols, x, cols, 1, y, rows, scratch, threads);
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
