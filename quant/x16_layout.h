// The row-interleaved weight layout (x16): Latte's re-layout of the GGML
// block formats for its AVX-512 VNNI tile kernels, beside the formats it is
// made from. The byte map, the one list of the types that have it, and the
// moves of one tile's blocks each way (scalar; the threads that interleave a
// whole matrix at load are the kernels' matvec_x16_interleave).
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>
#include <utility>

#include "quant/ggml_types.h"

namespace latte {

// Decode reads every weight once per token, and the row kernels above spend
// more instructions per Q4_K, Q5_K, Q6_K, IQ4_XS or block-32 4- and 5-bit weight than the
// memory needs time to deliver it: per block, a row's scales are unpacked
// in scalar code and each load feeds one row. Interleaved by 16 rows, one
// 64-byte load holds 4 bytes of each of 16 rows, a vpdpbusd against one
// broadcast activation word yields one int32 per row, and scales and mins
// are unpacked 16 rows at a time. The layout, made once (at load, in memory the caller owns):
// tile i holds rows [16i, 16i + 16) in exactly 16 * row_bytes bytes, so row
// offsets in multiples of 16 stay the original's (a 16-row-aligned slice of
// an x16 matrix is an x16 matrix); block b of the tile's rows (b < cols /
// block elements) at tile + b * 16 * block_bytes:
//   Q4_K, 2304 bytes per 256 columns:
//     u16 d[16], dmin[16]            row r's d and dmin (fp16)
//     u8  scales[12][16]             scales[j][r] = row r's scales[j]
//     u8  qs[32][16][4]              qs[k][r][j] = row r's qs[4k + j]: low
//         nibble column 64 (k / 8) + 4 (k % 8) + j, high nibble that + 32
//   Q5_0, 352 bytes per 32 columns:
//     u16 d[16]
//     u64 qh[8]                      bit 4r + j of qh[2k + h] = row r's
//         fifth bit of column 16h + 4k + j
//     u8  qs[4][16][4]               qs[k][r][j] = row r's qs[4k + j]: low
//         nibble column 4k + j, high nibble 16 + 4k + j
//   Q5_K, 2816 bytes per 256 columns: Q4_K's fields, then the fifth bits
//     u16 d[16], dmin[16]
//     u8  scales[12][16]
//     u64 qh[8][8]                   bit 4r + i of qh[j][k] = row r's fifth
//         bit of column 32j + 4k + i (bit j of its qh[4k + i])
//     u8  qs[32][16][4]              as Q4_K's
//   Q6_K, 3360 bytes per 256 columns:
//     u16 d[16]
//     i8  scales[16][16]             scales[j][r] = row r's scales[j]
//     u8  ql[32][16][4]              ql[k][r][i] = row r's ql[4k + i]
//     u8  qh[16][16][4]              qh[m][r][i] = row r's qh[4m + i]
//   IQ4_XS, 2176 bytes per 256 columns:
//     u16 d[16], scales_h[16]
//     u8  scales_l[4][16]
//     u8  qs[32][16][4]              qs[k][r][i] = row r's qs[4k + i]: low
//         nibble column 32 (k / 4) + 4 (k % 4) + i, high nibble that + 16
//   Q4_0, 288 bytes per 32 columns: Q5_0's without qh
//     u16 d[16]
//     u8  qs[4][16][4]
//   IQ4_NL, 288 bytes per 32 columns: as Q4_0
//   Q5_1, 384 bytes per 32 columns: Q5_0's with the mins
//     u16 d[16], m[16]
//     u64 qh[8]
//     u8  qs[4][16][4]
//   Q4_1, 320 bytes per 32 columns: Q5_1's without qh
//     u16 d[16], m[16]
//     u8  qs[4][16][4]
// Little-endian fields, as GGUF's. The same, as byte counts and offsets:
struct X16Q4K {
  static constexpr std::size_t kBytes = 2304, kDmin = 32, kScales = 64, kQs = 256;
};
struct X16Q5K {
  static constexpr std::size_t kBytes = 2816, kDmin = 32, kScales = 64, kQh = 256, kQs = 768;
};
struct X16Q6K {
  static constexpr std::size_t kBytes = 3360, kScales = 32, kQl = 288, kQh = 2336;
};
struct X16IQ4XS {
  static constexpr std::size_t kBytes = 2176, kScalesH = 32, kScalesL = 64, kQs = 128;
};
struct X16Q5_0 {
  static constexpr std::size_t kBytes = 352, kQh = 32, kQs = 96;
};
struct X16Q4_0 {
  static constexpr std::size_t kBytes = 288, kQs = 32;
};
struct X16IQ4NL {
  static constexpr std::size_t kBytes = 288, kQs = 32;
};
struct X16Q5_1 {
  static constexpr std::size_t kBytes = 384, kM = 32, kQh = 64, kQs = 128;
};
struct X16Q4_1 {
  static constexpr std::size_t kBytes = 320, kM = 32, kQs = 64;
};

// The types with an x16 layout: the one list (the kernels' dispatch, the
// moves and the tests all go through it). Read only in constant
// expressions in headers (template arguments): a per-ISA object that read it
// at run time would hold a weak copy (cmake/check_isa_objects.cmake).
inline constexpr GgmlType kX16Types[] = {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                                         GgmlType::IQ4_XS, GgmlType::Q5_0, GgmlType::Q4_0,
                                         GgmlType::IQ4_NL, GgmlType::Q5_1, GgmlType::Q4_1};

// True for the types in kX16Types (out of line: baseline code).
bool x16_type(GgmlType type);

namespace x16_detail {
template <GgmlType T, class F>
bool call_if(GgmlType type, F& f) {
  if (type != T) return false;
  f(std::integral_constant<GgmlType, T>{});
  return true;
}
template <class F, std::size_t... I>
bool with_type(GgmlType type, F& f, std::index_sequence<I...>) {
  return (call_if<kX16Types[I]>(type, f) || ...);
}
}  // namespace x16_detail

// f(std::integral_constant<GgmlType, type>) where `type` has an x16 layout
// (a template dispatch over kX16Types); false, f not called, elsewhere.
template <class F>
bool with_x16_type(GgmlType type, F&& f) {
  return x16_detail::with_type(type, f, std::make_index_sequence<std::size(kX16Types)>());
}

// Re-lays out the 16 rows at `rows` (row r at rows + r * rb, nb blocks each)
// as the x16 tile at `tile` (16 * rb bytes). type: an x16 type.
void x16_interleave_tile(GgmlType type, std::uint8_t* tile, const std::uint8_t* rows, std::size_t rb, std::size_t nb);
// Blocks [b0, b0 + nb) of the 16 rows of the x16 tile at `tile` in the
// original layout: row r at dst + r * dst_rb. type: an x16 type.
void x16_deinterleave(GgmlType type, const void* tile, std::size_t b0, std::size_t nb, void* dst, std::size_t dst_rb);

}  // namespace latte
