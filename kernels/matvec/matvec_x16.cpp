// matvec's row-interleaved layout (x16, matvec.h): the interleave made at
// load, its inverse (what every path without x16 kernels reads through), the
// argument checks and the reference. Baseline flags, scalar code: 4-byte
// words moved whole, so a load re-lays out gigabytes in about a second.
#include <omp.h>

#include <cstring>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"

namespace latte::kernels {

namespace {

static_assert(X16Q4K::kBytes == 16 * sizeof(BlockQ4_K) && X16Q5K::kBytes == 16 * sizeof(BlockQ5_K) &&
              X16IQ4XS::kBytes == 16 * sizeof(BlockIQ4_XS) && X16Q5_0::kBytes == 16 * sizeof(BlockQ5_0) &&
              X16Q4_0::kBytes == 16 * sizeof(BlockQ4_0));

// Q4_K and Q5_K: the same fields (X as X16Q4K or X16Q5K), Q5_K's qh bits as masks.
template <class B, class X>
void interleave_k45(const std::uint8_t* src, std::size_t src_rb, std::size_t nb, std::uint8_t* tile) {
  for (std::size_t b = 0; b < nb; ++b) {
    std::uint8_t* o = tile + b * X::kBytes;
    std::uint64_t qh[8][8] = {};
    for (std::size_t r = 0; r < 16; ++r) {
      const auto* blk = reinterpret_cast<const B*>(src + r * src_rb) + b;
      std::memcpy(o + 2 * r, &blk->d, 2);
      std::memcpy(o + X::kDmin + 2 * r, &blk->dmin, 2);
      for (std::size_t j = 0; j < 12; ++j) o[X::kScales + 16 * j + r] = blk->scales[j];
      for (std::size_t k = 0; k < 32; ++k) std::memcpy(o + X::kQs + 64 * k + 4 * r, blk->qs + 4 * k, 4);
      if constexpr (std::is_same_v<B, BlockQ5_K>)
        for (std::size_t j = 0; j < 8; ++j)
          for (std::size_t c = 0; c < 32; ++c)
            qh[j][c / 4] |= static_cast<std::uint64_t>((blk->qh[c] >> j) & 1u) << (4 * r + c % 4);
    }
    if constexpr (std::is_same_v<B, BlockQ5_K>) std::memcpy(o + X16Q5K::kQh, qh, sizeof qh);
  }
}

template <class B, class X>
void deinterleave_k45(const std::uint8_t* tile, std::size_t b0, std::size_t nb, std::uint8_t* dst,
                      std::size_t dst_rb) {
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + (b0 + b) * X::kBytes;
    std::uint64_t qh[8][8];
    if constexpr (std::is_same_v<B, BlockQ5_K>) std::memcpy(qh, p + X16Q5K::kQh, sizeof qh);
    for (std::size_t r = 0; r < 16; ++r) {
      auto* blk = reinterpret_cast<B*>(dst + r * dst_rb) + b;
      std::memcpy(&blk->d, p + 2 * r, 2);
      std::memcpy(&blk->dmin, p + X::kDmin + 2 * r, 2);
      for (std::size_t j = 0; j < 12; ++j) blk->scales[j] = p[X::kScales + 16 * j + r];
      for (std::size_t k = 0; k < 32; ++k) std::memcpy(blk->qs + 4 * k, p + X::kQs + 64 * k + 4 * r, 4);
      if constexpr (std::is_same_v<B, BlockQ5_K>)
        for (std::size_t c = 0; c < 32; ++c) {
          std::uint8_t h = 0;
          for (std::size_t j = 0; j < 8; ++j) h |= static_cast<std::uint8_t>(((qh[j][c / 4] >> (4 * r + c % 4)) & 1u) << j);
          blk->qh[c] = h;
        }
    }
  }
}

void interleave_iq4_xs(const std::uint8_t* src, std::size_t src_rb, std::size_t nb, std::uint8_t* tile) {
  for (std::size_t b = 0; b < nb; ++b) {
    std::uint8_t* o = tile + b * X16IQ4XS::kBytes;
    for (std::size_t r = 0; r < 16; ++r) {
      const auto* blk = reinterpret_cast<const BlockIQ4_XS*>(src + r * src_rb) + b;
      std::memcpy(o + 2 * r, &blk->d, 2);
      std::memcpy(o + X16IQ4XS::kScalesH + 2 * r, &blk->scales_h, 2);
      for (std::size_t j = 0; j < 4; ++j) o[X16IQ4XS::kScalesL + 16 * j + r] = blk->scales_l[j];
      for (std::size_t k = 0; k < 32; ++k) std::memcpy(o + X16IQ4XS::kQs + 64 * k + 4 * r, blk->qs + 4 * k, 4);
    }
  }
}

void deinterleave_iq4_xs(const std::uint8_t* tile, std::size_t b0, std::size_t nb, std::uint8_t* dst,
                         std::size_t dst_rb) {
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + (b0 + b) * X16IQ4XS::kBytes;
    for (std::size_t r = 0; r < 16; ++r) {
      auto* blk = reinterpret_cast<BlockIQ4_XS*>(dst + r * dst_rb) + b;
      std::memcpy(&blk->d, p + 2 * r, 2);
      std::memcpy(&blk->scales_h, p + X16IQ4XS::kScalesH + 2 * r, 2);
      for (std::size_t j = 0; j < 4; ++j) blk->scales_l[j] = p[X16IQ4XS::kScalesL + 16 * j + r];
      for (std::size_t k = 0; k < 32; ++k) std::memcpy(blk->qs + 4 * k, p + X16IQ4XS::kQs + 64 * k + 4 * r, 4);
    }
  }
}

void interleave_q5_0(const std::uint8_t* src, std::size_t src_rb, std::size_t nb, std::uint8_t* tile) {
  for (std::size_t b = 0; b < nb; ++b) {
    std::uint8_t* o = tile + b * X16Q5_0::kBytes;
    std::uint64_t qh[8] = {};
    for (std::size_t r = 0; r < 16; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ5_0*>(src + r * src_rb) + b;
      std::memcpy(o + 2 * r, &blk->d, 2);
      std::uint32_t h;
      std::memcpy(&h, blk->qh, 4);
      for (std::size_t m = 0; m < 8; ++m)  // m = 2k + half: columns 16 half + 4k + [0, 4)
        qh[m] |= static_cast<std::uint64_t>((h >> (16 * (m % 2) + 4 * (m / 2))) & 15u) << (4 * r);
      for (std::size_t k = 0; k < 4; ++k) std::memcpy(o + X16Q5_0::kQs + 64 * k + 4 * r, blk->qs + 4 * k, 4);
    }
    std::memcpy(o + X16Q5_0::kQh, qh, sizeof qh);
  }
}

void deinterleave_q5_0(const std::uint8_t* tile, std::size_t b0, std::size_t nb, std::uint8_t* dst,
                       std::size_t dst_rb) {
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + (b0 + b) * X16Q5_0::kBytes;
    std::uint64_t qh[8];
    std::memcpy(qh, p + X16Q5_0::kQh, sizeof qh);
    for (std::size_t r = 0; r < 16; ++r) {
      auto* blk = reinterpret_cast<BlockQ5_0*>(dst + r * dst_rb) + b;
      std::memcpy(&blk->d, p + 2 * r, 2);
      std::uint32_t h = 0;
      for (std::size_t m = 0; m < 8; ++m)
        h |= static_cast<std::uint32_t>((qh[m] >> (4 * r)) & 15u) << (16 * (m % 2) + 4 * (m / 2));
      std::memcpy(blk->qh, &h, 4);
      for (std::size_t k = 0; k < 4; ++k) std::memcpy(blk->qs + 4 * k, p + X16Q5_0::kQs + 64 * k + 4 * r, 4);
    }
  }
}

void interleave_q4_0(const std::uint8_t* src, std::size_t src_rb, std::size_t nb, std::uint8_t* tile) {
  for (std::size_t b = 0; b < nb; ++b) {
    std::uint8_t* o = tile + b * X16Q4_0::kBytes;
    for (std::size_t r = 0; r < 16; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ4_0*>(src + r * src_rb) + b;
      std::memcpy(o + 2 * r, &blk->d, 2);
      for (std::size_t k = 0; k < 4; ++k) std::memcpy(o + X16Q4_0::kQs + 64 * k + 4 * r, blk->qs + 4 * k, 4);
    }
  }
}

void deinterleave_q4_0(const std::uint8_t* tile, std::size_t b0, std::size_t nb, std::uint8_t* dst,
                       std::size_t dst_rb) {
  for (std::size_t b = 0; b < nb; ++b) {
    const std::uint8_t* p = tile + (b0 + b) * X16Q4_0::kBytes;
    for (std::size_t r = 0; r < 16; ++r) {
      auto* blk = reinterpret_cast<BlockQ4_0*>(dst + r * dst_rb) + b;
      std::memcpy(&blk->d, p + 2 * r, 2);
      for (std::size_t k = 0; k < 4; ++k) std::memcpy(blk->qs + 4 * k, p + X16Q4_0::kQs + 64 * k + 4 * r, 4);
    }
  }
}

}  // namespace

bool matvec_x16_type(GgmlType type) {
  return type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::IQ4_XS || type == GgmlType::Q5_0 ||
         type == GgmlType::Q4_0;
}

void matvec_x16_check_args(GgmlType type, std::size_t rows, std::size_t cols) {
  matvec_check_args(type, cols);
  if (!matvec_x16_type(type))
    throw std::invalid_argument(std::string("matvec x16: ") + ggml_type_name(type) + " has no row-interleaved layout");
  if (rows % 16 != 0)
    throw std::invalid_argument("matvec x16: " + std::to_string(rows) + " rows is not a multiple of 16");
}

void matvec_x16_interleave(GgmlType type, void* w, std::size_t rows, std::size_t cols) {
  matvec_x16_check_args(type, rows, cols);
  const std::size_t rb = ggml_row_bytes(type, cols), nb = cols / ggml_block_elems(type);
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>(rows / 16);
  // Allocated before the region: a bad_alloc inside it would end the process.
  const int team = omp_get_max_threads();
  std::vector<std::uint8_t> tmp(static_cast<std::size_t>(team) * 16 * rb);  // (team, 16 rows)
  auto* base = static_cast<std::uint8_t*>(w);
#pragma omp parallel for schedule(static) num_threads(team) if (tiles > 1)
  for (std::ptrdiff_t i = 0; i < tiles; ++i) {
    std::uint8_t* rows16 = tmp.data() + static_cast<std::size_t>(omp_get_thread_num()) * 16 * rb;
    std::uint8_t* tile = base + static_cast<std::size_t>(i) * 16 * rb;
    std::memcpy(rows16, tile, 16 * rb);
    if (type == GgmlType::Q4_K) interleave_k45<BlockQ4_K, X16Q4K>(rows16, rb, nb, tile);
    else if (type == GgmlType::Q5_K) interleave_k45<BlockQ5_K, X16Q5K>(rows16, rb, nb, tile);
    else if (type == GgmlType::IQ4_XS) interleave_iq4_xs(rows16, rb, nb, tile);
    else if (type == GgmlType::Q5_0) interleave_q5_0(rows16, rb, nb, tile);
    else interleave_q4_0(rows16, rb, nb, tile);
  }
}

void matvec_x16_deinterleave(GgmlType type, const void* tile, std::size_t b0, std::size_t nb, void* dst,
                             std::size_t dst_rb) {
  const auto* t = static_cast<const std::uint8_t*>(tile);
  auto* d = static_cast<std::uint8_t*>(dst);
  if (type == GgmlType::Q4_K) deinterleave_k45<BlockQ4_K, X16Q4K>(t, b0, nb, d, dst_rb);
  else if (type == GgmlType::Q5_K) deinterleave_k45<BlockQ5_K, X16Q5K>(t, b0, nb, d, dst_rb);
  else if (type == GgmlType::IQ4_XS) deinterleave_iq4_xs(t, b0, nb, d, dst_rb);
  else if (type == GgmlType::Q5_0) deinterleave_q5_0(t, b0, nb, d, dst_rb);
  else deinterleave_q4_0(t, b0, nb, d, dst_rb);
}

std::size_t matvec_x16_rows_offset(GgmlType type, std::size_t cols, std::size_t n_tokens) {
  return (matvec_scratch_bytes(type, cols, n_tokens) + 63) / 64 * 64;
}

std::size_t matvec_scratch_bytes_x16(GgmlType type, std::size_t cols, std::size_t n_tokens) {
  return matvec_x16_rows_offset(type, cols, n_tokens) + 16 * ggml_row_bytes(type, cols);
}

void matmul_x16_ref(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                    std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch, int threads) {
  matvec_x16_check_args(type, rows, cols);
  const std::size_t rb = ggml_row_bytes(type, cols), nb = cols / ggml_block_elems(type);
  std::vector<std::uint8_t> plain(rows * rb);  // (rows, rb) the original layout
  for (std::size_t i = 0; i < rows / 16; ++i)
    matvec_x16_deinterleave(type, static_cast<const std::uint8_t*>(w) + i * 16 * rb, 0, nb, plain.data() + i * 16 * rb,
                            rb);
  matmul_ref(type, plain.data(), rows, cols, x, ldx, n_tokens, y, ldy, scratch, threads);
}

}  // namespace latte::kernels
