// Dequantization of every weight type to f32 (and BF16 to bf16) through
// the formats' decoders (Gguf<T>, matvec_gguf_impl.h): the prefill GEMM
// panels' source. Per-ISA
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
// Each format through its decoder (Gguf<T>), written out as f32: out [32 *
// groups]. store32(q, s0, s1, m, out): out[l] = s * q[l] + m, s0 for the
// first 16, s1 for the last.
template <GgmlType T>
void deq_b32(const typename Gguf<T>::Block* w, std::size_t nb, float* out) {  // Q8_0 and the block-32 types
  using G = Gguf<T>;
  for (std::size_t i = 0; i < nb; ++i, out += 32) {
    const float d = h2f(ld_u16(&w[i].d));
    store32(G::template group<0>(w[i], G::bits(w[i])), d, d, G::offset(w[i], d), out);
  }
}
// f(integral_constant j) for j < 8 in order
template <class F>
__attribute__((always_inline)) inline void for_groups8(F&& f) {
  f(std::integral_constant<int, 0>{});
  f(std::integral_constant<int, 1>{});
  f(std::integral_constant<int, 2>{});
  f(std::integral_constant<int, 3>{});
  f(std::integral_constant<int, 4>{});
  f(std::integral_constant<int, 5>{});
  f(std::integral_constant<int, 6>{});
  f(std::integral_constant<int, 7>{});
}
template <GgmlType T>
void deq_k45(const typename Gguf<T>::Block* w, std::size_t nb, float* out) {
  using G = Gguf<T>;
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    std::uint8_t sc[8], mn[8];
    G::scales(w[i], sc, mn);
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    const auto bits = G::bits(w[i]);
    for_groups8([&](auto j_) {
      constexpr int j = decltype(j_)::value;
      const float s = d * sc[j];
      store32(G::template group<j>(w[i], bits), s, s, -(dmin * mn[j]), out + 32 * j);
    });
  }
}
inline void deq_q2_k_simd(const BlockQ2_K* w, std::size_t nb, float* out) {
  using G = Gguf<GgmlType::Q2_K>;
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    for_groups8([&](auto g_) {
      constexpr int g = decltype(g_)::value;
      const std::uint8_t s0 = w[i].scales[2 * g], s1 = w[i].scales[2 * g + 1];  // scale (low nibble), min (high)
      const float m0 = dmin * static_cast<float>(s0 >> 4), m1 = dmin * static_cast<float>(s1 >> 4);
      float* o = out + 32 * g;
      store32(G::group<g>(w[i], {}), d * static_cast<float>(s0 & 15), d * static_cast<float>(s1 & 15), -m0, o);
      for (int l = 16; l < 32; ++l) o[l] += m0 - m1;  // the second sub-block's own min
    });
  }
}
inline void deq_q3_k_simd(const BlockQ3_K* w, std::size_t nb, float* out) {
  using G = Gguf<GgmlType::Q3_K>;
  const I8x32 zero = splat8(G::kZero);
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    const float d = h2f(ld_u16(&w[i].d));
    std::int8_t sc[16];
    G::scale_bytes(w[i], sc);
    const auto bits = G::bits(w[i]);
    for_groups8([&](auto g_) {
      constexpr int g = decltype(g_)::value;
      store32(sub8(G::group<g>(w[i], bits), zero), d * sc[2 * g], d * sc[2 * g + 1], 0.f, out + 32 * g);
    });
  }
}
inline void deq_q6_k_simd(const BlockQ6_K* w, std::size_t nb, float* out) {
  using G = Gguf<GgmlType::Q6_K>;
  const I8x32 zero = splat8(G::kZero);
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    const float d = h2f(ld_u16(&w[i].d));
    const std::int8_t* sc = w[i].scales;
    for_groups8([&](auto g_) {
      constexpr int g = decltype(g_)::value;
      store32(sub8(G::group<g>(w[i], {}), zero), d * sc[2 * g], d * sc[2 * g + 1], 0.f, out + 32 * g);
    });
  }
}
inline void deq_iq4_xs_simd(const BlockIQ4_XS* w, std::size_t nb, float* out) {
  using G = Gguf<GgmlType::IQ4_XS>;
  for (std::size_t i = 0; i < nb; ++i, out += 256) {
    const float d = h2f(ld_u16(&w[i].d));
    const std::uint64_t sc = iq4_xs_scales(w[i]);
    for_groups8([&](auto j_) {
      constexpr int j = decltype(j_)::value;
      const float dl = d * static_cast<float>(static_cast<std::int8_t>(sc >> (8 * j)));
      store32(G::group<j>(w[i], {}), dl, dl, 0.f, out + 32 * j);
    });
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
  with_type<Arch>(type, [&](auto T_) {
    constexpr GgmlType T = T_.value;
    if constexpr (T == GgmlType::F32) {
      std::memcpy(dst, src, n * 4);
    } else if constexpr (T == GgmlType::F16 || T == GgmlType::BF16) {
      std::size_t i = 0;
      for (; i + W <= n; i += W) (T == GgmlType::F16 ? L::f16(p + 2 * i) : L::bf16(p + 2 * i)).store_unaligned(dst + i);
      for (; i < n; ++i) dst[i] = T == GgmlType::F16 ? scalar_f16(p + 2 * i) : scalar_bf16(p + 2 * i);
    } else {
      using G = Gguf<T>;
      const auto* b = reinterpret_cast<const typename G::Block*>(p);
      const std::size_t nb = n / (32 * G::kGroups);
      if constexpr (G::kGroups == 1) deq_b32<T>(b, nb, dst);
      else if constexpr (T == GgmlType::Q2_K) deq_q2_k_simd(b, nb, dst);
      else if constexpr (T == GgmlType::Q3_K) deq_q3_k_simd(b, nb, dst);
      else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) deq_k45<T>(b, nb, dst);
      else if constexpr (T == GgmlType::Q6_K) deq_q6_k_simd(b, nb, dst);
      else deq_iq4_xs_simd(b, nb, dst);
    }
  });
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
