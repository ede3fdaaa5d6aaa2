// matvec's packed int8 GEMM, its tile layout and dot step: how a tile of TR
// rows lies packed (per 32-element group: the rows' scales, offsets and
// integers, 4 bytes per row per step) and Q8Dot<Arch>, the per-ISA dot step
// over it (intrinsics, over kernels/int8/int8_ops_impl.h's dot4). The
// packing (matvec_packed_pack_impl.h, matvec_packed_pack_x16_impl.h) writes
// this layout and the tile products (matvec_packed_gemm_impl.h) read it.
#pragma once

#include "kernels/matvec/matvec_quantize_act_impl.h"
#include "kernels/matvec/matvec_rows_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// ------------------------------------------------- Q8_0 GEMM, packed panels
// For chunks of many tokens the row kernels (matvec_rows_impl.h) spend more
// on scaling and reducing than on multiplying (per 32-element group and
// token: one 32-byte dot, a conversion, a broadcast scale and an FMA). Here
// each tile of TR rows is repacked once per call, a column chunk at a time,
// its rows interleaved 4 bytes at a time so that one int32 lane holds one
// row: a register of V rows takes 8 full-width dot steps per 32-element group
// and token, then one conversion and one FMA by the rows' scales times the
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
  static I dot(I acc, const Wv& w, std::int32_t x4) { return dot4(acc, w, _mm512_set1_epi32(x4)); }
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
    return dot4(acc, w.u, xs);
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
  static I dot(I acc, const Wv& w, std::int32_t x4) { return dot4(acc, w, vreinterpretq_s8_s32(vdupq_n_s32(x4))); }
  static float32x4_t to_f(I a) { return vcvtq_f32_s32(a); }
};
#endif

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// For the types q8_gemm packs (matvec_has_packed_gemm): per 32-element
// group and row, how many scales (2: one per 16-element sub-block) and
// offsets (1 per group, 2 per sub-block) their packing carries besides the
// integers.
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

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
