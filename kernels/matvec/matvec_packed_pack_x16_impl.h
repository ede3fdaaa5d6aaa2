// matvec's packed int8 GEMM, the packing of row-interleaved weights (x16,
// quant/x16_layout.h) from their tiles: AVX-512 VNNI intrinsics only, in an
// anonymous namespace (no other ISA's object shares it). Elsewhere q8_gemm
// takes the tiles back to the original layout and packs those.
#pragma once

#include "kernels/matvec/matvec_packed_dot_impl.h"
#include "kernels/matvec/matvec_x16_zmm_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
// q8_pack_tile's packing for AVX-512 (TR 32 rows, integers + 128) of the
// x16 types (x16_type) straight from their tiles (matvec.h), with no
// copy in the original layout between: the tiles' words already lie 4 bytes
// per row, so each of a group's 8 steps is one 64-byte load per 16-row
// tile, its nibbles masked (fifth bits added through byte masks from qh;
// IQ4_XS's and IQ4_NL's looked up). w: the first tile, rb bytes per row;
// nr: 16 or 32 rows. The same bytes as q8_pack_tile on the original rows.
namespace {
template <GgmlType T>
void q8_pack_x16(const std::uint8_t* w, std::size_t rb, std::size_t nr, std::size_t g0, std::size_t ng,
                 std::uint8_t* dst) {
  using D = Q8Dot<xsimd::avx512bw>;
  constexpr int TR = D::V * D::MR, kS = packed_scales(T), kO = packed_offsets(T);
  static_assert(TR == 32 && kS == (T == GgmlType::Q6_K ? 2 : 1) && D::kFlip == 0x80808080u);
  constexpr std::size_t kGB = pack_group_bytes(T) * TR;
  const __m512i m4 = _mm512_set1_epi8(15), flip = _mm512_set1_epi8(-128), sign = _mm512_set1_epi32(INT32_MIN);
  for (std::size_t g = 0; g < ng; ++g) {
    std::uint8_t* blk = dst + g * kGB;
    float* d = reinterpret_cast<float*>(blk);    // (kS, TR) the rows' scales
    float* o = d + kS * TR;                      // (kO, TR) the rows' offsets
    std::uint8_t* q = blk + 4 * (kS + kO) * TR;  // (8, TR, 4)
    for (std::size_t h = 0; h < 2; ++h) {        // rows [16 h, 16 h + 16): a tile, or none (zeros)
      auto step = [&](int k) { return q + (static_cast<std::size_t>(k) * TR + 16 * h) * 4; };
      if (16 * h >= nr) {
        for (int s = 0; s < kS; ++s) _mm512_storeu_ps(d + s * TR + 16 * h, _mm512_setzero_ps());
        if constexpr (kO == 1) _mm512_storeu_ps(o + 16 * h, _mm512_setzero_ps());
        for (int k = 0; k < 8; ++k) _mm512_storeu_si512(step(k), flip);
        continue;
      }
      const std::uint8_t* tile = w + 16 * h * rb;
      if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
        using X = std::conditional_t<T == GgmlType::Q5_K, X16Q5K, X16Q4K>;
        const std::size_t b = (g0 + g) / 8, j = (g0 + g) % 8;  // sub-block j: low (even) or high nibbles of qs run j / 2
        const std::uint8_t* p = tile + b * X::kBytes;
        __m128i sc8[8], mn8[8];
        x16_q4_k_scales(p, sc8, mn8);
        const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        const __m512 dm = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + X::kDmin)));
        _mm512_storeu_ps(d + 16 * h, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(sc8[j]))));
        const __m512 m = _mm512_mul_ps(dm, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(mn8[j])));
        _mm512_storeu_ps(o + 16 * h, _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(m), sign)));
        for (int k = 0; k < 8; ++k) {
          const __m512i v = _mm512_loadu_si512(p + X::kQs + 64 * (8 * (j / 2) + static_cast<std::size_t>(k)));
          __m512i n = (j & 1) ? _mm512_and_si512(_mm512_srli_epi16(v, 4), m4) : _mm512_and_si512(v, m4);
          if constexpr (T == GgmlType::Q5_K)
            n = _mm512_mask_add_epi8(n, x16_q5_k_bits(p, static_cast<int>(j), k), n, _mm512_set1_epi8(16));
          _mm512_storeu_si512(step(k), _mm512_or_si512(n, flip));
        }
      } else if constexpr (T == GgmlType::Q6_K) {
        // Group gi of the block: quarter j of half n (columns 32 gi..), its
        // sub-blocks 2 gi and 2 gi + 1; step k: ql word 16n + 8 (j % 2) + k
        // (low nibbles for j < 2, else high), bits 2j of qh word 8n + k;
        // stored (q - 32) + 128 = q + 96.
        const std::size_t b = (g0 + g) / 8, gi = (g0 + g) % 8, n = gi / 4, j = gi % 4;
        const std::uint8_t* p = tile + b * X16Q6K::kBytes;
        const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        for (int s = 0; s < 2; ++s) {
          const __m128i sc = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + X16Q6K::kScales + 16 * (2 * gi + s)));
          _mm512_storeu_ps(d + s * TR + 16 * h, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(sc))));
        }
        const __m128i shift = _mm_cvtsi32_si128(static_cast<int>(2 * j));
        const __m512i m30 = _mm512_set1_epi8(0x30), k96 = _mm512_set1_epi8(96);
        for (int k = 0; k < 8; ++k) {
          const __m512i a = _mm512_loadu_si512(p + X16Q6K::kQl + 64 * (16 * n + 8 * (j % 2) + static_cast<std::size_t>(k)));
          const __m512i hb = _mm512_loadu_si512(p + X16Q6K::kQh + 64 * (8 * n + static_cast<std::size_t>(k)));
          const __m512i nib = j < 2 ? _mm512_and_si512(a, m4) : _mm512_and_si512(_mm512_srli_epi16(a, 4), m4);
          // bits 2j, 2j + 1 of each byte to bits 4-5 (the 16-bit shifts keep them in their byte)
          const __m512i hi = _mm512_slli_epi16(_mm512_srl_epi16(hb, shift), 4);
          _mm512_storeu_si512(step(k), _mm512_add_epi8(_mm512_ternarylogic_epi32(nib, hi, m30, 0xF8), k96));
        }
      } else if constexpr (T == GgmlType::IQ4_XS) {
        // Sub-block j: step k, columns 4k.. of it, the low nibbles of qs
        // word 4j + k % 4 (k < 4) or its high ones, stored value + 128.
        const std::size_t b = (g0 + g) / 8, j = (g0 + g) % 8;
        const std::uint8_t* p = tile + b * X16IQ4XS::kBytes;
        const __m512 dd = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
        _mm512_storeu_ps(d + 16 * h, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(x16_iq4_xs_scales(p, static_cast<int>(j)))));
        const __m512i tbl = iq4_table_u8();
        for (int k = 0; k < 8; ++k) {
          const __m512i v = _mm512_loadu_si512(p + X16IQ4XS::kQs + 64 * (4 * j + static_cast<std::size_t>(k % 4)));
          const __m512i n = k < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          _mm512_storeu_si512(step(k), _mm512_shuffle_epi8(tbl, n));
        }
      } else {
        // Step k: columns 4k.. of the group, the low nibbles of qs word k % 4
        // (k < 4) or its high ones, the fifth bits in qh[2 (k % 4) + k / 4];
        // stored q + 128 with a min (Q4_1, Q5_1), else with the offset taken
        // out: (q - 16) + 128 = q + 112 (Q5_0), (q - 8) + 128 (Q4_0); IQ4_NL's
        // values looked up, + 128.
        using X = X16B32<T>;
        constexpr bool kFive = Gguf<T>::kFive, kMin = Gguf<T>::kHasMin, kNl = Gguf<T>::kIq4;
        static_assert(kO == (kMin ? 1 : 0));
        const std::uint8_t* p = tile + (g0 + g) * X::kBytes;
        _mm512_storeu_ps(d + 16 * h, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
        if constexpr (kMin)
          _mm512_storeu_ps(o + 16 * h, _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + X::kM))));
        std::uint64_t qh[8];
        if constexpr (kFive) std::memcpy(qh, p + X::kQh, sizeof qh);
        const __m512i off = _mm512_set1_epi8(static_cast<char>(kMin ? 128 : kFive ? 112 : 120)), k16 = _mm512_set1_epi8(16);
        [[maybe_unused]] const __m512i tbl = kNl ? iq4_table_u8() : off;
        for (int k = 0; k < 8; ++k) {
          const __m512i v = _mm512_loadu_si512(p + X::kQs + 64 * (k % 4));
          __m512i n = k < 4 ? _mm512_and_si512(v, m4) : _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
          if constexpr (kNl) {
            n = _mm512_shuffle_epi8(tbl, n);
          } else {
            n = _mm512_add_epi8(n, off);
            if constexpr (kFive) n = _mm512_mask_add_epi8(n, _cvtu64_mask64(qh[2 * (k % 4) + k / 4]), n, k16);
          }
          _mm512_storeu_si512(step(k), n);
        }
      }
    }
  }
}
}  // namespace
#endif

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
