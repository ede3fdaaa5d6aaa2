// The GGUF decoders' parts that differ per ISA, on aarch64: the Q5_0/Q5_1
// fifth bits and the K-quants' sub-block scales and mins, over the int8
// operation layer (kernels/int8/int8_ops_impl.h). The decoders, Gguf<T>,
// are in matvec_gguf_impl.h. NEON spells a 32-weight group as two q
// registers; the K-quant scales multiply sdot's int32 sums as scalars.
#pragma once

#include "kernels/matvec/matvec_common_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// byte i = 0x10 where bit i of `bits` is set (Q5_0/Q5_1 fifth bit)
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
inline void q3k_scale_bytes(const std::uint8_t* s12, std::int8_t* out) { std::memcpy(out, q3k_scales(s12).v, 16); }
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

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
