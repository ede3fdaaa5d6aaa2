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
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = ld32(w[i].qs);
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
#endif
}

// Q4_0 / Q4_1 / Q5_0 / Q5_1: value = d*q + m, q unsigned (m = -8d / -16d for *_0).
template <int NT, class Block, bool kFive, bool kHasMin>
void row_q32(const Block* w, std::size_t nb, const ActQ8* const* xq, float* out) {
  Accs<NT> s;
  auto step = [&](std::size_t i, int u) {
    const float d = h2f(ld_u16(&w[i].d));
    float m;
    if constexpr (kHasMin) m = h2f(ld_u16(&w[i].m));
    else m = (kFive ? -16.f : -8.f) * d;
    I8x32 q = nib16(w[i].qs);
    if constexpr (kFive) {
      std::uint32_t qh;
      std::memcpy(&qh, w[i].qh, 4);  // little-endian targets only
      q = or8(q, bits32_x10(qh));
    }
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

// A Q4_K / Q5_K block's 12 bytes of 6-bit scales and mins -> bytes sc[0..7],
// mn[0..7] (sc[j] = q[j] & 63, mn[j] = q[j+4] & 63; for j + 4 the low four
// bits from q[j+8], the top two from q[j] and q[j+4]), four at a time in
// 32-bit words (little-endian targets only, as row_q32's qh).
inline void unpack_k4_scales_u8(const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* mn) {
  std::uint32_t u0, u1, u2;
  std::memcpy(&u0, q, 4);
  std::memcpy(&u1, q + 4, 4);
  std::memcpy(&u2, q + 8, 4);
  constexpr std::uint32_t m6 = 0x3f3f3f3fu, m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
  const std::uint32_t s_lo = u0 & m6, m_lo = u1 & m6;
  const std::uint32_t s_hi = (u2 & m4) | (((u0 >> 6) & m2) << 4);
  const std::uint32_t m_hi = ((u2 >> 4) & m4) | (((u1 >> 6) & m2) << 4);
  std::memcpy(sc, &s_lo, 4);
  std::memcpy(sc + 4, &s_hi, 4);
  std::memcpy(mn, &m_lo, 4);
  std::memcpy(mn + 4, &m_hi, 4);
}

// Unsigned weights of a Q4_K / Q5_K block's sub-blocks 2c (q0) and 2c + 1
// (q1): the low and high nibbles of qs[32c, 32c + 32), and for Q5_K the
// fifth bits from bit planes 2c and 2c + 1 of qh (the block's 32 qh bytes).
template <int c, bool kFive, class Block>
inline void k45_pair(const Block& b, I8x32 qh, I8x32& q0, I8x32& q1) {
  const I8x32 v = ld32(b.qs + 32 * c);
  q0 = lo_nib(v);
  q1 = hi_nib(v);
  if constexpr (kFive) {
    q0 = or8(q0, bitplane_x10<2 * c>(qh));
    q1 = or8(q1, bitplane_x10<2 * c + 1>(qh));
  }
}

// Q4_K / Q5_K against ActQ8K: sub-block j of 32 is value = d*sc_j*q - dmin*m_j.
// The 6-bit scales multiply the integer dots (one f32 FMA per 256 per token);
// the mins meet the activation sums per 32.
template <int NT, class Block, bool kFive>
void row_k45(const Block* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  Accs<NT> s;
  // u: the accumulator set, a compile-time index (a runtime i & 1 put the
  // accumulators on the stack, one store-to-load chain per block).
  auto step = [&](std::size_t i, auto u_) {
    constexpr int u = decltype(u_)::value;
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(w[i].scales, sc, mn);
    const KScales ks = k_scales_u8(sc);
    const float d = h2f(ld_u16(&w[i].d)), dmin = h2f(ld_u16(&w[i].dmin));
    I8x32 qh{};
    if constexpr (kFive) qh = ld32(w[i].qh);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto pair = [&](auto c_) {
      constexpr int c = decltype(c_)::value;
      I8x32 q0, q1;
      k45_pair<c, kFive>(w[i], qh, q0, q1);
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
template <int NT, bool kQ3, class Block>
void row_k23(const Block* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
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
    I8x32 hm{};
    if constexpr (kQ3) hm = ld32(w[i].hmask);
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    auto half = [&](auto h_) __attribute__((always_inline)) {
      constexpr int h = decltype(h_)::value;
      const I8x32 v = ld32(w[i].qs + 32 * h);
      const KScales ks = [&] {
        if constexpr (kQ3) return q3k_half<h>(sc);
        else return q2k_half<h>(sc);
      }();
      auto group = [&](auto j_) __attribute__((always_inline)) {
        constexpr int j = decltype(j_)::value;
        I8x32 q = crumb<2 * j>(v);
        if constexpr (kQ3) q = or8(q, bit_x04<4 * h + j>(hm));
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
    const float d = h2f(ld_u16(&w[i].d));
    const I8x32 q = iq4nl_lookup(nib16(w[i].qs));
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_dot_s(s.v[u][t], q, ld32(xq[t][i].qs), d * xq[t][i].d);
  };
  std::size_t i = 0;
  for (; i + 2 <= nb; i += 2) { step(i, 0); step(i + 1, 1); }
  if (i < nb) step(i, 0);
  s.finish(out);
}

// IQ4_XS sub-block j's scale minus 32: its 4 low bits are nibble j of
// scales_l, its 2 high bits at bit 2j of scales_h
inline int iq4_xs_scale(const BlockIQ4_XS& b, int j) {
  return ((((b.scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((ld_u16(&b.scales_h) >> (2 * j)) & 3) << 4))) - 32;
}
// IQ4_XS's 8 sub-block scales minus 32, one per byte of a word
inline std::uint64_t iq4_xs_scales(const BlockIQ4_XS& b) {
  std::uint64_t packed = 0;
  for (int k = 0; k < 8; ++k)
    packed |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(iq4_xs_scale(b, k))) << (8 * k);
  return packed;
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
      const I8x32 q = iq4nl_lookup(nib16(w[i].qs + 16 * b));
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

// The block-32 types besides Q8_0 (per 32-weight group: value = d * u + m,
// u unsigned, or IQ4_NL's table value): each one's block and how its
// weights decode, for the decode rows and the GEMM's packing.
template <GgmlType T>
struct Block32;
template <>
struct Block32<GgmlType::Q4_0> {
  using Block = BlockQ4_0;
  static constexpr bool kFive = false, kHasMin = false, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q4_1> {
  using Block = BlockQ4_1;
  static constexpr bool kFive = false, kHasMin = true, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q5_0> {
  using Block = BlockQ5_0;
  static constexpr bool kFive = true, kHasMin = false, kIq4 = false;
};
template <>
struct Block32<GgmlType::Q5_1> {
  using Block = BlockQ5_1;
  static constexpr bool kFive = true, kHasMin = true, kIq4 = false;
};
template <>
struct Block32<GgmlType::IQ4_NL> {
  using Block = BlockIQ4_NL;
  static constexpr bool kFive = false, kHasMin = false, kIq4 = true;
};
// The types Block32 describes (each with a two-groups-a-zmm decode row).
constexpr bool has_b32_zmm_row(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
         t == GgmlType::IQ4_NL;
}

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
