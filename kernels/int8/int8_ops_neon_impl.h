// The int8 operation layer on aarch64 (kernels/int8/int8_ops_impl.h says
// what it owns and why intrinsics): NEON, with sdot as one instruction for
// the neon ISA and emulated for asimd. A 32-byte group is two q registers.
#pragma once

#include "kernels/isa_body_impl.h"

#include <cstdint>
#include <cstring>

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

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

struct I8x32 {
  int8x16_t a, b;
};
struct I32 {
  int32x4_t a, b;  // bytes 0-15, bytes 16-31
};
using Acc = float32x4_t;

inline float hsum(Acc a) { return vaddvq_f32(a); }
inline float h2f(std::uint16_t v) {
  __fp16 f;
  std::memcpy(&f, &v, 2);
  return static_cast<float>(f);
}
inline std::uint16_t ld_u16(const void* p) { std::uint16_t v; std::memcpy(&v, p, 2); return v; }
inline int8x16_t ld16(const void* p) { return vld1q_s8(static_cast<const std::int8_t*>(p)); }
inline I8x32 ld32(const void* p) {
  const auto* q = static_cast<const std::int8_t*>(p);
  return {vld1q_s8(q), vld1q_s8(q + 16)};
}
inline void st32(I8x32 v, void* p) {
  auto* q = static_cast<std::int8_t*>(p);
  vst1q_s8(q, v.a);
  vst1q_s8(q + 16, v.b);
}
inline void st_i32(int32x4_t v, std::int32_t* p) { vst1q_s32(p, v); }
inline I32 i32_zero() { return {vdupq_n_s32(0), vdupq_n_s32(0)}; }
// the 4 bytes at p in every int32 lane
inline int8x16_t bcast4_x16(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return vreinterpretq_s8_s32(vdupq_n_s32(v));
}
inline Acc acc_zero() { return vdupq_n_f32(0.f); }
inline float32x4_t cvt_i32_f32(int32x4_t v) { return vcvtq_f32_s32(v); }

inline int8x16_t s8(uint8x16_t v) { return vreinterpretq_s8_u8(v); }
inline uint8x16_t u8(int8x16_t v) { return vreinterpretq_u8_s8(v); }
inline I8x32 splat8(int v) { return {vdupq_n_s8(static_cast<std::int8_t>(v)), vdupq_n_s8(static_cast<std::int8_t>(v))}; }
inline I8x32 or8(I8x32 x, I8x32 y) { return {vorrq_s8(x.a, y.a), vorrq_s8(x.b, y.b)}; }
inline I8x32 sub8(I8x32 x, I8x32 y) { return {vsubq_s8(x.a, y.a), vsubq_s8(x.b, y.b)}; }
inline I8x32 xor8(I8x32 x, I8x32 y) { return {veorq_s8(x.a, y.a), veorq_s8(x.b, y.b)}; }
inline I8x32 nib16(const std::uint8_t* qs) {
  const uint8x16_t v = vld1q_u8(qs);
  return {s8(vandq_u8(v, vdupq_n_u8(15))), s8(vshrq_n_u8(v, 4))};
}
// (v << n) & mask and (v >> n) & mask per byte, n < 8 (exact per byte here;
// the x86 forms need the mask clear of the neighbour byte's bits)
template <int n>
inline I8x32 shl_and(I8x32 v, int mask) {
  const uint8x16_t m = vdupq_n_u8(static_cast<std::uint8_t>(mask));
  auto f = [&](int8x16_t x) {
    if constexpr (n == 0) return s8(vandq_u8(u8(x), m));
    else return s8(vandq_u8(vshlq_n_u8(u8(x), n), m));
  };
  return {f(v.a), f(v.b)};
}
template <int n>
inline I8x32 shr_and(I8x32 v, int mask) {
  const uint8x16_t m = vdupq_n_u8(static_cast<std::uint8_t>(mask));
  auto f = [&](int8x16_t x) {
    if constexpr (n == 0) return s8(vandq_u8(u8(x), m));
    else return s8(vandq_u8(vshrq_n_u8(u8(x), n), m));
  };
  return {f(v.a), f(v.b)};
}
inline int8x16_t lo_nib(int8x16_t v) { return s8(vandq_u8(u8(v), vdupq_n_u8(15))); }
inline int8x16_t hi_nib(int8x16_t v) { return s8(vshrq_n_u8(u8(v), 4)); }
inline I8x32 lo_nib(I8x32 v) { return {s8(vandq_u8(u8(v.a), vdupq_n_u8(15))), s8(vandq_u8(u8(v.b), vdupq_n_u8(15)))}; }
inline I8x32 hi_nib(I8x32 v) { return {s8(vshrq_n_u8(u8(v.a), 4)), s8(vshrq_n_u8(u8(v.b), 4))}; }
// byte i = table[idx[i]], idx in 0..15 (a 16-byte table)
inline I8x32 lookup16(const std::int8_t* table, I8x32 idx) {
  const int8x16_t t = vld1q_s8(table);
  return {vqtbl1q_s8(t, u8(idx.a)), vqtbl1q_s8(t, u8(idx.b))};
}
// x permuted by 16 byte indices (one lane: the x86 forms' per-lane shuffle)
template <std::uint8_t... i>
inline int8x16_t tbl16_lanes(int8x16_t x) {
  static_assert(sizeof...(i) == 16);
  static const std::uint8_t kIdx[16] = {i...};
  return vqtbl1q_s8(x, vld1q_u8(kIdx));
}
// bytes 0..15 times a, 16..31 times b (the products must fit a signed byte)
inline I8x32 mul8_halves(I8x32 v, int a, int b) {
  return {vmulq_s8(v.a, vdupq_n_s8(static_cast<std::int8_t>(a))), vmulq_s8(v.b, vdupq_n_s8(static_cast<std::int8_t>(b)))};
}
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

// widen: out[j] = q[j] * (j < 16 ? s0 : s1) + m, j < 32 (q signed bytes)
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
