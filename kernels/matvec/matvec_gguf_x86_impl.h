// The GGUF decoders' parts that differ per ISA, on x86: the Q5_0/Q5_1
// fifth bits and the K-quants' sub-block scales and mins in registers, over
// the int8 operation layer (kernels/int8/int8_ops_impl.h). The decoders,
// Gguf<T>, are in matvec_gguf_impl.h. x86 spells them on 256-bit vectors
// (one 32-weight group a ymm).
#pragma once

#include "kernels/matvec/matvec_common_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

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
inline void q3k_scale_bytes(const std::uint8_t* s12, std::int8_t* out) {
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), q3k_scales(s12).v);
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

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
