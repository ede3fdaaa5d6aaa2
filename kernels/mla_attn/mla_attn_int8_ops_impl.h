// mla_attn's own int8 layouts, per ISA, over the int8 operation layer
// (kernels/int8/int8_ops_impl.h): I8<Arch> (the cache's byte transposes,
// the weights' packing for the value pass, the offset policy; its loads,
// splats, dot products and lane shuffles are the layer's) and the int8
// softmax's exponential (exp2_i8, over add_exponent, xsimd float batches).
// What is left in intrinsics here is this family's layout alone (lanesum4,
// quant_pvec, bcast4f, quant_store). Like every body header: Arch-templated or in an anonymous
// namespace.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/int8/int8_ops_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// The attention's own int8 layouts over the shared operations
// (kernels/int8/int8_ops_impl.h): the cache's 4x4 byte transposes, the weights'
// packing for the value pass and the offset policy are this family's alone.
// vec: 16*L cache bytes (L lanes of one 16-byte block each); acc: int32 lanes.
// dot(acc, a, b): acc += sum over 4 adjacent bytes of a (cache) * b (s8).
// On x86 a is the stored u8 (q + 128), so results carry +128 * sum(b)
// (kOffset); on NEON the load removes the offset and sdot is signed.
// The value pass loads with load_v and multiplies with dot_v, whose results
// carry that offset only where kValueOffset says so (AVX2: see there).
// int4 caches: nib(load_raw(p), hi) gives the stored nibbles (q + 8) as bytes
// on every ISA, for dot (scores) and dot_v (values) alike, so their
// results carry +8 * sum(b) everywhere (quant/latent_formats.h: int4).
template <class Arch>
struct I8;

#if defined(__AVX512F__)
template <>
struct I8<xsimd::avx512bw> {
  using vec = __m512i;
  using acc = __m512i;
  static constexpr int L = 4;
  static constexpr bool kOffset = true;
  static constexpr int QMAX = 127, PMAX = 127;
  static constexpr bool kValueOffset = kOffset;
  static acc zero() { return _mm512_setzero_si512(); }
  static vec load(const void* p) { return ld64(p); }
  static vec nib(vec x, bool hi) { return hi ? hi_nib(x) : lo_nib(x); }
  static vec load_raw(const void* p) { return ld64(p); }
  using F = xsimd::batch<float, xsimd::avx512bw>;
  static F i2f(const std::int32_t* p) { return F(cvt_i32_f32(ld64(p))); }
  static F acc2f(acc x) { return F(cvt_i32_f32(x)); }
  // 4 floats in every 16-byte lane: channel d's value in the acc lanes of
  // channel d (lane j holds channel j % 4, tokens of block j / 4).
  static F bcast4f(const float* p) { return F(_mm512_broadcast_f32x4(_mm_loadu_ps(p))); }
  // y (W values within int8's range) rounded to nearest even, stored as W
  // bytes at dst; returns them as int32 lanes (an int4 tile's query).
  static acc quant_store(F y, std::int8_t* dst) {
    const __m512i v = _mm512_cvtps_epi32(y);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtepi32_epi8(v));
    return v;
  }
  static acc add(acc a, acc b) { return _mm512_add_epi32(a, b); }
  static vec bcast(const void* p) { return bcast4_x64(p); }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  // The value pass: cache vectors as loaded, weights as the s8 operand.
  static vec load_v(const void* p) { return load(p); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, x, w); }
  // 4 channels x 4 tokens -> 4 tokens x 4 channels in every 16-byte lane.
  static vec tshuf(vec x) { return tbl16_lanes<0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15>(x); }
  static void store(acc x, std::int32_t* p) { st_i32(x, p); }
  // a0..a3 -> out[16]: out[4i + d] = sum over lanes of ai dword d.
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    __m512i s01 = _mm512_add_epi32(_mm512_shuffle_i32x4(a0, a1, 0x44), _mm512_shuffle_i32x4(a0, a1, 0xEE));
    __m512i s23 = _mm512_add_epi32(_mm512_shuffle_i32x4(a2, a3, 0x44), _mm512_shuffle_i32x4(a2, a3, 0xEE));
    __m512i r = _mm512_add_epi32(_mm512_shuffle_i32x4(s01, s23, 0x88), _mm512_shuffle_i32x4(s01, s23, 0xDD));
    _mm512_storeu_si512(out, r);
  }
  // Rounds x (4L weights in [0, PMAX]) to integers, adds them to qsum and
  // stores them as value-pass operands: 16-byte lane i holds the bytes of
  // tokens 4i..4i+3, repeated for the 4 channels of a cache lane (16L bytes).
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const __m512i q = _mm512_cvtps_epi32(x);
    qsum = _mm512_add_epi32(qsum, q);
    const __m512i idx = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    _mm512_storeu_si512(dst, _mm512_permutexvar_epi32(idx, _mm512_zextsi128_si512(_mm512_cvtepi32_epi8(q))));
  }
};
#endif

#if defined(__AVX2__)
template <>
struct I8<xsimd::fma3<xsimd::avx2>> {
  using vec = __m256i;
  using acc = __m256i;
  static constexpr int L = 2;
  static constexpr bool kOffset = true;
  // vpmaddubsw saturates at 16 bits. Scores: u8 cache bytes (q + 128) times
  // the s8 query, 2 * 255 * 64 < 32768. Values: the weights (<= 127) are
  // the unsigned operand and the cache bytes, flipped back to signed, the
  // signed one: 2 * 127 * 128 < 32768, so the weights keep 8 bits and the
  // value products carry no offset (7-bit weights lose accuracy against the
  // f32 cache; 8-bit ones cost a little time). The query keeps 7 bits:
  // giving it 8 the same way (the cache byte's magnitude unsigned, the query
  // signed by it) costs a vpsignb per product, too slow for what it gains
  // (docs/performance-log.md, "Figures moved out of code comments").
  static constexpr int QMAX = 64, PMAX = 127;
  static constexpr bool kValueOffset = false;
  static acc zero() { return i32_zero(); }
  static vec load(const void* p) { return ld32(p); }
  static vec nib(vec x, bool hi) { return hi ? hi_nib(x) : lo_nib(x); }
  static vec load_raw(const void* p) { return ld32(p); }
  using F = xsimd::batch<float, xsimd::fma3<xsimd::avx2>>;
  static F i2f(const std::int32_t* p) { return F(cvt_i32_f32(ld32(p))); }
  static F acc2f(acc x) { return F(cvt_i32_f32(x)); }
  static F bcast4f(const float* p) { return F(_mm256_broadcast_ps(reinterpret_cast<const __m128*>(p))); }
  static acc quant_store(F y, std::int8_t* dst) {
    const __m256i v = _mm256_cvtps_epi32(y);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst), _mm_packs_epi16(w, w));
    return v;
  }
  static acc add(acc a, acc b) { return _mm256_add_epi32(a, b); }
  static vec bcast(const void* p) { return bcast4_x32(p); }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  static vec load_v(const void* p) { return xor8(load(p), splat8(0x80)); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, w, x); }
  static vec tshuf(vec x) { return tbl16_lanes<0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15>(x); }
  static void store(acc x, std::int32_t* p) { st_i32(x, p); }
  static __m128i fold(acc x) { return _mm_add_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1)); }
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out), fold(a0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4), fold(a1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8), fold(a2));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 12), fold(a3));
  }
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const __m256i q = _mm256_cvtps_epi32(x);
    qsum = _mm256_add_epi32(qsum, q);
    const __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1));
    const __m128i b = _mm_packus_epi16(w, w);  // 8 bytes, twice
    const __m256i idx = _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst), _mm256_permutevar8x32_epi32(_mm256_castsi128_si256(b), idx));
  }
};
#endif

#if defined(__ARM_NEON) && defined(__aarch64__)
template <>
struct I8<xsimd::neon64> {
  using vec = int8x16_t;
  using acc = int32x4_t;
  static constexpr int L = 1;
  static constexpr bool kOffset = false;
  static constexpr int QMAX = 127, PMAX = 127;
  static constexpr bool kValueOffset = kOffset;
  static acc zero() { return vdupq_n_s32(0); }
  static vec load(const void* p) {
    return vreinterpretq_s8_u8(veorq_u8(vld1q_u8(static_cast<const std::uint8_t*>(p)), vdupq_n_u8(0x80)));
  }
  static vec load_raw(const void* p) { return ld16(p); }
  static vec nib(vec x, bool hi) { return hi ? hi_nib(x) : lo_nib(x); }
  using F = xsimd::batch<float, xsimd::neon64>;
  static F i2f(const std::int32_t* p) { return F(cvt_i32_f32(vld1q_s32(p))); }
  static F acc2f(acc x) { return F(cvt_i32_f32(x)); }
  static F bcast4f(const float* p) { return F(vld1q_f32(p)); }
  static acc quant_store(F y, std::int8_t* dst) {
    const int32x4_t v = vcvtnq_s32_f32(y);
    const int16x4_t h = vmovn_s32(v);
    const std::int32_t b = vget_lane_s32(vreinterpret_s32_s8(vmovn_s16(vcombine_s16(h, h))), 0);
    std::memcpy(dst, &b, 4);
    return v;
  }
  static acc add(acc a, acc b) { return vaddq_s32(a, b); }
  static vec bcast(const void* p) { return bcast4_x16(p); }
  static acc dot(acc s, vec a, vec b) { return dot4(s, a, b); }
  static vec load_v(const void* p) { return load(p); }
  static acc dot_v(acc s, vec x, vec w) { return dot(s, x, w); }
  static vec tshuf(vec x) { return tbl16_lanes<0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15>(x); }
  static void store(acc x, std::int32_t* p) { st_i32(x, p); }
  static void lanesum4(acc a0, acc a1, acc a2, acc a3, std::int32_t* out) {
    vst1q_s32(out, a0);
    vst1q_s32(out + 4, a1);
    vst1q_s32(out + 8, a2);
    vst1q_s32(out + 12, a3);
  }
  static void quant_pvec(F x, acc& qsum, std::uint8_t* dst) {
    const int32x4_t q = vcvtnq_s32_f32(x);
    qsum = vaddq_s32(qsum, q);
    const int16x4_t h = vmovn_s32(q);
    const int8x8_t b = vmovn_s16(vcombine_s16(h, h));  // 4 bytes, twice
    vst1q_s8(static_cast<std::int8_t*>(static_cast<void*>(dst)),
             vreinterpretq_s8_s32(vdupq_lane_s32(vreinterpret_s32_s8(b), 0)));
  }
};
#endif

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// p * 2^n for the n in r's low mantissa bits, added to p's exponent field as
// an integer (exp2_i8). Intrinsics: xsimd's integer batches would leave weak
// symbols on NEON (kernels/exp_f32_impl.h, pow2i).
#if defined(__AVX512F__)
inline __m512 add_exponent(__m512 p, __m512 r) {
  return _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), _mm512_slli_epi32(_mm512_castps_si512(r), 23)));
}
#endif
#if defined(__AVX2__)
inline __m256 add_exponent(__m256 p, __m256 r) {
  return _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), _mm256_slli_epi32(_mm256_castps_si256(r), 23)));
}
#endif
#if defined(__aarch64__)
inline float32x4_t add_exponent(float32x4_t p, float32x4_t r) {
  return vreinterpretq_f32_s32(vaddq_s32(vreinterpretq_s32_f32(p), vshlq_n_s32(vreinterpretq_s32_f32(r), 23)));
}
#endif

}  // namespace

// 2^t for the int8 path's softmax, t in log2 units and <= 0: not the
// float path's exponential (kernels/exp_f32_impl.h), a coarser one for a
// different budget. t is clamped
// at -64: weights below 2^-64 of the maximum vanish in every float sum
// anyway, and the clamp keeps weight * latent scale and the quantization's
// 127 / max weight normal (denormal operands cost microcode assists; an
// overflowing reciprocal would make the weights garbage). 2^f on |f| <= 1/2
// by a degree-3 minimax polynomial (relative error 7.5e-5, 50x below the
// weights' 8-bit quantization step); n = round(t) by the 1.5 * 2^23 shift,
// which leaves n in the low mantissa bits, added to the result's exponent
// field as an integer (the result stays normal: 2^-65 at least). Only the
// 3 FMAs use the multiply pipes, which the dot products need (a degree-5
// polynomial with roundscale/scalef would use 7).
template <class Arch>
xsimd::batch<float, Arch> exp2_i8(xsimd::batch<float, Arch> t) {
  using F = xsimd::batch<float, Arch>;
  const F kShift(12582912.f);  // 1.5 * 2^23
  t = xsimd::max(t, F(-64.f));
  const F r = t + kShift;
  const F f = t - (r - kShift);
  F p = F(5.51716691e-2f);
  p = xsimd::fma(p, f, F(2.42611122e-1f));
  p = xsimd::fma(p, f, F(6.93260985e-1f));
  p = xsimd::fma(p, f, F(9.99928074e-1f));
  using R = typename F::register_type;
  return F(add_exponent(static_cast<R>(p), static_cast<R>(r)));
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
