// matvec's AVX-512 VNNI kernels over row-interleaved tiles (x16, matvec.h):
// one tile of 16 rows against up to 4 tokens, one int32 lane per row, so a
// 64-byte load of weights feeds one vpdpbusd per token and nibble half (its
// activation word broadcast by the instruction itself: dot4_bcast) and the
// tile's 16 outputs leave in one store. Empty without those flags.
#pragma once

#include "kernels/matvec/matvec_rows_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)

static_assert(X16Q5K::kScales == X16Q4K::kScales && X16Q5K::kDmin == X16Q4K::kDmin);
// The 6-bit scales and mins of a Q4_K (or Q5_K) x16 block's 16 rows (sc8[j], mn8[j]:
// sub-block j's, a byte per row), apart with byte operations on their
// transposed bytes (matvec.h's scales[12][16]).
inline void x16_q4_k_scales(const std::uint8_t* p, __m128i (&sc8)[8], __m128i (&mn8)[8]) {
  const __m128i m6 = _mm_set1_epi8(63), m4x = _mm_set1_epi8(15), m30 = _mm_set1_epi8(0x30);
  __m128i s[12];
  for (int j = 0; j < 12; ++j) s[j] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + X16Q4K::kScales + 16 * j));
  for (int j = 0; j < 4; ++j) {
    sc8[j] = _mm_and_si128(s[j], m6);
    mn8[j] = _mm_and_si128(s[j + 4], m6);
    // high 2 bits: bits 6-7 of scales[j] / scales[j + 4], moved to bits 4-5
    sc8[j + 4] = _mm_or_si128(_mm_and_si128(s[j + 8], m4x), _mm_and_si128(_mm_srli_epi16(s[j], 2), m30));
    mn8[j + 4] =
        _mm_or_si128(_mm_and_si128(_mm_srli_epi16(s[j + 8], 4), m4x), _mm_and_si128(_mm_srli_epi16(s[j + 4], 2), m30));
  }
}

// Q5_K x16 block p's fifth bits of sub-block j, step k (matvec.h's qh[j][k]).
inline __mmask64 x16_q5_k_bits(const std::uint8_t* p, int j, int k) {
  std::uint64_t m;
  std::memcpy(&m, p + X16Q5K::kQh + 8 * (8 * static_cast<std::size_t>(j) + static_cast<std::size_t>(k)), 8);
  return _cvtu64_mask64(m);
}

// y[t][0, 16) = the tile's 16 rows of Q4_K or Q5_K (kFive; nb blocks of
// 256) against token t (ActQ8K), t < NT. Per block and row: sum over
// sub-blocks j of d sc_j dot_j - dmin mn_j sums_j, the integer part exact in
// int32 (8 x 63 x 32 x 31 x 127 < 2^31); Q5_K's fifth bits added through
// byte masks straight from its qh.
template <int NT, bool kFive>
void tile_k45_x16(const std::uint8_t* tile, std::size_t nb, const ActQ8K* const* xk, float* const* y) {
  using X = std::conditional_t<kFive, X16Q5K, X16Q4K>;
  const __m512i m4 = _mm512_set1_epi8(15), k16 = _mm512_set1_epi8(16);
  __m512 acc[NT], accm[NT];
  for (int t = 0; t < NT; ++t) acc[t] = accm[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + b * X::kBytes;
    // The next block (this tile's, or the next tile's first: tiles lie back
    // to back), a line at a time: from memory the K-quant tiles, left to the
    // hardware prefetchers, ran at 60-70% of the plain read
    // (docs/performance-log.md, "Issue 43, fifth session").
    for (std::size_t o = 0; o < X::kBytes; o += 64)
      _mm_prefetch(reinterpret_cast<const char*>(p + X::kBytes + o), _MM_HINT_T0);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + X::kDmin)));
    __m128i sc8[8], mn8[8];  // (16 rows) sub-block j's scale and min
    x16_q4_k_scales(p, sc8, mn8);
    __m512i mi[NT], ai[NT];  // per token: sum_j mn_j sums_j; sum_j sc_j dot_j
    for (int t = 0; t < NT; ++t) {
      mi[t] = _mm512_setzero_si512();
      ai[t] = _mm512_setzero_si512();
    }
    for (int j = 0; j < 8; ++j) {
      const __m512i mn = _mm512_cvtepu8_epi32(mn8[j]);
      for (int t = 0; t < NT; ++t) mi[t] = _mm512_add_epi32(mi[t], _mm512_mullo_epi32(mn, _mm512_set1_epi32(xk[t][b].sums[j])));
    }
    for (int c = 0; c < 4; ++c) {  // sub-blocks 2c (low nibbles) and 2c + 1 (high)
      __m512i lo[NT], hi[NT];
      for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
      for (int k = 0; k < 8; ++k) {
        const __m512i v = _mm512_loadu_si512(p + X::kQs + 64 * (8 * c + k));
        __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
        if constexpr (kFive) {
          l = _mm512_mask_add_epi8(l, x16_q5_k_bits(p, 2 * c, k), l, k16);
          h = _mm512_mask_add_epi8(h, x16_q5_k_bits(p, 2 * c + 1, k), h, k16);
        }
        for (int t = 0; t < NT; ++t) {
          lo[t] = dot4_bcast(lo[t], l, xk[t][b].qs + 64 * c + 4 * k);
          hi[t] = dot4_bcast(hi[t], h, xk[t][b].qs + 64 * c + 32 + 4 * k);
        }
      }
      const __m512i s0 = _mm512_cvtepu8_epi32(sc8[2 * c]), s1 = _mm512_cvtepu8_epi32(sc8[2 * c + 1]);
      for (int t = 0; t < NT; ++t)
        ai[t] = _mm512_add_epi32(ai[t], _mm512_add_epi32(_mm512_mullo_epi32(lo[t], s0), _mm512_mullo_epi32(hi[t], s1)));
    }
    for (int t = 0; t < NT; ++t) {
      const __m512 xd = _mm512_set1_ps(xk[t][b].d);
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[t]), _mm512_mul_ps(d, xd), acc[t]);
      accm[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mi[t]), _mm512_mul_ps(dm, xd), accm[t]);
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y[t], _mm512_sub_ps(acc[t], accm[t]));
}

// y[t][0, 16) = the tile's 16 rows of Q6_K (nb blocks of 256) against
// token t (ActQ8K), t < NT. Per half n and activation word w, one load each
// of ql words 16n + w and 16n + 8 + w and qh word 8n + w gives the 6-bit
// integers (0..63) of 4 columns in each quarter q of the half (columns
// 128n + 32q + 4w..: low nibbles of the first for q = 0, of the second for
// q = 1, high ones for 2 and 3; their 2 high bits at bits 2q of qh), so
// sub-block 8n + 2q + w / 4 sums 4 dot steps. Per block and row: sum over
// sub-blocks j of sc_j (dot_j - 32 sums16_j), exact in int32 (16 x 128 x
// (16 x 63 x 127 + 32 x 16 x 127) < 2^31), times d dx.
template <int NT>
void tile_q6_k_x16(const std::uint8_t* tile, std::size_t nb, const ActQ8K* const* xk, float* const* y) {
  const __m512i m4 = _mm512_set1_epi8(15), m30 = _mm512_set1_epi8(0x30);
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + b * X16Q6K::kBytes;
    for (std::size_t o = 0; o < X16Q6K::kBytes; o += 64)  // as tile_k45_x16
      _mm_prefetch(reinterpret_cast<const char*>(p + X16Q6K::kBytes + o), _MM_HINT_T0);
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    __m512i sc[16];  // sub-block j's scales, an int32 lane per row
    for (int j = 0; j < 16; ++j)
      sc[j] = _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + X16Q6K::kScales + 16 * j)));
    __m512i ai[NT];  // sum_j sc_j (dot_j - 32 sums16_j)
    for (int t = 0; t < NT; ++t) {
      __m512i corr = _mm512_setzero_si512();
      for (int j = 0; j < 16; ++j) corr = _mm512_add_epi32(corr, _mm512_mullo_epi32(sc[j], _mm512_set1_epi32(xk[t][b].sums16[j])));
      ai[t] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_slli_epi32(corr, 5));
    }
    for (int n = 0; n < 2; ++n)
      for (int h = 0; h < 2; ++h) {  // words w = 4h..4h+3: sub-blocks 8n + 2q + h
        __m512i dq[4][NT];
        for (int q = 0; q < 4; ++q)
          for (int t = 0; t < NT; ++t) dq[q][t] = _mm512_setzero_si512();
        for (int w = 4 * h; w < 4 * h + 4; ++w) {
          const __m512i a = _mm512_loadu_si512(p + X16Q6K::kQl + 64 * (16 * n + w));
          const __m512i c = _mm512_loadu_si512(p + X16Q6K::kQl + 64 * (16 * n + 8 + w));
          const __m512i hb = _mm512_loadu_si512(p + X16Q6K::kQh + 64 * (8 * n + w));
          // low nibble | high bits moved to bits 4-5 (0xF8: a & m4 | hb' & m30 as one ternary op)
          __m512i v[4];
          v[0] = _mm512_ternarylogic_epi32(_mm512_and_si512(a, m4), _mm512_slli_epi16(hb, 4), m30, 0xF8);
          v[1] = _mm512_ternarylogic_epi32(_mm512_and_si512(c, m4), _mm512_slli_epi16(hb, 2), m30, 0xF8);
          v[2] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(a, 4), m4), hb, m30, 0xF8);
          v[3] = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(c, 4), m4), _mm512_srli_epi16(hb, 2), m30, 0xF8);
          for (int q = 0; q < 4; ++q)
            for (int t = 0; t < NT; ++t) dq[q][t] = dot4_bcast(dq[q][t], v[q], xk[t][b].qs + 128 * n + 32 * q + 4 * w);
        }
        for (int q = 0; q < 4; ++q)
          for (int t = 0; t < NT; ++t) ai[t] = _mm512_add_epi32(ai[t], _mm512_mullo_epi32(dq[q][t], sc[8 * n + 2 * q + h]));
      }
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[t]), _mm512_mul_ps(d, _mm512_set1_ps(xk[t][b].d)), acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y[t], acc[t]);
}

// Sub-block j's scales (ls - 32) of an IQ4_XS x16 block's 16 rows, an int32 lane each.
inline __m512i x16_iq4_xs_scales(const std::uint8_t* p, int j) {
  const __m512i sh = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + X16IQ4XS::kScalesH)));
  const __m512i sl = _mm512_cvtepu8_epi32(
      _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + X16IQ4XS::kScalesL + 16 * static_cast<std::size_t>(j / 2))));
  const __m512i lo = _mm512_and_si512(_mm512_srli_epi32(sl, 4 * static_cast<unsigned>(j & 1)), _mm512_set1_epi32(15));
  const __m512i hi = _mm512_and_si512(_mm512_srli_epi32(sh, 2 * static_cast<unsigned>(j)), _mm512_set1_epi32(3));
  return _mm512_sub_epi32(_mm512_or_si512(lo, _mm512_slli_epi32(hi, 4)), _mm512_set1_epi32(32));
}

// IQ4_NL's values + 128 (unsigned, for vpdpbusd's first operand) in each
// 128-bit lane, for a nibble lookup with vpshufb.
inline __m512i iq4_table_u8() {
  const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIq4Table));
  return _mm512_xor_si512(_mm512_broadcast_i32x4(t), _mm512_set1_epi8(-128));
}

// y[t][0, 16) = the tile's 16 rows of IQ4_XS (nb blocks of 256) against
// token t (ActQ8K), t < NT. The values + 128 dot the activations; per
// sub-block j: (ls_j - 32) (dot_j - 128 sums_j), exact in int32 (8 x 32 x
// 32 x 128 x 128 < 2^31), times d dx once per block.
template <int NT>
void tile_iq4_xs_x16(const std::uint8_t* tile, std::size_t nb, const ActQ8K* const* xk, float* const* y) {
  const __m512i m4 = _mm512_set1_epi8(15), tbl = iq4_table_u8();
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + b * X16IQ4XS::kBytes;
    for (std::size_t o = 0; o < X16IQ4XS::kBytes; o += 64)  // the next block, as tile_k45_x16
      _mm_prefetch(reinterpret_cast<const char*>(p + X16IQ4XS::kBytes + o), _MM_HINT_T0);
    __m512i ai[NT];  // per token: sum_j (ls_j - 32) (dot_j - 128 sums_j)
    for (int t = 0; t < NT; ++t) ai[t] = _mm512_setzero_si512();
    for (int j = 0; j < 8; ++j) {
      __m512i lo[NT], hi[NT];
      for (int t = 0; t < NT; ++t) lo[t] = hi[t] = _mm512_setzero_si512();
      for (int k = 0; k < 4; ++k) {
        const __m512i v = _mm512_loadu_si512(p + X16IQ4XS::kQs + 64 * (4 * j + k));
        const __m512i l = _mm512_shuffle_epi8(tbl, _mm512_and_si512(v, m4));
        const __m512i h = _mm512_shuffle_epi8(tbl, _mm512_and_si512(_mm512_srli_epi16(v, 4), m4));
        for (int t = 0; t < NT; ++t) {
          lo[t] = dot4_bcast(lo[t], l, xk[t][b].qs + 32 * j + 4 * k);
          hi[t] = dot4_bcast(hi[t], h, xk[t][b].qs + 32 * j + 16 + 4 * k);
        }
      }
      const __m512i ls = x16_iq4_xs_scales(p, j);
      for (int t = 0; t < NT; ++t) {
        const __m512i dj = _mm512_sub_epi32(_mm512_add_epi32(lo[t], hi[t]), _mm512_set1_epi32(128 * xk[t][b].sums[j]));
        ai[t] = _mm512_add_epi32(ai[t], _mm512_mullo_epi32(dj, ls));
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    for (int t = 0; t < NT; ++t)
      acc[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(ai[t]), _mm512_mul_ps(d, _mm512_set1_ps(xk[t][b].d)), acc[t]);
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y[t], acc[t]);
}

// The x16 layout of a block-32 type (matvec.h).
template <GgmlType T>
using X16B32 = std::conditional_t<
    T == GgmlType::Q5_0, X16Q5_0,
    std::conditional_t<T == GgmlType::Q5_1, X16Q5_1,
                       std::conditional_t<T == GgmlType::Q4_1, X16Q4_1,
                                          std::conditional_t<T == GgmlType::IQ4_NL, X16IQ4NL, X16Q4_0>>>>;

// y[t][0, 16) = the tile's 16 rows of a block-32 type T (Q4_0, Q5_0,
// IQ4_NL, Q4_1, Q5_1; nb groups of 32) against token t (ActQ8), t < NT: the
// unsigned integers (the fifth bits added through byte masks straight from
// qh; IQ4_NL's values looked up + 128) dotted with the activations; per
// group, d (dx dot - off sx) with the type's offset off (8, 16, 128), or
// with a min, d dx dot + m sx.
template <int NT, GgmlType T>
void tile_b32_x16(const std::uint8_t* tile, std::size_t nb, const ActQ8* const* xq, float* const* y) {
  using X = X16B32<T>;
  constexpr bool kFive = Gguf<T>::kFive, kMin = Gguf<T>::kHasMin, kNl = Gguf<T>::kIq4;
  constexpr float kOff = kNl ? 128.f : kFive ? 16.f : 8.f;
  const __m512i m4 = _mm512_set1_epi8(15), k16 = _mm512_set1_epi8(16);
  [[maybe_unused]] const __m512i tbl = kNl ? iq4_table_u8() : m4;
  __m512 acc[NT];
  for (int t = 0; t < NT; ++t) acc[t] = _mm512_setzero_ps();
  for (std::size_t g = 0; g < nb; ++g) {
    const std::uint8_t* p = tile + g * X::kBytes;
    std::uint64_t qh[8];
    if constexpr (kFive) std::memcpy(qh, p + X::kQh, sizeof qh);
    __m512i dl[NT], dh[NT];  // two dependency chains per token: low and high nibbles
    for (int t = 0; t < NT; ++t) dl[t] = dh[t] = _mm512_setzero_si512();
    for (int k = 0; k < 4; ++k) {
      const __m512i v = _mm512_loadu_si512(p + X::kQs + 64 * k);
      __m512i l = _mm512_and_si512(v, m4), h = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
      if constexpr (kFive) {
        l = _mm512_mask_add_epi8(l, _cvtu64_mask64(qh[2 * k]), l, k16);
        h = _mm512_mask_add_epi8(h, _cvtu64_mask64(qh[2 * k + 1]), h, k16);
      }
      if constexpr (kNl) {
        l = _mm512_shuffle_epi8(tbl, l);
        h = _mm512_shuffle_epi8(tbl, h);
      }
      for (int t = 0; t < NT; ++t) {
        dl[t] = dot4_bcast(dl[t], l, xq[t][g].qs + 4 * k);
        dh[t] = dot4_bcast(dh[t], h, xq[t][g].qs + 16 + 4 * k);
      }
    }
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    [[maybe_unused]] __m512 m;
    if constexpr (kMin) m = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + X::kM)));
    for (int t = 0; t < NT; ++t) {
      const __m512 dot = _mm512_cvtepi32_ps(_mm512_add_epi32(dl[t], dh[t]));
      if constexpr (kMin) {
        acc[t] = _mm512_fmadd_ps(d, _mm512_mul_ps(dot, _mm512_set1_ps(xq[t][g].d)), acc[t]);
        acc[t] = _mm512_fmadd_ps(m, _mm512_set1_ps(xq[t][g].s), acc[t]);
      } else {
        const __m512 v = _mm512_fmsub_ps(dot, _mm512_set1_ps(xq[t][g].d), _mm512_set1_ps(kOff * xq[t][g].s));
        acc[t] = _mm512_fmadd_ps(d, v, acc[t]);
      }
    }
  }
  for (int t = 0; t < NT; ++t) _mm512_storeu_ps(y[t], acc[t]);
}

// The tile kernel of type T for n (1..4) tokens.
template <GgmlType T>
void tile_x16(int n, const std::uint8_t* tile, std::size_t cols, const void* const* xv, float* const* y) {
  auto run = [&](auto nt_) {
    constexpr int NT = decltype(nt_)::value;
    if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K)
      tile_k45_x16<NT, T == GgmlType::Q5_K>(tile, cols / 256, reinterpret_cast<const ActQ8K* const*>(xv), y);
    else if constexpr (T == GgmlType::Q6_K)
      tile_q6_k_x16<NT>(tile, cols / 256, reinterpret_cast<const ActQ8K* const*>(xv), y);
    else if constexpr (T == GgmlType::IQ4_XS)
      tile_iq4_xs_x16<NT>(tile, cols / 256, reinterpret_cast<const ActQ8K* const*>(xv), y);
    else
      tile_b32_x16<NT, T>(tile, cols / 32, reinterpret_cast<const ActQ8* const*>(xv), y);
  };
  switch (n) {
    case 1: return run(std::integral_constant<int, 1>{});
    case 2: return run(std::integral_constant<int, 2>{});
    case 3: return run(std::integral_constant<int, 3>{});
    default: return run(std::integral_constant<int, 4>{});
  }
}
#endif

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
