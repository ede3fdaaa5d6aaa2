// matvec's int8 and float primitives on aarch64 (NEON; sdot as one
// instruction for neon, emulated for asimd: kernels/int8_impl.h): raw
// intrinsics (xsimd has no byte table lookups or dot products), the same
// interface as matvec_int8_x86_impl.h.
#pragma once

#include "kernels/matvec/matvec_common_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// ------------------------------------------------------------ int8 primitives
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
  const int32x4_t d = dot4(dot4(vdupq_n_s32(0), w.a, x.a), w.b, x.b);
  return vfmaq_n_f32(acc, vcvtq_f32_s32(d), s);
}
inline Acc fma_dot_u(Acc acc, I8x32 u, I8x32 x, float s) { return fma_dot_s(acc, u, x, s); }
inline Acc fma_dot2_s(Acc acc, I8x32 w, I8x32 x, float s0, float s1) {
  acc = vfmaq_n_f32(acc, vcvtq_f32_s32(dot4(vdupq_n_s32(0), w.a, x.a)), s0);
  return vfmaq_n_f32(acc, vcvtq_f32_s32(dot4(vdupq_n_s32(0), w.b, x.b)), s1);
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
  return {vmlaq_n_s32(acc.a, dot4(vdupq_n_s32(0), w.a, x.a), sc.lo),
          vmlaq_n_s32(acc.b, dot4(vdupq_n_s32(0), w.b, x.b), sc.hi)};
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

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
