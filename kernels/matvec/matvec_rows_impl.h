// matvec's row kernels for the quantized types: one weight row against NT
// tokens' int8 activations, each weight group decoded once (block-32 types
// and K-quants). No xsimd: one body over the int8 operation layer
// (kernels/int8/int8_ops_impl.h) and the GGUF decoders (matvec_gguf_impl.h),
// each ISA's own intrinsics; the AVX-512 VNNI Q8_0 row is raw intrinsics (two groups a zmm).
#pragma once

#include "kernels/matvec/matvec_gguf_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

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
      const __m512i d = dot4(_mm512_setzero_si512(), qa, xs);
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
    using G = Gguf<GgmlType::Q8_0>;
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = G::group<0>(w[i], G::bits(w[i]));
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
#endif
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: value = d*q + m, q unsigned (m = -8d / -16d for *_0).
template <int NT, GgmlType T>
void row_q32(const typename Gguf<T>::Block* w, std::size_t nb, const ActQ8* const* xq, float* out) {
  using G = Gguf<T>;
  Accs<NT> s;
  auto step = [&](std::size_t i, int u) {
    const float d = h2f(ld_u16(&w[i].d));
    const float m = G::offset(w[i], d);
    const I8x32 q = G::template group<0>(w[i], G::bits(w[i]));
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

// Q4_K / Q5_K against ActQ8K: sub-block j of 32 is value = d*sc_j*q - dmin*m_j.
// The 6-bit scales multiply the integer dots (one f32 FMA per 256 per token);
// the mins meet the activation sums per 32.
template <int NT, GgmlType T>
void row_k45(const typename Gguf<T>::Block* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  using G = Gguf<T>;
  Accs<NT> s;
  // u: the accumulator set, a compile-time index (a runtime i & 1 put the
  // accumulators on the stack, one store-to-load chain per block).
  auto step = [&](std::size_t i, auto u_) {
    constexpr int u = decltype(u_)::value;
    std::uint8_t sc[8], mn[8];
    G::scales(w[i], sc, mn);
    const KScales ks = k_scales_u8(sc);
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    const auto bits = G::bits(w[i]);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto pair = [&](auto c_) {
      constexpr int c = decltype(c_)::value;
      const I8x32 q0 = G::template group<2 * c>(w[i], bits), q1 = G::template group<2 * c + 1>(w[i], bits);
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

// Q2_K and Q3_K against ActQ8K: in half h, the 2-bit field j of the 32 qs
// bytes is elements 128h + 32j + (0..31), sub-blocks 8h + 2j and 8h + 2j + 1
// (16 each), whose small scales multiply the integer dots.
// Q2_K: 4-bit scales; the 4-bit mins meet the activation sums per 16.
// Q3_K: the third bit from bit plane 4h + j of hmask, unsigned 0..7 in the
// dots, and the format's -4 applied once per block through the activation
// sums per 16 (no sign juggling per group); signed 6-bit scales.
template <int NT, GgmlType T>
void row_k23(const typename Gguf<T>::Block* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  using G = Gguf<T>;
  constexpr bool kQ3 = T == GgmlType::Q3_K;
  Accs<NT> s;
  // Inlined by force: GCC otherwise keeps the even blocks' step out of line,
  // with the accumulators in memory. u: as in row_k45.
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d));
    float dmin = 0.f;
    if constexpr (!kQ3) dmin = h2f(ld_u16(&w[i].dmin));
    const auto sc = [&] {
      if constexpr (kQ3) return q3k_scales(w[i].scales);
      else return q2k_scales(w[i].scales);
    }();
    const auto bits = G::bits(w[i]);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto half = [&](auto h_) __attribute__((always_inline)) {
      constexpr int h = decltype(h_)::value;
      const KScales ks = [&] {
        if constexpr (kQ3) return q3k_half<h>(sc);
        else return q2k_half<h>(sc);
      }();
      auto group = [&](auto j_) __attribute__((always_inline)) {
        constexpr int j = decltype(j_)::value;
        const I8x32 q = G::template group<4 * h + j>(w[i], bits);
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
      if constexpr (kQ3) s.v[u][t] = q3k_fnma(fma_i32(s.v[u][t], ai[t], d * a.d), sc, a.sums16, 4.f * d * a.d);
      else s.v[u][t] = q2k_fnma_mins(fma_i32(s.v[u][t], ai[t], d * a.d), sc, a.sums16, dmin * a.d);
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
    using G = Gguf<GgmlType::IQ4_NL>;
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = G::group<0>(w[i], G::bits(w[i]));
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
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
      const I8x32 q = Gguf<GgmlType::IQ4_XS>::group<b>(w[i], {});
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

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
