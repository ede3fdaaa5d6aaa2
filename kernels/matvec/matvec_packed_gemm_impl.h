// matvec's packed int8 GEMM for chunks of many tokens: weight tiles
// repacked once per call so one int32 lane holds one row (Q8_0 and every
// type whose groups are integers times a scale plus an offset). The dot
// steps are per-ISA intrinsics (Q8Dot<Arch>, over kernels/int8/int8_ops_impl.h's
// dot4); scaling and accumulation are xsimd over the Arch.
#pragma once

#include "kernels/matvec/matvec_quantize_act_impl.h"
#include "kernels/matvec/matvec_rows_impl.h"
#include "kernels/matvec/matvec_x16_zmm_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// ------------------------------------------------- Q8_0 GEMM, packed panels
// For chunks of many tokens the row kernels above spend more on scaling and
// reducing than on multiplying (per 32-element group and token: one 32-byte
// dot, a conversion, a broadcast scale and an FMA). Here each tile of TR
// rows is repacked once per call, a column chunk at a time, its rows
// interleaved 4 bytes at a time so that one int32 lane holds one row: a
// register of V rows takes 8 full-width dot steps per 32-element group and
// token, then one conversion and one FMA by the rows' scales times the
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

// Group g (32 elements) of a row of type T: W[i] = d[h] * q[i] + o[h] for
// i in sub-block h (16 elements each; one d and o for the group unless
// packed_scales / packed_offsets say 2), q in [-127, 127] (Q3_K: -128 too,
// which every ISA's encoding takes: AVX-512's +128, AVX2's abs as unsigned
// and sign moved to x, sdot), with the row
// kernels' decoding primitives (not byte-wise scalar code: its byte stores
// cannot forward to the word loads that interleave the rows, so the packing
// would cost more than the products; docs/performance-log.md, "Figures
// moved out of code comments").
template <class Arch, GgmlType T>
inline void group_ints(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  o[0] = o[1] = 0.f;
  if constexpr (T == GgmlType::Q8_0) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[g];
    d[0] = h2f(ld_u16(&b.d));
    std::memcpy(q, b.qs, 32);
  } else if constexpr (has_b32_zmm_row(T)) {
    using B = Block32<T>;
    const auto& b = reinterpret_cast<const typename B::Block*>(row)[g];
    d[0] = h2f(ld_u16(&b.d));
    if constexpr (B::kHasMin) o[0] = h2f(ld_u16(&b.m));
    I8x32 v = nib16(b.qs);
    if constexpr (B::kFive) {
      std::uint32_t qh;
      std::memcpy(&qh, b.qh, 4);  // little-endian targets only, as row_q32
      v = or8(v, bits32_x10(qh));
    }
    if constexpr (B::kIq4) v = iq4nl_lookup(v);
    else if constexpr (!B::kHasMin) v = sub8(v, splat8(B::kFive ? 16 : 8));  // Q4_0's -8, Q5_0's -16
    st32(v, q);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    using B = std::conditional_t<T == GgmlType::Q4_K, BlockQ4_K, BlockQ5_K>;
    const auto& b = reinterpret_cast<const B*>(row)[g / 8];
    const int j = static_cast<int>(g % 8);  // sub-block: low (even j) or high nibbles of qs[32 (j / 2), +32)
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales_u8(b.scales, sc, mn);
    d[0] = h2f(ld_u16(&b.d)) * sc[j];
    o[0] = -h2f(ld_u16(&b.dmin)) * mn[j];
    const I8x32 v = ld32(b.qs + 32 * (j / 2));
    I8x32 r = (j & 1) ? hi_nib(v) : lo_nib(v);
    if constexpr (T == GgmlType::Q5_K) {
      const I8x32 h = ld32(b.qh);
      switch (j) {
        case 0: r = or8(r, bitplane_x10<0>(h)); break;
        case 1: r = or8(r, bitplane_x10<1>(h)); break;
        case 2: r = or8(r, bitplane_x10<2>(h)); break;
        case 3: r = or8(r, bitplane_x10<3>(h)); break;
        case 4: r = or8(r, bitplane_x10<4>(h)); break;
        case 5: r = or8(r, bitplane_x10<5>(h)); break;
        case 6: r = or8(r, bitplane_x10<6>(h)); break;
        default: r = or8(r, bitplane_x10<7>(h)); break;
      }
    }
    st32(r, q);
  } else if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K) {
    // Group g = 4 n + j: bits 2j, 2j+1 of qs[32 n + l] (l < 32), sub-block
    // scales 2g and 2g + 1; Q3_K's third bit is bit g of hmask[l].
    using B = std::conditional_t<T == GgmlType::Q2_K, BlockQ2_K, BlockQ3_K>;
    const auto& b = reinterpret_cast<const B*>(row)[g / 8];
    const int gi = static_cast<int>(g % 8);
    const I8x32 v = ld32(b.qs + 32 * (gi / 4));
    I8x32 r;
    switch (gi % 4) {
      case 0: r = crumb<0>(v); break;
      case 1: r = crumb<2>(v); break;
      case 2: r = crumb<4>(v); break;
      default: r = crumb<6>(v); break;
    }
    const float dd = h2f(ld_u16(&b.d));
    if constexpr (T == GgmlType::Q2_K) {  // q (0..3) times the 4-bit scale: 0..45
      const float dm = h2f(ld_u16(&b.dmin));
      const std::uint8_t s0 = b.scales[2 * gi], s1 = b.scales[2 * gi + 1];
      r = mul8_halves(r, s0 & 15, s1 & 15);
      d[0] = dd;
      o[0] = -dm * static_cast<float>(s0 >> 4);
      o[1] = -dm * static_cast<float>(s1 >> 4);
    } else {
      const I8x32 hm = ld32(b.hmask);
      switch (gi) {
        case 0: r = or8(r, bit_x04<0>(hm)); break;
        case 1: r = or8(r, bit_x04<1>(hm)); break;
        case 2: r = or8(r, bit_x04<2>(hm)); break;
        case 3: r = or8(r, bit_x04<3>(hm)); break;
        case 4: r = or8(r, bit_x04<4>(hm)); break;
        case 5: r = or8(r, bit_x04<5>(hm)); break;
        case 6: r = or8(r, bit_x04<6>(hm)); break;
        default: r = or8(r, bit_x04<7>(hm)); break;
      }
      // q (-4..3) times minus the scale (-31..32): -128..124, so W = -d *
      // that (the scale itself, -32..31, could make +128)
      int msc[2];
      for (int h = 0; h < 2; ++h) {  // scale k: low 4 bits in scales[k % 8], top 2 at bit 2 (k / 4) of scales[8 + k % 4]
        const int k = 2 * gi + h;
        const int lo = (b.scales[k % 8] >> (k < 8 ? 0 : 4)) & 15, hi = (b.scales[8 + k % 4] >> (2 * (k / 4))) & 3;
        msc[h] = 32 - (lo | hi << 4);
      }
      r = mul8_halves(sub8(r, splat8(4)), msc[0], msc[1]);
      d[0] = -dd;
    }
    st32(r, q);
  } else if constexpr (T == GgmlType::Q6_K) {
    // Group g = 4 n + j: the low nibbles (j < 2) or high ones of ql[64 n +
    // 32 (j % 2) + l], bits 2j, 2j+1 of qh[32 n + l]; scales 2g, 2g + 1.
    const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[g / 8];
    const int gi = static_cast<int>(g % 8), n = gi / 4, j = gi % 4;
    const I8x32 l = ld32(b.ql + 64 * n + 32 * (j % 2)), h = ld32(b.qh + 32 * n);
    I8x32 r = j < 2 ? lo_nib(l) : hi_nib(l);
    switch (j) {
      case 0: r = or8(r, q6_hi<0>(h)); break;
      case 1: r = or8(r, q6_hi<1>(h)); break;
      case 2: r = or8(r, q6_hi<2>(h)); break;
      default: r = or8(r, q6_hi<3>(h)); break;
    }
    st32(sub8(r, splat8(32)), q);
    const float dd = h2f(ld_u16(&b.d));
    d[0] = dd * static_cast<float>(b.scales[2 * gi]);
    d[1] = dd * static_cast<float>(b.scales[2 * gi + 1]);
  } else {
    static_assert(T == GgmlType::IQ4_XS);
    const auto& b = reinterpret_cast<const BlockIQ4_XS*>(row)[g / 8];
    const int j = static_cast<int>(g % 8);
    d[0] = h2f(ld_u16(&b.d)) * static_cast<float>(iq4_xs_scale(b, j));
    st32(iq4nl_lookup(nib16(b.qs + 16 * j)), q);
  }
}

// Packs rows [0, nr) of a tile (nr <= TR; the rest zero weights, zero
// scales) over groups [g0, g0 + ng) into dst (pack_group_bytes(T) * TR * ng
// bytes).
template <class Arch, GgmlType T>
void q8_pack_tile(const std::uint8_t* w, std::size_t rb, std::size_t nr, std::size_t g0, std::size_t ng,
                  std::uint8_t* dst) {
  using D = Q8Dot<Arch>;
  constexpr int TR = D::V * D::MR;
  constexpr int kS = packed_scales(T), kO = packed_offsets(T);
  constexpr std::size_t kGB = pack_group_bytes(T) * TR;
  for (std::size_t g = 0; g < ng; ++g) {
    std::uint8_t* blk = dst + g * kGB;
    float* d = reinterpret_cast<float*>(blk);  // (kS, TR)
    float* o = d + kS * TR;                    // (kO, TR)
    std::uint8_t* q = blk + 4 * (kS + kO) * TR;
    // 8 rows at a time: their groups' integers as (rows, 8) words,
    // transposed in registers (one word per row and step k), kFlip encodes:
    // word by word through scalar registers takes far more instructions
    // (docs/performance-log.md, "Figures moved out of code comments").
    const I8x32 flip = splat8(static_cast<std::int8_t>(D::kFlip & 0xff));
    for (int r0 = 0; r0 < TR; r0 += 8) {
      alignas(32) std::int8_t qi[8][32];
      I8x32 v[8];
      for (int i = 0; i < 8; ++i) {
        const int r = r0 + i;
        if (static_cast<std::size_t>(r) < nr) {
          float dr[2], orr[2];
          group_ints<Arch, T>(w + r * rb, g0 + g, qi[i], dr, orr);
          for (int h = 0; h < kS; ++h) d[h * TR + r] = dr[h];
          for (int h = 0; h < kO; ++h) o[h * TR + r] = orr[h];
          v[i] = ld32(qi[i]);
        } else {
          for (int h = 0; h < kS; ++h) d[h * TR + r] = 0.f;
          for (int h = 0; h < kO; ++h) o[h * TR + r] = 0.f;
          v[i] = splat8(0);
        }
      }
      transpose8_words(v);
      for (int k = 0; k < 8; ++k) st32(xor8(v[k], flip), q + (k * TR + r0) * 4);
    }
  }
}

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
        constexpr bool kFive = Block32<T>::kFive, kMin = Block32<T>::kHasMin, kNl = Block32<T>::kIq4;
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

// y[t] (the tile's outputs; only the first nr written) for tokens t < N over
// ng packed groups of a type with kS scales and kO offsets per group: =
// (first) or += the products. xq[t], xs[t]: token t's ActQ8 groups and
// their integer sums per 16, from the packed range's first.
// With two scales a group is two 16-element halves, each 4 dot steps then
// its own conversion and FMA (the sub-block scales differ per row, so they
// cannot fold into the activations' scale).
template <class Arch, int N, int kS, int kO>
void q8_tile_tokens(const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                    float* const* y, int nr, bool first) {
  using D = Q8Dot<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int V = D::V, MR = D::MR, TR = V * MR;
  constexpr std::size_t kGB = pack_group_bytes(kS, kO) * TR;
  static_assert(F::size == V);
  F acc[MR][N];  // (rows of the tile / V, tokens)
  alignas(64) float tmp[V];
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    for (int t = 0; t < N; ++t) {
      if (first || valid <= 0) {
        acc[m][t] = F(0.f);
      } else if (valid >= V) {
        acc[m][t] = F::load_unaligned(y[t] + m * V);
      } else {
        for (int l = 0; l < V; ++l) tmp[l] = l < valid ? y[t][m * V + l] : 0.f;
        acc[m][t] = F::load_aligned(tmp);
      }
    }
  }
  for (std::size_t g = 0; g < ng; ++g) {
    const std::uint8_t* blk = pk + g * kGB;
    const float* dw = reinterpret_cast<const float*>(blk);  // (kS, TR) scales, then (kO, TR) offsets
    const std::uint8_t* q = blk + 4 * (kS + kO) * TR;
    for (int h = 0; h < kS; ++h) {  // steps [k0, k1) of 4 bytes
      const int k0 = kS == 1 ? 0 : 4 * h, k1 = kS == 1 ? 8 : k0 + 4;
      typename D::I s[MR][N];  // int32 dots of the group (or half)
      for (int t = 0; t < N; ++t) {
        const std::int32_t xsum = kS == 1 ? xs[t][2 * g] + xs[t][2 * g + 1] : xs[t][2 * g + h];
        const typename D::I s0 = D::start(D::kOffset ? -128 * xsum : 0);
        for (int m = 0; m < MR; ++m) s[m][t] = s0;
      }
      for (int k = k0; k < k1; ++k) {
        typename D::Wv wv[MR];
        for (int m = 0; m < MR; ++m) wv[m] = D::load_w(q + (k * TR + m * V) * 4);
        for (int t = 0; t < N; ++t) {
          std::int32_t x4;
          std::memcpy(&x4, xq[t][g].qs + 4 * k, 4);
          for (int m = 0; m < MR; ++m) s[m][t] = D::dot(s[m][t], wv[m], x4);
        }
      }
      for (int m = 0; m < MR; ++m) {
        const F d = F::load_aligned(dw + h * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(F(D::to_f(s[m][t])), d * F(xq[t][g].d), acc[m][t]);
      }
    }
    if constexpr (kO == 1) {  // + o * sum(x of the group)
      for (int m = 0; m < MR; ++m) {
        const F o = F::load_aligned(dw + kS * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(o, F(xq[t][g].s), acc[m][t]);
      }
    } else if constexpr (kO == 2) {  // + o[h] * sum(x of half h)
      for (int h = 0; h < 2; ++h)
        for (int m = 0; m < MR; ++m) {
          const F o = F::load_aligned(dw + (kS + h) * TR + m * V);
          for (int t = 0; t < N; ++t)
            acc[m][t] = xsimd::fma(o, F(xq[t][g].d * static_cast<float>(xs[t][2 * g + h])), acc[m][t]);
        }
    }
  }
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    if (valid <= 0) break;
    for (int t = 0; t < N; ++t) {
      if (valid >= V) {
        acc[m][t].store_unaligned(y[t] + m * V);
      } else {
        acc[m][t].store_aligned(tmp);
        for (int l = 0; l < valid; ++l) y[t][m * V + l] = tmp[l];
      }
    }
  }
}

// q8_tile_tokens for n <= N tokens
template <class Arch, int N, int kS, int kO>
void q8_tile_upto(int n, const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                  float* const* y, int nr, bool first) {
  if constexpr (N > 1) {
    if (n < N) return q8_tile_upto<Arch, N - 1, kS, kO>(n, pk, ng, xq, xs, y, nr, first);
  }
  q8_tile_tokens<Arch, N, kS, kO>(pk, ng, xq, xs, y, nr, first);
}

// Y (n_tokens, ldy) = X W^T for W of a packed type T, the activations
// already quantized (xq: [n_tokens][cols/32] ActQ8; xs: [n_tokens][cols/16]
// their integer sums per 16). Threads take whole tiles; each packs its tile
// a column chunk at a time (kQ8PackGroups groups: 36.9 KB for 32 rows, 41
// KB with one scale and one offset, 45 KB with two and two, on the stack,
// in L1/L2) and runs every token over it before the next chunk.
constexpr std::size_t kQ8PackGroups = 32;

// kX16: w is row-interleaved (matvec.h's x16; rows a multiple of 16): packed
// straight from the tiles where uses_zmm_rows (q8_pack_x16), else each
// chunk's rows go back to the original layout on the stack first.
template <class Arch, GgmlType T, bool kX16 = false>
void q8_gemm(const std::uint8_t* w, std::size_t rb, std::size_t rows, std::size_t cols, const ActQ8* xq,
             const std::int32_t* xs, std::size_t n_tokens, float* y, std::size_t ldy, int threads) {
  using D = Q8Dot<Arch>;
  constexpr int TR = D::V * D::MR, NT = D::NT;
  static_assert(!kX16 || TR % 16 == 0);
  const std::size_t groups = cols / 32;
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>((rows + TR - 1) / TR);
  // x16 (x16_type) taken back: groups per block of the type; the chunk's rows in the original layout
  constexpr bool kPlain = kX16 && !uses_zmm_rows<Arch>();
  constexpr std::size_t kBlockGroups =
      T == GgmlType::Q4_K || T == GgmlType::Q5_K || T == GgmlType::Q6_K || T == GgmlType::IQ4_XS ? 8 : 1;
  constexpr std::size_t kBlockBytes = T == GgmlType::Q4_K     ? sizeof(BlockQ4_K)
                                      : T == GgmlType::Q5_K   ? sizeof(BlockQ5_K)
                                      : T == GgmlType::Q6_K   ? sizeof(BlockQ6_K)
                                      : T == GgmlType::IQ4_XS ? sizeof(BlockIQ4_XS)
                                      : T == GgmlType::Q5_0   ? sizeof(BlockQ5_0)
                                      : T == GgmlType::Q5_1   ? sizeof(BlockQ5_1)
                                      : T == GgmlType::Q4_1   ? sizeof(BlockQ4_1)
                                      : T == GgmlType::IQ4_NL ? sizeof(BlockIQ4_NL)
                                                              : sizeof(BlockQ4_0);
  static_assert(!kPlain || T == GgmlType::Q4_0 || T == GgmlType::IQ4_NL || T == GgmlType::Q5_0 || T == GgmlType::Q5_1 ||
                    T == GgmlType::Q4_1 || kBlockGroups == 8,
                "kBlockBytes: a type of its own");
  static_assert(kQ8PackGroups % kBlockGroups == 0);
  constexpr std::size_t kPlainBytes = kPlain ? kQ8PackGroups / kBlockGroups * kBlockBytes * TR : 1;  // (TR, chunk)
  mv_parallel_for(threads, tiles, [&](std::ptrdiff_t tile) {
    alignas(64) std::uint8_t pk[kQ8PackGroups * pack_group_bytes(T) * TR];  // one column chunk of the tile, packed
    alignas(64) std::uint8_t plain[kPlainBytes];
    const std::size_t r0 = static_cast<std::size_t>(tile) * TR;
    const int nr = static_cast<int>(mv_min(TR, rows - r0));
    // After packing a chunk, the next one's rows (TR short runs of a row
    // each, which the hardware prefetchers follow poorly) are prefetched
    // before the products, with prefetcht1 (faster with the weights in DRAM
    // than none or prefetcht0: docs/performance-log.md, "Figures moved out
    // of code comments").
    for (std::size_t g0 = 0; g0 < groups; g0 += kQ8PackGroups) {
      const std::size_t ng = mv_min(kQ8PackGroups, groups - g0);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
      if constexpr (kX16 && !kPlain) {
        q8_pack_x16<T>(w + r0 * rb, rb, static_cast<std::size_t>(nr), g0, ng, pk);
      } else
#endif
      if constexpr (kPlain) {
        const std::size_t crb = rb / (groups / kBlockGroups) * (ng / kBlockGroups);  // the chunk's bytes per row
        for (int i = 0; i < nr; i += 16)
          x16_deinterleave(T, w + (r0 + static_cast<std::size_t>(i)) * rb, g0 / kBlockGroups, ng / kBlockGroups,
                                  plain + static_cast<std::size_t>(i) * crb, crb);
        q8_pack_tile<Arch, T>(plain, crb, static_cast<std::size_t>(nr), 0, ng, pk);
      } else {
        q8_pack_tile<Arch, T>(w + r0 * rb, rb, static_cast<std::size_t>(nr), g0, ng, pk);
      }
      {  // the next chunk's rows (this tile's, or the next tile's first)
        // x16: a run of 16 rows' groups lies together, 16 times a row's
        constexpr std::size_t kStep = kX16 ? 16 : 1;
        const std::size_t gb = rb / groups * kStep;  // bytes per group (of kStep rows)
        std::size_t pr0 = r0, pg = g0 + ng, pn = static_cast<std::size_t>(nr);
        if (pg >= groups) {
          pr0 = r0 + TR;
          pg = 0;
          pn = pr0 < rows ? mv_min(TR, rows - pr0) : 0;
        }
        const std::size_t b0 = pg * gb, b1 = mv_min(groups, pg + kQ8PackGroups) * gb;
        for (std::size_t r = 0; r < pn; r += kStep) {
          const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(w + (pr0 + r) * rb);
          for (std::uintptr_t l = (a + b0) & ~std::uintptr_t{63}; l < a + b1; l += 64)
            __builtin_prefetch(reinterpret_cast<const void*>(l), 0, 2);
        }
      }
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += NT) {
        const int n = static_cast<int>(mv_min(NT, n_tokens - t0));
        const ActQ8* xa[NT];
        const std::int32_t* xi[NT];
        float* yo[NT];
        for (int k = 0; k < n; ++k) {
          xa[k] = xq + (t0 + k) * groups + g0;
          xi[k] = xs + (t0 + k) * 2 * groups + 2 * g0;
          yo[k] = y + (t0 + k) * ldy + r0;
        }
        q8_tile_upto<Arch, NT, packed_scales(T), packed_offsets(T)>(n, pk, ng, xa, xi, yo, nr, g0 == 0);
      }
    }
  });
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
