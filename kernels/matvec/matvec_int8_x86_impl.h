// matvec's int8 and float primitives on x86 (AVX2, with AVX-512 VL/BW/VNNI
// forms where the TU's flags have them): raw intrinsics over 256-bit vectors
// (one 32-weight group a ymm on both ISAs), since the byte shuffles, nibble
// and bit-plane decoders and u8 x s8 dot products they need have no xsimd
// form. The GGML formats' decoders are matvec's own; the four-byte dot
// product is kernels/int8_impl.h's dot4. madd_sc_u is not: it multiplies
// the int16 pair sums by sub-block scales (vpmaddwd), a different op.
#pragma once

#include "kernels/matvec/matvec_common_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// ------------------------------------------------------------ int8 primitives
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
// 128 from abs(-128); x signed, never -128: no int16 saturation)
inline __m256i dot_lanes_u8s8(I8x32 u, I8x32 x) { return dot4(_mm256_setzero_si256(), u, x); }
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

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
