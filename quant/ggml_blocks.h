// GGML weight block layouts (mla-spec.md section 3; byte-identical to what
// llama.cpp writes), the scalar dequantize reference for every type Latte
// reads, and quantize references (for tests, tools and the GGUF writer).
//
// All multi-byte fields are little-endian; fp16 fields are kept as raw
// uint16_t bits (convert with quant/fp16.h). Blocks inside a GGUF tensor are
// only 2-byte aligned (18-byte Q4_0 blocks), so readers must not assume more.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/ggml_types.h"

namespace latte {

inline constexpr std::size_t kQK = 32;    // elements per block of the *_0/*_1 types
inline constexpr std::size_t kQK_K = 256; // elements per K-quant super-block

// x = d * (q - 8), q = 4-bit; element j in the low nibble of qs[j], j+16 in the high.
struct BlockQ4_0 {
  std::uint16_t d;        // fp16
  std::uint8_t qs[16];
};
// x = d * q + m
struct BlockQ4_1 {
  std::uint16_t d, m;     // fp16
  std::uint8_t qs[16];
};
// x = d * (q - 16), q = 5-bit: 4 low bits as Q4_0, bit 4 of element j = bit j of qh (u32 LE).
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
// x = d * q + m, bits as Q5_0.
struct BlockQ5_1 {
  std::uint16_t d, m;
  std::uint8_t qh[4];
  std::uint8_t qs[16];
};
// x = d * q
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[32];
};
// 16 sub-blocks of 16; scales[k]: 4-bit scale (low nibble) and 4-bit min
// (high) of sub-block k; x = d*sc*q - dmin*m, q = 2-bit. qs: two halves of
// 32 bytes; in half h, bits 2j..2j+1 of byte l hold element 128h + 32j + l
// (sub-block 8h + 2j for l < 16, 8h + 2j + 1 for l >= 16).
struct BlockQ2_K {
  std::uint8_t scales[16];
  std::uint8_t qs[64];
  std::uint16_t d, dmin;  // fp16, last
};
// 16 sub-blocks of 16 with 6-bit scales stored + 32 (see q3_k_scales);
// x = d * (sc - 32) * (q - 4), q = 3-bit: the low 2 bits in qs as Q2_K's,
// bit 2 of element 128h + 32j + l is bit 4h + j of hmask[l].
struct BlockQ3_K {
  std::uint8_t hmask[32];
  std::uint8_t qs[64];
  std::uint8_t scales[12];
  std::uint16_t d;        // fp16, last
};
// 8 sub-blocks of 32, 6-bit scale and min each (packed in scales[12], see
// get_scale_min_k4); x = d*sc*q - dmin*m. qs: 4 chunks of 32 bytes, chunk c
// holds sub-block 2c in the low nibbles and 2c+1 in the high nibbles.
struct BlockQ4_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[12];
  std::uint8_t qs[128];
};
// Q4_K plus a 5th bit: bit j of qh[l] is bit 4 of element l of sub-block j.
struct BlockQ5_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[12];
  std::uint8_t qh[32];
  std::uint8_t qs[128];
};
// 16 sub-blocks of 16 with int8 scales; x = d * sc * (q - 32), q = 6-bit
// (4 low bits in ql, 2 high bits in qh; layout in dequantize_row_ref).
struct BlockQ6_K {
  std::uint8_t ql[128];
  std::uint8_t qh[64];
  std::int8_t scales[16];
  std::uint16_t d;        // last
};

// Non-linear 4-bit: x = d * kIq4nlValues[q] (q a nibble as Q4_0's).
struct BlockIQ4_NL {
  std::uint16_t d;
  std::uint8_t qs[16];
};
// IQ4_NL's values in 8 sub-blocks of 32 with 6-bit scales (stored + 32):
// x = d * (ls - 32) * kIq4nlValues[q]; ls of sub-block b: 4 low bits from
// scales_l[b / 2] (low nibble for even b), 2 high bits at bit 2b of
// scales_h; qs[16b + j]: elements 32b + j (low nibble) and 32b + 16 + j.
struct BlockIQ4_XS {
  std::uint16_t d;
  std::uint16_t scales_h;
  std::uint8_t scales_l[4];
  std::uint8_t qs[128];
};
// The 16 values IQ4_NL / IQ4_XS nibbles stand for (llama.cpp's kvalues_iq4nl).
inline constexpr std::int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                                 1,    13,   25,  38,  53,  69,  89,  113};

static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
// (Out of line on purpose: per-ISA kernel objects must not emit inline copies.)
void get_scale_min_k4(int j, const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* m);
// Inverse: packs 8 scales and 8 mins (each < 64) into scales[12].
void pack_scale_min_k4(const std::uint8_t sc[8], const std::uint8_t m[8], std::uint8_t out[12]);

// A Q3_K block's 16 sub-block scales, minus 32 (-32..31), from its 12 bytes:
// scale k has its low 4 bits in scales[k % 8] (low nibble for k < 8, high
// for k >= 8) and its top 2 bits at bit 2 * (k / 4) of scales[8 + k % 4].
void q3_k_scales(const std::uint8_t* scales12, std::int8_t out[16]);

// Bytes of a row of n elements of `type`. Throws std::invalid_argument if n is
// not a multiple of the block size or the type is not one Latte reads.
std::size_t ggml_row_bytes(GgmlType type, std::size_t n);
// Elements per block (1 for the float types).
std::size_t ggml_block_elems(GgmlType type);

// dst[0..n) = the values of n elements stored at src. Naive on purpose: the
// ground truth every kernel is tested against. n must be a multiple of the
// block size (throws std::invalid_argument otherwise).
void dequantize_row_ref(GgmlType type, const void* src, float* dst, std::size_t n);

// src[0..n) -> n elements of `type` at dst (ggml_row_bytes(type, n) bytes).
// F32/F16/BF16: conversion (round to nearest even). Q8_0/Q4_0/Q4_1/Q5_0/Q5_1:
// round-to-nearest with llama.cpp's reference scale choice. Q2_K..Q6_K:
// simple min/max (Q3_K, Q6_K: absmax) scales, no search: correct, not optimal.
// IQ4_NL / IQ4_XS: the absmax value mapped to -127, each value to the
// nearest table entry.
void quantize_row_ref(GgmlType type, const float* src, void* dst, std::size_t n);

}  // namespace latte
