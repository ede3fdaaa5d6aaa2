// The GGUF formats' decoders for this TU's architecture, over the int8
// operation layer (kernels/int8/int8_ops_impl.h): one decoder per format,
// Gguf<T>, which the row kernels, dequantization and the packed GEMM's
// packing all read their weights through. Each yields a block's 32-element
// groups as 32 integers, and its scales and mins; what a consumer does
// with the format's offset (Q4_0's -8, Q3_K's -4, Q6_K's -32, the K-quant
// mins) is its own: the rows take it through the activation sums, the
// dequantization in f32, the packing folds it into the integers.
// The K-quants' scale registers and the Q5 fifth bits are per ISA
// (matvec_gguf_{x86,neon}_impl.h), where the two register layouts differ.
// Not here: the AVX-512 rows' two-groups-a-zmm decoding and the x16 tiles
// (Latte's own interleaved layout, quant/x16_layout.h), which decode many
// rows' bytes in one 512-bit register; they take their scales from here.
#pragma once

#if defined(__AVX2__)
#include "kernels/matvec/matvec_gguf_x86_impl.h"
#elif defined(__aarch64__)
#include "kernels/matvec/matvec_gguf_neon_impl.h"
#else
#error "matvec_gguf_impl.h: no SIMD primitives for this target"
#endif

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

// byte i = 0x10 where bit j of v[i] is set (Q5_K fifth bit)
template <int j>
inline I8x32 bitplane_x10(I8x32 v) {
  if constexpr (j <= 4) return shl_and<4 - j>(v, 0x10);
  else return shr_and<j - 4>(v, 0x10);
}
// ((v >> 2k) & 3) << 4 per byte (Q6_K high bits), k = 0..3
template <int k>
inline I8x32 q6_hi(I8x32 v) {
  if constexpr (k <= 2) return shl_and<4 - 2 * k>(v, 0x30);
  else return shr_and<2>(v, 0x30);
}
// (v >> s) & 3 per byte (Q2_K / Q3_K low bits), s even < 8
template <int s>
inline I8x32 crumb(I8x32 v) {
  return shr_and<s>(v, 3);
}
// byte i = 4 where bit j of v[i] is set (Q3_K third bit)
template <int j>
inline I8x32 bit_x04(I8x32 v) {
  if constexpr (j <= 2) return shl_and<2 - j>(v, 4);
  else return shr_and<j - 2>(v, 4);
}
// IQ4_NL / IQ4_XS: nibble indices (0..15) -> their signed table values
inline I8x32 iq4nl_lookup(I8x32 idx) { return lookup16(kIq4Table, idx); }

// A Q4_K / Q5_K block's 12 bytes of 6-bit scales and mins -> bytes sc[0..7],
// mn[0..7] (sc[j] = q[j] & 63, mn[j] = q[j+4] & 63; for j + 4 the low four
// bits from q[j+8], the top two from q[j] and q[j+4]), four at a time in
// 32-bit words (little-endian targets only, as the Q5 fifth bits).
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

// ------------------------------------------------------------ the decoders
// Gguf<T>, for every quantized GGUF type T:
//   Block                 the format's block; kGroups its 32-element groups
//   Bits bits(b)          what a block's groups share, loaded once (the
//                         fifth-bit plane, Q3_K's hmask; empty elsewhere)
//   group<j>(b, bits)     group j's 32 integers, as the format stores them:
//                         unsigned fields where it has an offset or mins,
//                         signed values for Q8_0 and the IQ4 tables
// and its scales as each family below says. gguf_group<T> is group<j> at a
// run-time j.
template <GgmlType T>
struct Gguf;

struct NoBits {};
// A bit plane the groups of a block share (Q5_K's fifth bits, Q3_K's hmask)
struct PlaneBits {
  I8x32 plane;
};

// Q8_0: value = d * q, q signed (no offset: offset() is 0)
template <>
struct Gguf<GgmlType::Q8_0> {
  using Block = BlockQ8_0;
  using Bits = NoBits;
  static constexpr int kGroups = 1, kZero = 0;
  static constexpr bool kHasMin = false;
  static Bits bits(const Block&) { return {}; }
  template <int j>
  static I8x32 group(const Block& b, Bits) { return ld32(b.qs); }
  static float offset(const Block&, float) { return 0.f; }
};

// The block-32 types with 4-bit fields: value = d * u + m, u unsigned
// (kFive: with a fifth bit from qh), m = -8d / -16d (*_0: kZero 8 / 16) or
// the stored m (kHasMin); IQ4_NL: value = d * its table value (group()
// yields the table values, signed).
template <class B, bool Five, bool HasMin, bool Iq4>
struct GgufBlock32 {
  using Block = B;
  using Bits = NoBits;
  static constexpr int kGroups = 1;
  static constexpr bool kFive = Five, kHasMin = HasMin, kIq4 = Iq4;
  static constexpr int kZero = HasMin || Iq4 ? 0 : Five ? 16 : 8;
  static Bits bits(const Block&) { return {}; }
  template <int j>
  static I8x32 group(const Block& b, Bits) {
    I8x32 v = nib16(b.qs);
    if constexpr (Five) {
      std::uint32_t qh;
      std::memcpy(&qh, b.qh, 4);  // little-endian targets only
      v = or8(v, bits32_x10(qh));
    }
    if constexpr (Iq4) v = iq4nl_lookup(v);
    return v;
  }
  // the offset m of value = d * u + m (0 for IQ4_NL)
  static float offset(const Block& b, float d) {
    if constexpr (HasMin) return h2f(ld_u16(&b.m));
    else if constexpr (Iq4) return 0.f;
    else return -static_cast<float>(kZero) * d;
  }
};
template <>
struct Gguf<GgmlType::Q4_0> : GgufBlock32<BlockQ4_0, false, false, false> {};
template <>
struct Gguf<GgmlType::Q4_1> : GgufBlock32<BlockQ4_1, false, true, false> {};
template <>
struct Gguf<GgmlType::Q5_0> : GgufBlock32<BlockQ5_0, true, false, false> {};
template <>
struct Gguf<GgmlType::Q5_1> : GgufBlock32<BlockQ5_1, true, true, false> {};
template <>
struct Gguf<GgmlType::IQ4_NL> : GgufBlock32<BlockIQ4_NL, false, false, true> {};
// The types GgufBlock32 describes (each with a two-groups-a-zmm decode row).
constexpr bool has_b32_zmm_row(GgmlType t) {
  return t == GgmlType::Q4_0 || t == GgmlType::Q4_1 || t == GgmlType::Q5_0 || t == GgmlType::Q5_1 ||
         t == GgmlType::IQ4_NL;
}

// Q4_K / Q5_K: group j (sub-block j) = d * sc[j] * u - dmin * mn[j], u the
// low (even j) or high nibbles of qs[32 (j / 2), +32), Q5_K's fifth bit
// from bit plane j of qh; sc, mn: unpack_k4_scales_u8.
template <class B, bool Five>
struct GgufK45 {
  using Block = B;
  using Bits = std::conditional_t<Five, PlaneBits, NoBits>;
  static constexpr int kGroups = 8;
  static constexpr bool kFive = Five;
  static Bits bits(const Block& b) {
    if constexpr (Five) return PlaneBits{ld32(b.qh)};
    else return NoBits{};
  }
  template <int j>
  static I8x32 group(const Block& b, const Bits& h) {
    const I8x32 v = ld32(b.qs + 32 * (j / 2));
    I8x32 u = (j & 1) ? hi_nib(v) : lo_nib(v);
    if constexpr (Five) u = or8(u, bitplane_x10<j>(h.plane));
    return u;
  }
  static void scales(const Block& b, std::uint8_t* sc, std::uint8_t* mn) { unpack_k4_scales_u8(b.scales, sc, mn); }
};
template <>
struct Gguf<GgmlType::Q4_K> : GgufK45<BlockQ4_K, false> {};
template <>
struct Gguf<GgmlType::Q5_K> : GgufK45<BlockQ5_K, true> {};

// Q2_K / Q3_K: group g = 4h + j, bits 2j, 2j + 1 of qs[32h, +32) (u: 0..3),
// Q3_K's third bit from bit plane g of hmask (u: 0..7); its halves are
// sub-blocks 2g and 2g + 1 (16 each). Q2_K: value = d * sc[k] * u - dmin *
// mn[k], sc and mn the low and high nibbles of scales[k]. Q3_K: value = d *
// sc[k] * (u - 4), sc signed (scale_bytes).
template <class B, bool Q3>
struct GgufK23 {
  using Block = B;
  using Bits = std::conditional_t<Q3, PlaneBits, NoBits>;
  static constexpr int kGroups = 8;
  static Bits bits(const Block& b) {
    if constexpr (Q3) return PlaneBits{ld32(b.hmask)};
    else return NoBits{};
  }
  template <int g>
  static I8x32 group(const Block& b, const Bits& h) {
    I8x32 u = crumb<2 * (g % 4)>(ld32(b.qs + 32 * (g / 4)));
    if constexpr (Q3) u = or8(u, bit_x04<g>(h.plane));
    return u;
  }
};
template <>
struct Gguf<GgmlType::Q2_K> : GgufK23<BlockQ2_K, false> {};
template <>
struct Gguf<GgmlType::Q3_K> : GgufK23<BlockQ3_K, true> {
  static constexpr int kZero = 4;
  // the 16 scales (-32..31), through this ISA's scale register
  static void scale_bytes(const Block& b, std::int8_t* sc) { q3k_scale_bytes(b.scales, sc); }
};

// Q6_K: group g = 4n + j, the low (j < 2) or high nibbles of ql[64n + 32 (j
// % 2), +32) with bits 2j, 2j + 1 of qh[32n, +32) as bits 4-5 (u: 0..63);
// value = d * scales[k] * (u - 32), its halves sub-blocks 2g and 2g + 1.
template <>
struct Gguf<GgmlType::Q6_K> {
  using Block = BlockQ6_K;
  using Bits = NoBits;
  static constexpr int kGroups = 8, kZero = 32;
  static Bits bits(const Block&) { return {}; }
  template <int g>
  static I8x32 group(const Block& b, Bits) { return half_group<g % 4>(b, g / 4); }
  // group 4n + j at a run-time half n (the row kernels' loop over halves)
  template <int j>
  static I8x32 half_group(const Block& b, int n) {
    const I8x32 l = ld32(b.ql + 64 * n + 32 * (j % 2));
    return or8(j < 2 ? lo_nib(l) : hi_nib(l), q6_hi<j>(ld32(b.qh + 32 * n)));
  }
};

// IQ4_XS: group j = d * (iq4_xs_scale(b, j)) * its table values (signed).
template <>
struct Gguf<GgmlType::IQ4_XS> {
  using Block = BlockIQ4_XS;
  using Bits = NoBits;
  static constexpr int kGroups = 8;
  static Bits bits(const Block&) { return {}; }
  template <int j>
  static I8x32 group(const Block& b, Bits) { return iq4nl_lookup(nib16(b.qs + 16 * j)); }
};

// f(std::integral_constant<int, j>) for a run-time j < 8
template <class F>
__attribute__((always_inline)) inline decltype(auto) with_group(int j, F&& f) {
  switch (j) {
    case 0: return f(std::integral_constant<int, 0>{});
    case 1: return f(std::integral_constant<int, 1>{});
    case 2: return f(std::integral_constant<int, 2>{});
    case 3: return f(std::integral_constant<int, 3>{});
    case 4: return f(std::integral_constant<int, 4>{});
    case 5: return f(std::integral_constant<int, 5>{});
    case 6: return f(std::integral_constant<int, 6>{});
    default: return f(std::integral_constant<int, 7>{});
  }
}
// group j of block b at a run-time j
template <GgmlType T>
inline I8x32 gguf_group(const typename Gguf<T>::Block& b, int j) {
  using G = Gguf<T>;
  if constexpr (G::kGroups == 1) return G::template group<0>(b, G::bits(b));
  else return with_group(j, [&](auto j_) { return G::template group<decltype(j_)::value>(b, G::bits(b)); });
}

}  // namespace

// fn(std::integral_constant<GgmlType, type>{}): a run-time type to a
// compile-time one, the one switch over the weight types (the row kernels
// and the dequantization dispatch through it).
template <class Arch, class Fn>
void with_type(GgmlType type, Fn&& fn) {
  switch (type) {
    case GgmlType::F32: return fn(std::integral_constant<GgmlType, GgmlType::F32>{});
    case GgmlType::F16: return fn(std::integral_constant<GgmlType, GgmlType::F16>{});
    case GgmlType::BF16: return fn(std::integral_constant<GgmlType, GgmlType::BF16>{});
    case GgmlType::Q8_0: return fn(std::integral_constant<GgmlType, GgmlType::Q8_0>{});
    case GgmlType::Q4_0: return fn(std::integral_constant<GgmlType, GgmlType::Q4_0>{});
    case GgmlType::Q4_1: return fn(std::integral_constant<GgmlType, GgmlType::Q4_1>{});
    case GgmlType::Q5_0: return fn(std::integral_constant<GgmlType, GgmlType::Q5_0>{});
    case GgmlType::Q5_1: return fn(std::integral_constant<GgmlType, GgmlType::Q5_1>{});
    case GgmlType::Q2_K: return fn(std::integral_constant<GgmlType, GgmlType::Q2_K>{});
    case GgmlType::Q3_K: return fn(std::integral_constant<GgmlType, GgmlType::Q3_K>{});
    case GgmlType::Q4_K: return fn(std::integral_constant<GgmlType, GgmlType::Q4_K>{});
    case GgmlType::Q5_K: return fn(std::integral_constant<GgmlType, GgmlType::Q5_K>{});
    case GgmlType::Q6_K: return fn(std::integral_constant<GgmlType, GgmlType::Q6_K>{});
    case GgmlType::IQ4_NL: return fn(std::integral_constant<GgmlType, GgmlType::IQ4_NL>{});
    case GgmlType::IQ4_XS: return fn(std::integral_constant<GgmlType, GgmlType::IQ4_XS>{});
  }
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
