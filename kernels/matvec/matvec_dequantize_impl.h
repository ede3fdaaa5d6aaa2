// Dequantization of every weight type to f32 (and BF16 to bf16) with the
// row kernels' decoders: the prefill GEMM panels' source. Per-ISA
// intrinsics (conversions and integer bit work that xsimd's integer batches
// would leave as weak symbols on NEON), also for the activation quantizer's
// act_amax / act_round32.
#pragma once

#include "kernels/matvec/matvec_float_rows_impl.h"
#include "kernels/matvec/matvec_rows_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

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
  return hmax_f32(_mm512_max_ps(m0, m1));
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
  s0 = hsum_i32(q0);
  s1 = hsum_i32(q1);
  return true;
}
#elif defined(__AVX2__)
inline float act_amax(const float* x, std::size_t n) {
  const __m256 sign = _mm256_set1_ps(-0.f);
  __m256 m[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (std::size_t k = 0; k < n; k += 32)
    for (int i = 0; i < 4; ++i) m[i] = _mm256_max_ps(m[i], _mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 8 * i)));
  return hmax_f32(_mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3])));
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
  return hmax_f32(vmaxq_f32(vmaxq_f32(m[0], m[1]), vmaxq_f32(m[2], m[3])));
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
  s0 = hsum_i32(sum[0]);
  s1 = hsum_i32(sum[1]);
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

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
