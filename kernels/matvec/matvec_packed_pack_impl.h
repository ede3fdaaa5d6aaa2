// matvec's packed int8 GEMM, the packing of weights in the original layout:
// group_ints decodes one 32-element group of a row to integers with its
// scales and offsets (a function per format family, group_ints_<family>,
// through the formats' decoders, Gguf<T> in matvec_gguf_impl.h), q8_pack_tile
// interleaves a tile's rows into the packed layout (matvec_packed_dot_impl.h).
// Per-ISA intrinsics through those layers; nothing in xsimd.
#pragma once

#include "kernels/matvec/matvec_packed_dot_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// group_ints per format: group g (32 elements) of a row as 32 integers q
// with the scales d and offsets o that group_ints (below) describes, each
// through its format's decoder (Gguf<T>).
// Q8_0 and the block-32 types (Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL): one block
// per group; *_0's offset taken into the integers.
template <class Arch, GgmlType T>
inline void group_ints_b32(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  using G = Gguf<T>;
  const auto& b = reinterpret_cast<const typename G::Block*>(row)[g];
  d[0] = h2f(ld_u16(&b.d));
  I8x32 v = G::template group<0>(b, G::bits(b));
  if constexpr (G::kHasMin) o[0] = G::offset(b, d[0]);
  else if constexpr (G::kZero != 0) v = sub8(v, splat8(G::kZero));  // Q4_0's -8, Q5_0's -16
  st32(v, q);
}

// Q4_K, Q5_K: sub-block g % 8 of block g / 8, its 6-bit scale and min
// folded into d and o.
template <class Arch, GgmlType T>
inline void group_ints_k45(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  using G = Gguf<T>;
  const auto& b = reinterpret_cast<const typename G::Block*>(row)[g / 8];
  const int j = static_cast<int>(g % 8);
  std::uint8_t sc[8], mn[8];
  G::scales(b, sc, mn);
  d[0] = h2f(ld_u16(&b.d)) * sc[j];
  o[0] = -h2f(ld_u16(&b.dmin)) * mn[j];
  st32(gguf_group<T>(b, j), q);
}

// Q2_K, Q3_K: group g % 8 of block g / 8, its two sub-blocks' scales folded
// into the integers.
template <class Arch, GgmlType T>
inline void group_ints_k23(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2], float (&o)[2]) {
  using G = Gguf<T>;
  const auto& b = reinterpret_cast<const typename G::Block*>(row)[g / 8];
  const int gi = static_cast<int>(g % 8);
  const I8x32 u = gguf_group<T>(b, gi);
  const float dd = h2f(ld_u16(&b.d));
  if constexpr (T == GgmlType::Q2_K) {  // u (0..3) times the 4-bit scale: 0..45
    const float dm = h2f(ld_u16(&b.dmin));
    const std::uint8_t s0 = b.scales[2 * gi], s1 = b.scales[2 * gi + 1];
    st32(mul8_halves(u, s0 & 15, s1 & 15), q);
    d[0] = dd;
    o[0] = -dm * static_cast<float>(s0 >> 4);
    o[1] = -dm * static_cast<float>(s1 >> 4);
  } else {
    // u - 4 (-4..3) times minus the scale (-31..32): -128..124, so W = -d *
    // that (the scale itself, -32..31, could make +128)
    std::int8_t sc[16];
    G::scale_bytes(b, sc);
    st32(mul8_halves(sub8(u, splat8(G::kZero)), -sc[2 * gi], -sc[2 * gi + 1]), q);
    d[0] = -dd;
  }
}

// Q6_K: group g % 8 of block g / 8, u - 32; its two 16-element halves keep
// their scales 2g, 2g + 1 (d[0], d[1]).
template <class Arch>
inline void group_ints_q6_k(const std::uint8_t* row, std::size_t g, std::int8_t* q, float (&d)[2]) {
  using G = Gguf<GgmlType::Q6_K>;
  const auto& b = reinterpret_cast<const BlockQ6_K*>(row)[g / 8];
  const int gi = static_cast<int>(g % 8);
  st32(sub8(gguf_group<GgmlType::Q6_K>(b, gi), splat8(G::kZero)), q);
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
  if constexpr (Gguf<T>::kGroups == 1) {
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
    st32(gguf_group<T>(b, j), q);
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
