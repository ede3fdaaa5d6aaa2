// matvec's packed int8 GEMM, the packing of weights in the original layout:
// group_ints decodes one 32-element group of a row to integers with its
// scales and offsets (a function per format, group_ints_<format>, over
// the GGUF decoders of matvec_gguf_impl.h and the int8 layer), q8_pack_tile
// interleaves a tile's rows into the packed layout (matvec_packed_dot_impl.h).
// Per-ISA intrinsics through those layers; nothing in xsimd.
#pragma once

#include "kernels/matvec/matvec_packed_dot_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// group_ints per format: group g (32 elements) of a row as 32 integers q
// with the scales d and offsets o that group_ints (below) describes.
// Q8_0 and the block-32 types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): one block
// per group.
template <class Arch, GgmlType T>
inline void group_ints_b32(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  if constexpr (T == GgmlType::Q8_0) {
    const auto& b = reinterpret_cast<const BlockQ8_0*>(row)[g];
    d[0] = h2f(ld_u16(&b.d));
    std::memcpy(q, b.qs, 32);
  } else {
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
  }
}

// Q4_K, Q5_K: sub-block g % 8 of block g / 8, its 6-bit scale and min
// folded into d and o.
template <class Arch, GgmlType T>
inline void group_ints_k45(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
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
}

// Q2_K, Q3_K: group g = 4 n + j of a block is bits 2j, 2j+1 of qs[32 n +
// l] (l < 32), sub-block scales 2g and 2g + 1 folded into the integers;
// Q3_K's third bit is bit g of hmask[l].
template <class Arch, GgmlType T>
inline void group_ints_k23(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
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
}

// Q6_K: group g = 4 n + j of a block is the low nibbles (j < 2) or high
// ones of ql[64 n + 32 (j % 2) + l], bits 2j, 2j+1 of qh[32 n + l]; its
// two 16-element halves keep their scales 2g, 2g + 1 (d[0], d[1]).
template <class Arch>
inline void group_ints_q6_k(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2]) {
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
}

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
  if constexpr (T == GgmlType::Q8_0 || has_b32_zmm_row(T)) {
    group_ints_b32<Arch, T>(row, g, q, d, o);
  } else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) {
    group_ints_k45<Arch, T>(row, g, q, d, o);
  } else if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K) {
    group_ints_k23<Arch, T>(row, g, q, d, o);
  } else if constexpr (T == GgmlType::Q6_K) {
    group_ints_q6_k<Arch>(row, g, q, d);
  } else {  // IQ4_XS: sub-block g % 8 of block g / 8, its scale folded into d
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

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
