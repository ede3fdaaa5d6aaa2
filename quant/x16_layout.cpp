// The x16 layout's moves (x16_layout.h): one table of byte fields per type
// and one move each way, so interleaving and its inverse cannot disagree.
// Scalar code: 4-byte words moved whole, so a load re-lays out gigabytes in
// about a second.
#include "quant/x16_layout.h"

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "quant/ggml_blocks.h"

namespace latte {

namespace {

static_assert(X16Q4K::kBytes == 16 * sizeof(BlockQ4_K) && X16Q5K::kBytes == 16 * sizeof(BlockQ5_K) &&
              X16Q6K::kBytes == 16 * sizeof(BlockQ6_K) &&
              X16IQ4XS::kBytes == 16 * sizeof(BlockIQ4_XS) && X16Q5_0::kBytes == 16 * sizeof(BlockQ5_0) &&
              X16Q4_0::kBytes == 16 * sizeof(BlockQ4_0) && X16IQ4NL::kBytes == 16 * sizeof(BlockIQ4_NL) &&
              X16Q5_1::kBytes == 16 * sizeof(BlockQ5_1) && X16Q4_1::kBytes == 16 * sizeof(BlockQ4_1));

// A field of a row's block as the tile lays it out: `count` pieces of
// `piece` bytes at byte `row` of the row's block; row r's piece
// k at byte tile + k * stride + piece * r of the tile's block.
struct Field {
  std::size_t row, piece, count, tile, stride;
};

// One type's x16 format (x16_layout.h): its byte fields; the fifth bits of
// Q5_K, Q5_0 and Q5_1 the tile transposes (move_qh). kFormat<type>: one per
// type of kX16Types (a type without one does not compile).
struct Format {
  GgmlType type;
  std::size_t block, tile_block;  // bytes of a row's block, of the tile's (16 rows)
  Field fields[4];
  std::size_t n_fields;
};
template <GgmlType type>
constexpr Format kFormat = {};

template <>
constexpr Format kFormat<GgmlType::Q4_K>{
    GgmlType::Q4_K, sizeof(BlockQ4_K), X16Q4K::kBytes,
    {{offsetof(BlockQ4_K, d), 2, 1, 0, 0},
     {offsetof(BlockQ4_K, dmin), 2, 1, X16Q4K::kDmin, 0},
     {offsetof(BlockQ4_K, scales), 1, 12, X16Q4K::kScales, 16},
     {offsetof(BlockQ4_K, qs), 4, 32, X16Q4K::kQs, 64}},
    4};
template <>
constexpr Format kFormat<GgmlType::Q5_K>{
    GgmlType::Q5_K, sizeof(BlockQ5_K), X16Q5K::kBytes,
    {{offsetof(BlockQ5_K, d), 2, 1, 0, 0},
     {offsetof(BlockQ5_K, dmin), 2, 1, X16Q5K::kDmin, 0},
     {offsetof(BlockQ5_K, scales), 1, 12, X16Q5K::kScales, 16},
     {offsetof(BlockQ5_K, qs), 4, 32, X16Q5K::kQs, 64}},
    4};
template <>
constexpr Format kFormat<GgmlType::Q6_K>{
    GgmlType::Q6_K, sizeof(BlockQ6_K), X16Q6K::kBytes,
    {{offsetof(BlockQ6_K, d), 2, 1, 0, 0},
     {offsetof(BlockQ6_K, scales), 1, 16, X16Q6K::kScales, 16},
     {offsetof(BlockQ6_K, ql), 4, 32, X16Q6K::kQl, 64},
     {offsetof(BlockQ6_K, qh), 4, 16, X16Q6K::kQh, 64}},
    4};
template <>
constexpr Format kFormat<GgmlType::IQ4_XS>{
    GgmlType::IQ4_XS, sizeof(BlockIQ4_XS), X16IQ4XS::kBytes,
    {{offsetof(BlockIQ4_XS, d), 2, 1, 0, 0},
     {offsetof(BlockIQ4_XS, scales_h), 2, 1, X16IQ4XS::kScalesH, 0},
     {offsetof(BlockIQ4_XS, scales_l), 1, 4, X16IQ4XS::kScalesL, 16},
     {offsetof(BlockIQ4_XS, qs), 4, 32, X16IQ4XS::kQs, 64}},
    4};
template <>
constexpr Format kFormat<GgmlType::Q5_0>{
    GgmlType::Q5_0, sizeof(BlockQ5_0), X16Q5_0::kBytes,
    {{offsetof(BlockQ5_0, d), 2, 1, 0, 0}, {offsetof(BlockQ5_0, qs), 4, 4, X16Q5_0::kQs, 64}},
    2};
template <>
constexpr Format kFormat<GgmlType::Q4_0>{
    GgmlType::Q4_0, sizeof(BlockQ4_0), X16Q4_0::kBytes,
    {{offsetof(BlockQ4_0, d), 2, 1, 0, 0}, {offsetof(BlockQ4_0, qs), 4, 4, X16Q4_0::kQs, 64}},
    2};
template <>
constexpr Format kFormat<GgmlType::IQ4_NL>{
    GgmlType::IQ4_NL, sizeof(BlockIQ4_NL), X16IQ4NL::kBytes,
    {{offsetof(BlockIQ4_NL, d), 2, 1, 0, 0}, {offsetof(BlockIQ4_NL, qs), 4, 4, X16IQ4NL::kQs, 64}},
    2};
template <>
constexpr Format kFormat<GgmlType::Q5_1>{
    GgmlType::Q5_1, sizeof(BlockQ5_1), X16Q5_1::kBytes,
    {{offsetof(BlockQ5_1, d), 2, 1, 0, 0},
     {offsetof(BlockQ5_1, m), 2, 1, X16Q5_1::kM, 0},
     {offsetof(BlockQ5_1, qs), 4, 4, X16Q5_1::kQs, 64}},
    3};
template <>
constexpr Format kFormat<GgmlType::Q4_1>{
    GgmlType::Q4_1, sizeof(BlockQ4_1), X16Q4_1::kBytes,
    {{offsetof(BlockQ4_1, d), 2, 1, 0, 0},
     {offsetof(BlockQ4_1, m), 2, 1, X16Q4_1::kM, 0},
     {offsetof(BlockQ4_1, qs), 4, 4, X16Q4_1::kQs, 64}},
    3};

// Bit j of each of 8 bytes (x little-endian) as 8 bits, and its inverse:
// bit i of b as byte i (0 or 1).
inline std::uint64_t gather_bit(std::uint64_t x, unsigned j) {
  return (((x >> j) & 0x0101010101010101u) * 0x0102040810204080u) >> 56;
}
inline std::uint64_t spread_bits(std::uint64_t b) {
  return ((((b * 0x0101010101010101u) & 0x8040201008040201u) + 0x7F7F7F7F7F7F7F7Fu) >> 7) & 0x0101010101010101u;
}

// Interleaving writes the tile's bytes, reading the rows'; deinterleaving
// the other way round. (Below, the formats and fields are template
// arguments: the loops unrolled, each piece constant-sized.)
template <bool kToTile>
using TileByte = std::conditional_t<kToTile, std::uint8_t, const std::uint8_t>;
template <bool kToTile>
using RowByte = std::conditional_t<kToTile, const std::uint8_t, std::uint8_t>;

// The high bits of 16 rows' blocks (row r's at blk + r * rb) to (kToTile)
// or from the tile's block `t`, which holds them as 64-bit masks of 4 bits
// a row: Q5_K's bit j of qh[c] at bit 4r + c % 4 of mask [j][c / 4]; Q5_0's
// (and Q5_1's) bits 16h + 4k + [0, 4) of qh at bits 4r + [0, 4) of mask 2k + h.
template <GgmlType type, bool kToTile>
void move_qh(TileByte<kToTile>* t, RowByte<kToTile>* blk, std::size_t rb) {
  if constexpr (type == GgmlType::Q5_K) {
    std::uint64_t masks[8][8] = {}, bytes[4];  // [j][c / 4]; a row's qh[32] as 4 words
    if constexpr (!kToTile) std::memcpy(masks, t + X16Q5K::kQh, sizeof masks);
    for (std::size_t r = 0; r < 16; ++r) {
      RowByte<kToTile>* qh = blk + r * rb + offsetof(BlockQ5_K, qh);
      if constexpr (kToTile) {
        std::memcpy(bytes, qh, sizeof bytes);
        for (unsigned j = 0; j < 8; ++j) {
          std::uint64_t v = 0;  // bit c: bit j of qh[c]
          for (unsigned w = 0; w < 4; ++w) v |= gather_bit(bytes[w], j) << (8 * w);
          for (unsigned k = 0; k < 8; ++k) masks[j][k] |= ((v >> (4 * k)) & 15u) << (4 * r);
        }
      } else {
        std::memset(bytes, 0, sizeof bytes);
        for (unsigned j = 0; j < 8; ++j) {
          std::uint64_t v = 0;
          for (unsigned k = 0; k < 8; ++k) v |= ((masks[j][k] >> (4 * r)) & 15u) << (4 * k);
          for (unsigned w = 0; w < 4; ++w) bytes[w] |= spread_bits((v >> (8 * w)) & 0xFFu) << j;
        }
        std::memcpy(qh, bytes, sizeof bytes);
      }
    }
    if constexpr (kToTile) std::memcpy(t + X16Q5K::kQh, masks, sizeof masks);
  } else {
    static_assert(type == GgmlType::Q5_0 || type == GgmlType::Q5_1);
    constexpr std::size_t kTileQh = type == GgmlType::Q5_0 ? X16Q5_0::kQh : X16Q5_1::kQh,
                          kRowQh = type == GgmlType::Q5_0 ? offsetof(BlockQ5_0, qh) : offsetof(BlockQ5_1, qh);
    std::uint64_t masks[8] = {};
    if constexpr (!kToTile) std::memcpy(masks, t + kTileQh, sizeof masks);
    for (std::size_t r = 0; r < 16; ++r) {
      RowByte<kToTile>* qh = blk + r * rb + kRowQh;
      std::uint32_t h = 0;
      if constexpr (kToTile) std::memcpy(&h, qh, 4);
      for (unsigned m = 0; m < 8; ++m) {
        const unsigned at = 16 * (m % 2) + 4 * (m / 2);
        if constexpr (kToTile) masks[m] |= static_cast<std::uint64_t>((h >> at) & 15u) << (4 * r);
        else h |= static_cast<std::uint32_t>((masks[m] >> (4 * r)) & 15u) << at;
      }
      if constexpr (!kToTile) std::memcpy(qh, &h, 4);
    }
    if constexpr (kToTile) std::memcpy(t + kTileQh, masks, sizeof masks);
  }
}

// Field I of f, of row r's block `blk`, to or from the tile's block `t`.
template <const Format& f, std::size_t I, bool kToTile>
void move_field(TileByte<kToTile>* t, RowByte<kToTile>* blk, std::size_t r) {
  constexpr Field d = f.fields[I];
  for (std::size_t k = 0; k < d.count; ++k) {
    TileByte<kToTile>* in_tile = t + d.tile + d.stride * k + d.piece * r;
    RowByte<kToTile>* in_row = blk + d.row + d.piece * k;
    if constexpr (kToTile) std::memcpy(in_tile, in_row, d.piece);
    else std::memcpy(in_row, in_tile, d.piece);
  }
}

// Blocks [b0, b0 + nb) between 16 rows (row r at rows + r * rb, block b
// at its b * f.block) and the x16 tile's blocks, one way or the other.
template <const Format& f, bool kToTile, std::size_t... I>
void move_blocks(TileByte<kToTile>* tile, std::size_t b0, std::size_t nb, RowByte<kToTile>* rows, std::size_t rb,
                 std::index_sequence<I...>) {
  for (std::size_t b = 0; b < nb; ++b) {
    TileByte<kToTile>* t = tile + (b0 + b) * f.tile_block;
    for (std::size_t r = 0; r < 16; ++r) (move_field<f, I, kToTile>(t, rows + r * rb + b * f.block, r), ...);
    if constexpr (f.type == GgmlType::Q5_K || f.type == GgmlType::Q5_0 || f.type == GgmlType::Q5_1)
      move_qh<f.type, kToTile>(t, rows + b * f.block, rb);
  }
}

template <const Format& f, bool kToTile>
void move_blocks(TileByte<kToTile>* tile, std::size_t b0, std::size_t nb, RowByte<kToTile>* rows, std::size_t rb) {
  move_blocks<f, kToTile>(tile, b0, nb, rows, rb, std::make_index_sequence<f.n_fields>());
}

// The tile at `tile`'s blocks [b0, b0 + nb) to or from 16 rows, for an x16
// type.
template <bool kToTile>
void move(GgmlType type, TileByte<kToTile>* tile, std::size_t b0, std::size_t nb, RowByte<kToTile>* rows,
          std::size_t rb) {
  if (!with_x16_type(type, [&](auto T) { move_blocks<kFormat<T.value>, kToTile>(tile, b0, nb, rows, rb); }))
    throw std::invalid_argument(std::string("x16: ") + ggml_type_name(type) + " has no row-interleaved layout");
}
}  // namespace

bool x16_type(GgmlType type) {
  return with_x16_type(type, [](auto) {});
}

void x16_interleave_tile(GgmlType type, std::uint8_t* tile, const std::uint8_t* rows, std::size_t rb, std::size_t nb) {
  move<true>(type, tile, 0, nb, rows, rb);
}

void x16_deinterleave(GgmlType type, const void* tile, std::size_t b0, std::size_t nb, void* dst, std::size_t dst_rb) {
  move<false>(type, static_cast<const std::uint8_t*>(tile), b0, nb, static_cast<std::uint8_t*>(dst), dst_rb);
}

}  // namespace latte
