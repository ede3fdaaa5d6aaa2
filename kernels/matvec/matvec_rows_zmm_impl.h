// matvec's AVX-512 VNNI decode rows: two 32-element groups a zmm for the
// block-32 types and Q4_K/Q5_K (empty without those flags). AVX-512
// intrinsics only: gathers, byte masks and vpdpbusd have no xsimd spelling.
#pragma once

#include "kernels/matvec/matvec_rows_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// ------------------------------------ block-32 decode rows, two groups a zmm
// One token's activations for row_b32_zmm, rearranged once per call:
//   qs (nb / 2, 64): pair p = [x_2p[0:16], x_2p+1[0:16], x_2p[16:32], x_2p+1[16:32]],
//       the order of a pair of weight groups' low and high nibbles as one
//       shift and one insert leave them; or, `natural`, [x_2p, x_2p+1]
//       (Q5_0 / Q5_1: their fifth bits are then a byte mask as they stand);
//   dx, sx (nb rounded up to 16): each group's d and s, zero-padded.
struct ActPairs {
  const std::int8_t* qs;
  const float* dx;
  const float* sx;
};
// Where build_act_pairs puts nb groups' pairs in buf.
inline ActPairs act_pairs_at(const std::uint8_t* buf, std::size_t nb) {
  const auto* dx = reinterpret_cast<const float*>(buf + nb / 2 * 64);
  return {reinterpret_cast<const std::int8_t*>(buf), dx, dx + (nb + 15) / 16 * 16};
}
inline void build_act_pairs(const ActQ8* xq, std::size_t nb, std::uint8_t* buf, bool natural) {
  auto* qs = reinterpret_cast<std::int8_t*>(buf);
  auto* dx = reinterpret_cast<float*>(buf + nb / 2 * 64);
  const std::size_t padded = (nb + 15) / 16 * 16;
  float* sx = dx + padded;
  for (std::size_t p = 0; p < nb / 2; ++p) {
    std::int8_t* o = qs + 64 * p;
    if (natural) {
      std::memcpy(o, xq[2 * p].qs, 32);
      std::memcpy(o + 32, xq[2 * p + 1].qs, 32);
    } else {
      std::memcpy(o, xq[2 * p].qs, 16);
      std::memcpy(o + 16, xq[2 * p + 1].qs, 16);
      std::memcpy(o + 32, xq[2 * p].qs + 16, 16);
      std::memcpy(o + 48, xq[2 * p + 1].qs + 16, 16);
    }
  }
  for (std::size_t i = 0; i < padded; ++i) {
    dx[i] = i < nb ? xq[i].d : 0.f;
    sx[i] = i < nb ? xq[i].s : 0.f;
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// IQ4_NL's values + 128, unsigned, so they enter vpdpbusd as they are; the
// -128 comes back through the activation sums, as Q4_0's -8 does.
alignas(16) constexpr std::uint8_t kIq4TableU[16] = {
    static_cast<std::uint8_t>(kIq4Table[0] + 128),  static_cast<std::uint8_t>(kIq4Table[1] + 128),
    static_cast<std::uint8_t>(kIq4Table[2] + 128),  static_cast<std::uint8_t>(kIq4Table[3] + 128),
    static_cast<std::uint8_t>(kIq4Table[4] + 128),  static_cast<std::uint8_t>(kIq4Table[5] + 128),
    static_cast<std::uint8_t>(kIq4Table[6] + 128),  static_cast<std::uint8_t>(kIq4Table[7] + 128),
    static_cast<std::uint8_t>(kIq4Table[8] + 128),  static_cast<std::uint8_t>(kIq4Table[9] + 128),
    static_cast<std::uint8_t>(kIq4Table[10] + 128), static_cast<std::uint8_t>(kIq4Table[11] + 128),
    static_cast<std::uint8_t>(kIq4Table[12] + 128), static_cast<std::uint8_t>(kIq4Table[13] + 128),
    static_cast<std::uint8_t>(kIq4Table[14] + 128), static_cast<std::uint8_t>(kIq4Table[15] + 128)};

// One token, one row of Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL (value = d*u +
// m, u unsigned: m = -8d, -16d, the stored m, or -128d against kIq4TableU).
// The 256-bit row kernels spend most of each group on scalar work: its
// fp16 scale converted, multiplied by the activation's and broadcast, and
// m * s added. Here 16 groups' scales come in one gather and one multiply,
// the m * s terms in one FMA, and two groups share each zmm of weights:
// vpdpbusd, then a permute spreads the pair's two scales over the lanes.
template <GgmlType T>
float row_b32_zmm(const typename Gguf<T>::Block* w, std::size_t nb, const ActQ8* xq, const ActPairs& ap) {
  using Block = typename Gguf<T>::Block;
  constexpr bool kFive = Gguf<T>::kFive, kHasMin = Gguf<T>::kHasMin, kIq4 = Gguf<T>::kIq4;
  const __m512i vidx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                          _mm512_set1_epi32(static_cast<int>(sizeof(Block))));
  // which group of the pair each int32 lane of the dot products belongs to
  const __m512i pair_lanes = kFive ? _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1)
                                   : _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1);
  const __m512i m4 = _mm512_set1_epi8(15);
  __m512i tab = _mm512_setzero_si512();
  if constexpr (kIq4) tab = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4TableU)));
  __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps(), cm = _mm512_setzero_ps();
  const std::size_t npair = nb / 2 * 2;  // groups taken in pairs; an odd last one below
  for (std::size_t i0 = 0; i0 < npair; i0 += 16) {
    const int n = static_cast<int>(mv_min(16, npair - i0));  // even
    // the groups' first 4 bytes: d (and Q4_1 / Q5_1's m above it)
    const __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), static_cast<__mmask16>((1u << n) - 1), vidx,
                                                  static_cast<const void*>(w + i0), 1);
    const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
    const __m512 sc = _mm512_mul_ps(dw, _mm512_loadu_ps(ap.dx + i0));
    if constexpr (kHasMin)
      cm = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(g, 16))), _mm512_loadu_ps(ap.sx + i0), cm);
    else
      cm = _mm512_fmadd_ps(dw, _mm512_loadu_ps(ap.sx + i0), cm);
    auto pair = [&](int p, __m512& acc) __attribute__((always_inline)) {
      const Block* b = w + i0 + 2 * p;
      const __m256i v = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b[0].qs))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b[1].qs)), 1);
      // [lo 0, lo 1, hi 0, hi 1] (16-byte lanes; lo g = group g's low nibbles)
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
      if constexpr (kFive) {
        // [lo 0, hi 0, lo 1, hi 1]: each group's 32 weights in order, so
        // its 32 fifth bits (qh, little-endian) mask its bytes directly
        q = _mm512_and_si512(_mm512_shuffle_i64x2(q, q, 0xD8), m4);
        std::uint32_t h0, h1;
        std::memcpy(&h0, b[0].qh, 4);
        std::memcpy(&h1, b[1].qh, 4);
        const __mmask64 bits = _mm512_kunpackd(_cvtu32_mask32(h1), _cvtu32_mask32(h0));
        q = _mm512_mask_add_epi8(q, bits, q, _mm512_set1_epi8(16));
      } else {
        q = _mm512_and_si512(q, m4);
      }
      if constexpr (kIq4) q = _mm512_shuffle_epi8(tab, q);
      const __m512i d = dot4(_mm512_setzero_si512(), q,
                                            _mm512_loadu_si512(ap.qs + (i0 / 2 + static_cast<std::size_t>(p)) * 64));
      const __m512 s2 = _mm512_permutexvar_ps(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * p)), sc);
      acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s2, acc);
    };
    int p = 0;
    for (; p + 2 <= n / 2; p += 2) {  // two FMA chains
      pair(p, acc0);
      pair(p + 1, acc1);
    }
    if (p < n / 2) pair(p, acc0);
  }
  constexpr float kM = kHasMin ? 1.f : kIq4 ? -128.f : kFive ? -16.f : -8.f;
  float r = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + kM * _mm512_reduce_add_ps(cm);
  if (npair < nb) {  // the odd last group, with the 256-bit kernel
    const ActQ8* xt = xq + npair;
    float o;
    if constexpr (kIq4) row_iq4_nl<1>(reinterpret_cast<const BlockIQ4_NL*>(w + npair), 1, &xt, &o);
    else row_q32<1, T>(w + npair, 1, &xt, &o);
    r += o;
  }
  return r;
}

// One token, one row of IQ4_XS: two sub-blocks per zmm against the
// activations as they lie in ActQ8K (the weights' 128-bit lanes shuffled to
// [lo 2c, hi 2c, lo 2c+1, hi 2c+1] instead), the table unsigned as in
// row_b32_zmm, and the signed 6-bit sub-block scales unpacked with vector
// shifts and applied to the integer dots with vpmulld. The 256-bit row
// spends an absolute value, a sign transfer and a scalar-unpacked scale on
// every 32 weights. The -128 of the unsigned table returns through the
// activations' sums per 32, times the same scales, in the block's integers.
// Exact in int32: per lane at most 4 pairs x 4 x 241 x 127 x 32, and the
// correction 8 x 32 x 4064 x 128, both < 2^25.
inline float row_iq4_xs_zmm(const BlockIQ4_XS* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15);
  const __m512i tab = _mm512_broadcast_i32x4(_mm_load_si128(reinterpret_cast<const __m128i*>(kIq4TableU)));
  const __m256i sh_lo = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28), sh_hi = _mm256_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14);
  // the sub-block of each int32 lane of a pair's dot products, pair 0
  const __m512i pair_lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const BlockIQ4_XS& b = w[i];
    const ActQ8K& a = xq[i];
    std::uint32_t lo;
    std::memcpy(&lo, b.scales_l, 4);
    const __m256i sc = _mm256_sub_epi32(
        _mm256_or_si256(
            _mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(lo)), sh_lo), _mm256_set1_epi32(15)),
            _mm256_slli_epi32(_mm256_and_si256(_mm256_srlv_epi32(_mm256_set1_epi32(ld_u16(&b.scales_h)), sh_hi),
                                               _mm256_set1_epi32(3)),
                              4)),
        _mm256_set1_epi32(32));  // (8) ls - 32
    const __m512i scz = _mm512_zextsi256_si512(sc);
    // -128 * sum over sub-blocks of scale * activation sum
    __m512i ai = _mm512_zextsi256_si512(
        _mm256_slli_epi32(_mm256_mullo_epi32(sc, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums))), 7));
    ai = _mm512_sub_epi32(_mm512_setzero_si512(), ai);
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1);
      q = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_shuffle_i64x2(q, q, 0xD8), m4));
      const __m512i d = dot4(_mm512_setzero_si512(), q, _mm512_loadu_si512(a.qs + 64 * c));
      const __m512i s2 = _mm512_permutexvar_epi32(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * c)), scz);
      ai = _mm512_add_epi32(ai, _mm512_mullo_epi32(d, s2));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}

// One token, one row of Q4_K / Q5_K: sub-blocks 2c and 2c + 1 (the low and
// high nibbles of qs[32c, 32c + 32); Q5_K's fifth bits from bit planes 2c
// and 2c + 1 of qh, by a byte test into a mask) in one zmm against the
// activations as they lie, vpdpbusd, then vpmulld by the pair's 6-bit
// scales; the mins meet the activations' sums per 32 in one vpmulld per
// block. The 256-bit row spreads each sub-block's scale with a shuffle and
// multiplies it in with vpmaddubsw + vpmaddwd, 32 weights at a time.
template <class Block, bool kFive>
float row_k45_zmm(const Block* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15);
  // byte test patterns of pair c: bit 2c in the first 32 bytes, 2c + 1 in the rest
  const __m512i plane0 = _mm512_inserti64x4(_mm512_set1_epi8(1), _mm256_set1_epi8(2), 1);
  const __m512i pair_lanes = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  __m256 accm[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const Block& b = w[i];
    const ActQ8K& a = xq[i];
    __m512i qh = _mm512_setzero_si512();
    if constexpr (kFive) qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh)));
    alignas(8) std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(b.scales, sc, mn);
    const __m512i scz = _mm512_zextsi256_si512(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sc))));
    const __m256i mins = _mm256_mullo_epi32(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(mn))),
                                            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums)));
    __m512i ai = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qs + 32 * c));
      __m512i q = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(v), _mm256_srli_epi16(v, 4), 1), m4);
      if constexpr (kFive) {
        const __mmask64 hi = _mm512_test_epi8_mask(qh, _mm512_slli_epi16(plane0, 2 * c));
        q = _mm512_mask_add_epi8(q, hi, q, _mm512_set1_epi8(16));
      }
      const __m512i d = dot4(_mm512_setzero_si512(), q, _mm512_loadu_si512(a.qs + 64 * c));
      const __m512i s2 = _mm512_permutexvar_epi32(_mm512_add_epi32(pair_lanes, _mm512_set1_epi32(2 * c)), scz);
      ai = _mm512_add_epi32(ai, _mm512_mullo_epi32(d, s2));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
    accm[u] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(h2f(ld_u16(&b.dmin)) * a.d), accm[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1])) - hsum(_mm256_add_ps(accm[0], accm[1]));
}

// One token, one row of Q6_K: per half of 128, elements 0-63 (ql's low
// nibbles) and 64-127 (its high ones) in two zmm, each with its 2 high bits
// from qh by one 16-bit variable shift (a different count in each 32-byte
// half), vpdpbusd against the activations as they lie, vpmulld by the int8
// scales of their 16-element groups; the -32 returns through the
// activations' sums per 16 times the same scales, in the block's integers.
// Exact in int32: per lane at most 4 x (4 x 63 x 127 x 128), and the
// correction 32 x 128 x 16 x 127 x 16.
inline float row_q6_k_zmm(const BlockQ6_K* w, std::size_t nb, const ActQ8K* xq) {
  const __m512i m4 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
  // qh shift counts (16-bit lanes): elements 0-31 / 32-63 bits 0-1 / 2-3, elements 64-95 / 96-127 bits 4-5 / 6-7
  const __m512i cnt_lo = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
  const __m512i cnt_hi = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
  // the 16-element group of each int32 lane of a 64-element dot, from the first
  const __m512i quarter = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
  __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
  auto step = [&](std::size_t i, auto u_) __attribute__((always_inline)) {  // u: as in for_block_pairs
    constexpr int u = decltype(u_)::value;
    const BlockQ6_K& b = w[i];
    const ActQ8K& a = xq[i];
    const __m512i sc = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b.scales)));  // (16)
    const __m512i corr = _mm512_mullo_epi32(sc, _mm512_cvtepi16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.sums16))));
    __m512i ai = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 5));
    for (int h = 0; h < 2; ++h) {
      const __m512i l = _mm512_loadu_si512(b.ql + 64 * h);
      const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.qh + 32 * h)));
      const __m512i q0 = _mm512_or_si512(_mm512_and_si512(l, m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, cnt_lo), m3), 4));
      const __m512i q1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(l, 4), m4),
                                         _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, cnt_hi), m3), 4));
      const __m512i d0 = dot4(_mm512_setzero_si512(), q0, _mm512_loadu_si512(a.qs + 128 * h));
      const __m512i d1 = dot4(_mm512_setzero_si512(), q1, _mm512_loadu_si512(a.qs + 128 * h + 64));
      const __m512i s0 = _mm512_permutexvar_epi32(_mm512_add_epi32(quarter, _mm512_set1_epi32(8 * h)), sc);
      const __m512i s1 = _mm512_permutexvar_epi32(_mm512_add_epi32(quarter, _mm512_set1_epi32(8 * h + 4)), sc);
      ai = _mm512_add_epi32(ai, _mm512_add_epi32(_mm512_mullo_epi32(d0, s0), _mm512_mullo_epi32(d1, s1)));
    }
    acc[u] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai), _mm512_set1_ps(h2f(ld_u16(&b.d)) * a.d), acc[u]);
  };
  for_block_pairs(nb, step);
  return _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
}
#endif

// Q6_K against ActQ8K: group g (32 elements) of half h has scales sc[2g],
// sc[2g+1] (16 elements each); weights q-32 signed.
template <int NT>
void row_q6_k(const BlockQ6_K* w, std::size_t nb, const ActQ8K* const* xq, float* out) {
  using G = Gguf<GgmlType::Q6_K>;
  Accs<NT> s;
  const I8x32 k32 = splat8(G::kZero);
  auto step = [&](std::size_t i, auto u_) {  // u: as in row_k45
    constexpr int u = decltype(u_)::value;
    const float d = h2f(ld_u16(&w[i].d));
    I32 ai[NT];
    for (int t = 0; t < NT; ++t) ai[t] = i32_zero();
    for (int h = 0; h < 2; ++h) {
      const KScales ks = k_scales_s8(w[i].scales + 8 * h);
      I8x32 q[4];
      q[0] = sub8(G::half_group<0>(w[i], h), k32);
      q[1] = sub8(G::half_group<1>(w[i], h), k32);
      q[2] = sub8(G::half_group<2>(w[i], h), k32);
      q[3] = sub8(G::half_group<3>(w[i], h), k32);
      auto group = [&](auto g_) {
        constexpr int g = decltype(g_)::value;
        const auto sg = k_scale<2 * g, 2 * g + 1>(ks);
        for (int t = 0; t < NT; ++t) ai[t] = madd_sc_s(ai[t], q[g], ld32(xq[t][i].qs + 128 * h + 32 * g), sg);
      };
      group(std::integral_constant<int, 0>{});
      group(std::integral_constant<int, 1>{});
      group(std::integral_constant<int, 2>{});
      group(std::integral_constant<int, 3>{});
    }
    for (int t = 0; t < NT; ++t) s.v[u][t] = fma_i32(s.v[u][t], ai[t], d * xq[t][i].d);
  };
  for_block_pairs(nb, step);
  s.finish(out);
}

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
