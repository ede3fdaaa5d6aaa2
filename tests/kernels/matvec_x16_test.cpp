// matvec's row-interleaved layout (x16): the interleave's inverse gives the
// bytes back, the layout is the one matvec.h documents, and every ISA's
// matmul_x16 (tile kernels, the packed GEMM's path and the fallback) agrees
// with the reference on any bit pattern, any token count and thread split.
#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>


#include "kernels/matvec/matvec.h"
#include "platform/thread_pool.h"
#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/common/kernel_regions.h"

namespace latte::kernels {
namespace {

// rows x cols of random bytes with finite fp16 scales (d in [-0.05, 0.05],
// the K-quants' dmin in [0, 0.025], Q4_1's and Q5_1's m in [-0.0125,
// 0.0125]): every integer, scale and min pattern a file can hold.
std::vector<std::uint8_t> random_matrix(GgmlType t, std::size_t rows, std::size_t cols, std::uint64_t seed) {
  const std::size_t rb = ggml_row_bytes(t, cols), bb = ggml_row_bytes(t, ggml_block_elems(t));
  const std::size_t nblk = rows * rb / bb;
  auto r = test::random_vector(rows * rb + 2 * nblk, seed, 0.f, 256.f);
  std::vector<std::uint8_t> w(rows * rb);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<std::uint8_t>(r[i]);
  for (std::size_t b = 0; b < nblk; ++b) {
    std::uint8_t* blk = w.data() + b * bb;
    const std::uint16_t d = f32_to_fp16((r[w.size() + 2 * b] - 128.f) / 2560.f);
    std::memcpy(blk + (t == GgmlType::Q6_K ? offsetof(BlockQ6_K, d) : 0), &d, 2);  // d first in the others
    if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) {
      static_assert(offsetof(BlockQ4_K, dmin) == offsetof(BlockQ5_K, dmin));
      const std::uint16_t m = f32_to_fp16(r[w.size() + 2 * b + 1] / 10240.f);
      std::memcpy(blk + offsetof(BlockQ4_K, dmin), &m, 2);
    }
    if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) {
      static_assert(offsetof(BlockQ4_1, m) == offsetof(BlockQ5_1, m));
      const std::uint16_t m = f32_to_fp16((r[w.size() + 2 * b + 1] - 128.f) / 10240.f);
      std::memcpy(blk + offsetof(BlockQ4_1, m), &m, 2);
    }
  }
  return w;
}

std::vector<std::uint8_t> interleaved(GgmlType t, std::vector<std::uint8_t> w, std::size_t rows, std::size_t cols) {
  test::x16_interleave(t, w.data(), rows, cols);
  return w;
}

bool k_quant(GgmlType t) { return ggml_block_elems(t) == 256; }

TEST(MatvecX16, DeinterleaveGivesTheBytesBack) {
  for (GgmlType t : kX16Types) {
    const std::size_t rows = 48, cols = k_quant(t) ? 768 : 224;
    const std::size_t rb = ggml_row_bytes(t, cols), nb = cols / ggml_block_elems(t);
    const auto w = random_matrix(t, rows, cols, 5);
    const auto x = interleaved(t, w, rows, cols);
    EXPECT_NE(x, w) << ggml_type_name(t);
    std::vector<std::uint8_t> back(w.size(), 0xAB);
    for (std::size_t i = 0; i < rows / 16; ++i)
      x16_deinterleave(t, x.data() + i * 16 * rb, 0, nb, back.data() + i * 16 * rb, rb);
    EXPECT_EQ(back, w) << ggml_type_name(t);
    // A column range alone: blocks [1, 3) of the second tile
    std::vector<std::uint8_t> part(16 * 2 * rb / nb);
    const std::size_t prb = part.size() / 16;
    x16_deinterleave(t, x.data() + 16 * rb, 1, 2, part.data(), prb);
    for (std::size_t r = 0; r < 16; ++r)
      EXPECT_EQ(std::memcmp(part.data() + r * prb, w.data() + (16 + r) * rb + rb / nb, prb), 0) << "row " << r;
  }
}

// The layout matvec.h documents, byte for byte at a few places.
TEST(MatvecX16, LayoutAsDocumented) {
  {
    const std::size_t rows = 32, cols = 512, rb = ggml_row_bytes(GgmlType::Q4_K, cols);
    const auto w = random_matrix(GgmlType::Q4_K, rows, cols, 6);
    const auto x = interleaved(GgmlType::Q4_K, w, rows, cols);
    // tile 1, block 1, row 5 (row 21 of the matrix)
    const auto& b = reinterpret_cast<const BlockQ4_K*>(w.data() + 21 * rb)[1];
    const std::uint8_t* p = x.data() + 16 * rb + 2304;
    EXPECT_EQ(std::memcmp(p + 2 * 5, &b.d, 2), 0);
    EXPECT_EQ(std::memcmp(p + 32 + 2 * 5, &b.dmin, 2), 0);
    for (int j = 0; j < 12; ++j) EXPECT_EQ(p[64 + 16 * j + 5], b.scales[j]) << "scales " << j;
    for (int k = 0; k < 32; ++k) EXPECT_EQ(std::memcmp(p + 256 + 64 * k + 4 * 5, b.qs + 4 * k, 4), 0) << "qs " << k;
  }
  {
    const std::size_t rows = 16, cols = 96, rb = ggml_row_bytes(GgmlType::Q5_0, cols);
    const auto w = random_matrix(GgmlType::Q5_0, rows, cols, 7);
    const auto x = interleaved(GgmlType::Q5_0, w, rows, cols);
    for (std::size_t r : {0, 9, 15}) {  // group 2 of rows 0, 9, 15
      const auto& b = reinterpret_cast<const BlockQ5_0*>(w.data() + r * rb)[2];
      const std::uint8_t* p = x.data() + 2 * 352;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      std::uint32_t h;
      std::memcpy(&h, b.qh, 4);
      for (int k = 0; k < 4; ++k)
        for (int half = 0; half < 2; ++half)
          for (int j = 0; j < 4; ++j) {
            std::uint64_t m;
            std::memcpy(&m, p + 32 + 8 * (2 * k + half), 8);
            EXPECT_EQ((m >> (4 * r + j)) & 1, (h >> (16 * half + 4 * k + j)) & 1) << r << " " << k << " " << j;
          }
      for (int k = 0; k < 4; ++k) EXPECT_EQ(std::memcmp(p + 96 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0);
    }
  }
  {
    const std::size_t rows = 16, cols = 512, rb = ggml_row_bytes(GgmlType::Q5_K, cols);
    const auto w = random_matrix(GgmlType::Q5_K, rows, cols, 9);
    const auto x = interleaved(GgmlType::Q5_K, w, rows, cols);
    for (std::size_t r : {0, 11, 15}) {  // block 1 of rows 0, 11, 15
      const auto& b = reinterpret_cast<const BlockQ5_K*>(w.data() + r * rb)[1];
      const std::uint8_t* p = x.data() + 2816;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      EXPECT_EQ(std::memcmp(p + 32 + 2 * r, &b.dmin, 2), 0);
      for (int j = 0; j < 12; ++j) EXPECT_EQ(p[64 + 16 * j + r], b.scales[j]) << "scales " << j;
      for (int j = 0; j < 8; ++j)
        for (int k = 0; k < 8; ++k) {
          std::uint64_t m;
          std::memcpy(&m, p + 256 + 8 * (8 * j + k), 8);
          for (int i = 0; i < 4; ++i)
            EXPECT_EQ((m >> (4 * r + i)) & 1, (b.qh[4 * k + i] >> j) & 1u) << r << " " << j << " " << k << " " << i;
        }
      for (int k = 0; k < 32; ++k) EXPECT_EQ(std::memcmp(p + 768 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0) << "qs " << k;
    }
  }
  {
    const std::size_t rows = 32, cols = 512, rb = ggml_row_bytes(GgmlType::Q6_K, cols);
    const auto w = random_matrix(GgmlType::Q6_K, rows, cols, 14);
    const auto x = interleaved(GgmlType::Q6_K, w, rows, cols);
    for (std::size_t r : {0, 10, 15}) {  // block 1 of rows 16, 26, 31 (tile 1)
      const auto& b = reinterpret_cast<const BlockQ6_K*>(w.data() + (16 + r) * rb)[1];
      const std::uint8_t* p = x.data() + 16 * rb + 3360;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      for (int j = 0; j < 16; ++j) EXPECT_EQ(static_cast<std::int8_t>(p[32 + 16 * j + r]), b.scales[j]) << "scales " << j;
      for (int k = 0; k < 32; ++k) EXPECT_EQ(std::memcmp(p + 288 + 64 * k + 4 * r, b.ql + 4 * k, 4), 0) << "ql " << k;
      for (int m = 0; m < 16; ++m) EXPECT_EQ(std::memcmp(p + 2336 + 64 * m + 4 * r, b.qh + 4 * m, 4), 0) << "qh " << m;
    }
  }
  {
    const std::size_t rows = 16, cols = 256, rb = ggml_row_bytes(GgmlType::IQ4_XS, cols);
    const auto w = random_matrix(GgmlType::IQ4_XS, rows, cols, 10);
    const auto x = interleaved(GgmlType::IQ4_XS, w, rows, cols);
    for (std::size_t r : {0, 4, 15}) {
      const auto& b = reinterpret_cast<const BlockIQ4_XS*>(w.data() + r * rb)[0];
      EXPECT_EQ(std::memcmp(x.data() + 2 * r, &b.d, 2), 0);
      EXPECT_EQ(std::memcmp(x.data() + 32 + 2 * r, &b.scales_h, 2), 0);
      for (int j = 0; j < 4; ++j) EXPECT_EQ(x[64 + 16 * j + r], b.scales_l[j]) << "scales_l " << j;
      for (int k = 0; k < 32; ++k) EXPECT_EQ(std::memcmp(x.data() + 128 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0) << k;
    }
  }
  {
    const std::size_t rows = 32, cols = 64, rb = ggml_row_bytes(GgmlType::Q4_0, cols);
    const auto w = random_matrix(GgmlType::Q4_0, rows, cols, 8);
    const auto x = interleaved(GgmlType::Q4_0, w, rows, cols);
    for (std::size_t r : {0, 6, 15}) {  // group 1 of rows 16, 22, 31 (tile 1)
      const auto& b = reinterpret_cast<const BlockQ4_0*>(w.data() + (16 + r) * rb)[1];
      const std::uint8_t* p = x.data() + 16 * rb + 288;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(std::memcmp(p + 32 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0);
    }
  }
  {
    const std::size_t rows = 16, cols = 64, rb = ggml_row_bytes(GgmlType::IQ4_NL, cols);
    const auto w = random_matrix(GgmlType::IQ4_NL, rows, cols, 11);
    const auto x = interleaved(GgmlType::IQ4_NL, w, rows, cols);
    for (std::size_t r : {0, 13}) {  // group 1
      const auto& b = reinterpret_cast<const BlockIQ4_NL*>(w.data() + r * rb)[1];
      const std::uint8_t* p = x.data() + 288;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(std::memcmp(p + 32 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0);
    }
  }
  {
    const std::size_t rows = 16, cols = 96, rb = ggml_row_bytes(GgmlType::Q5_1, cols);
    const auto w = random_matrix(GgmlType::Q5_1, rows, cols, 12);
    const auto x = interleaved(GgmlType::Q5_1, w, rows, cols);
    for (std::size_t r : {0, 7, 15}) {  // group 2
      const auto& b = reinterpret_cast<const BlockQ5_1*>(w.data() + r * rb)[2];
      const std::uint8_t* p = x.data() + 2 * 384;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      EXPECT_EQ(std::memcmp(p + 32 + 2 * r, &b.m, 2), 0);
      std::uint32_t h;
      std::memcpy(&h, b.qh, 4);
      for (int k = 0; k < 4; ++k)
        for (int half = 0; half < 2; ++half)
          for (int j = 0; j < 4; ++j) {
            std::uint64_t m;
            std::memcpy(&m, p + 64 + 8 * (2 * k + half), 8);
            EXPECT_EQ((m >> (4 * r + j)) & 1, (h >> (16 * half + 4 * k + j)) & 1) << r << " " << k << " " << j;
          }
      for (int k = 0; k < 4; ++k) EXPECT_EQ(std::memcmp(p + 128 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0);
    }
  }
  {
    const std::size_t rows = 16, cols = 64, rb = ggml_row_bytes(GgmlType::Q4_1, cols);
    const auto w = random_matrix(GgmlType::Q4_1, rows, cols, 13);
    const auto x = interleaved(GgmlType::Q4_1, w, rows, cols);
    for (std::size_t r : {2, 15}) {  // group 1
      const auto& b = reinterpret_cast<const BlockQ4_1*>(w.data() + r * rb)[1];
      const std::uint8_t* p = x.data() + 320;
      EXPECT_EQ(std::memcmp(p + 2 * r, &b.d, 2), 0);
      EXPECT_EQ(std::memcmp(p + 32 + 2 * r, &b.m, 2), 0);
      for (int k = 0; k < 4; ++k) EXPECT_EQ(std::memcmp(p + 64 + 64 * k + 4 * r, b.qs + 4 * k, 4), 0);
    }
  }
}

// matmul_x16 of `isa` on x16 weights against the reference on the original:
// with random activations within the int8 rounding bound; with activations
// the int8 quantization holds exactly (integers, each 32 reaching 127) to
// 1e-5 of sum |w x|, where a wrong integer anywhere would show.
void check_x16(Isa isa, GgmlType t, std::size_t rows, std::size_t cols, std::size_t n, int threads,
               std::uint64_t seed) {
  SCOPED_TRACE(std::string(isa_name(isa)) + " " + ggml_type_name(t) + " rows=" + std::to_string(rows) +
               " cols=" + std::to_string(cols) + " tokens=" + std::to_string(n) + " threads=" + std::to_string(threads));
  const auto& k = matvec_kernels(isa);
  const auto w = random_matrix(t, rows, cols, seed);
  const auto wx = interleaved(t, w, rows, cols);
  const std::size_t rb = ggml_row_bytes(t, cols), ldx = cols + 3, ldy = rows + 5;
  std::vector<float> deq(rows * cols);  // (rows, cols)
  for (std::size_t r = 0; r < rows; ++r) dequantize_row_ref(t, w.data() + r * rb, deq.data() + r * cols, cols);
  for (bool exact : {false, true}) {
    auto x = test::random_vector(n * ldx, seed + 1, exact ? -127.f : -2.f, exact ? 127.f : 2.f);  // (n, ldx)
    if (exact)
      for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % ldx % 32 == 7 ? 127.f : std::nearbyint(x[i]);
    std::vector<float> ref(n * ldy), got(n * ldy, -7.f);
    matmul_ref(t, w.data(), rows, cols, x.data(), ldx, n, ref.data(), ldy, nullptr);
    std::vector<std::uint8_t> scratch(matvec_scratch_bytes_x16(t, cols, n));  // exactly: ASan sees an overrun
    test::matmul_on_threads(k, t, wx.data(), rows, cols, x.data(), ldx, n, got.data(), ldy, scratch.data(), threads,
                            /*x16=*/true);
    const std::size_t ab = k_quant(t) ? 256 : 32;  // activation scale block
    for (std::size_t tok = 0; tok < n; ++tok) {
      const float* xt = x.data() + tok * ldx;
      for (std::size_t r = 0; r < rows; ++r) {
        double mag = 0, bound = 0;
        for (std::size_t c0 = 0; c0 < cols; c0 += ab) {
          double amax = 0;
          for (std::size_t c = c0; c < c0 + ab; ++c) amax = std::max(amax, std::fabs(double(xt[c])));
          for (std::size_t c = c0; c < c0 + ab; ++c) {
            mag += std::fabs(double(deq[r * cols + c]) * xt[c]);
            bound += std::fabs(double(deq[r * cols + c])) * amax / 254.0;
          }
        }
        const double tol = exact ? 1e-5 * mag + 1e-6 : bound * 1.001 + 2e-6 * mag + 1e-6;
        ASSERT_NEAR(got[tok * ldy + r], ref[tok * ldy + r], tol) << (exact ? "exact" : "random") << " activations, token "
                                                                 << tok << " row " << r;
      }
      for (std::size_t r = rows; r < ldy; ++r) ASSERT_EQ(got[tok * ldy + r], -7.f) << "wrote past rows";
    }
  }
}

TEST(MatvecX16, EveryIsaAnyBitsTokensAndThreads) {
  for (Isa isa : supported_isas()) {
    for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::IQ4_XS})
      for (std::size_t nblk : {1, 2, 3, 5}) check_x16(isa, t, 16, 256 * nblk, 1, 1, nblk);
    for (GgmlType t : {GgmlType::Q5_0, GgmlType::Q4_0, GgmlType::IQ4_NL, GgmlType::Q5_1, GgmlType::Q4_1})
      for (std::size_t nblk : {1, 2, 3, 7, 33, 44}) check_x16(isa, t, 16, 32 * nblk, 1, 1, nblk);
    for (GgmlType t : kX16Types) {
      const std::size_t cols = k_quant(t) ? 1280 : 1408;  // block 32: V2-Lite's expert down projections
      // 1-7: the tile kernels (4 tokens at a time); 8 on: the packed GEMM
      // (AVX-512; AVX2's Q4_K from 16), 34: past its 32-group chunks' tokens
      for (std::size_t n : {1, 2, 3, 4, 5, 7, 8, 9, 17, 34}) check_x16(isa, t, 48, cols, n, 1, 10 + n);
      for (int threads : {2, 3}) {
        check_x16(isa, t, 80, cols, 1, threads, 20 + threads);
        check_x16(isa, t, 80, cols, 6, threads, 30 + threads);
        check_x16(isa, t, 80, cols, 20, threads, 40 + threads);
      }
    }
  }
}

// From 8 tokens matmul_x16 and matmul on the original layout take the same
// packed GEMM (or, below its size on an ISA, the same row kernels), so
// their outputs agree bit for bit: AVX-512 packs straight from the tiles,
// and a wrong byte, scale or offset there would show. With AVX-512 the
// tiles take calls below kPackedGemmAllTokens in the tile kernels, whose
// rows are the original layout's one token at a time up to f32 summation
// order (1e-5 of the largest). 80 rows:
// a last tile of 16 where the GEMM takes 32; 1280 / 1408 columns: a chunk of
// 32 groups, then a shorter one.
TEST(MatvecX16, ManyTokensAsTheOriginalLayoutBitForBit) {
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    for (GgmlType t : kX16Types) {
      const std::size_t rows = 80, cols = k_quant(t) ? 1280 : 1408, ldx = cols + 3, ldy = rows + 5;
      const auto w = random_matrix(t, rows, cols, 61);
      const auto wx = interleaved(t, w, rows, cols);
      for (std::size_t n : {8, 9, 17, 34, 40}) {
        for (int threads : {1, 2}) {
          SCOPED_TRACE(std::string(isa_name(isa)) + " " + ggml_type_name(t) + " tokens=" + std::to_string(n) +
                       " threads=" + std::to_string(threads));
          const auto x = test::random_vector(n * ldx, 62 + n, -2.f, 2.f);  // (n, ldx)
          std::vector<float> plain(n * ldy, -7.f), x16(n * ldy, -7.f);
          std::vector<std::uint8_t> scratch(matvec_scratch_bytes_x16(t, cols, n));
          if (isa == Isa::avx512 && n < kPackedGemmAllTokens) {
            for (std::size_t j = 0; j < n; ++j)
              test::matmul_on_threads(k, t, w.data(), rows, cols, x.data() + j * ldx, ldx, 1, plain.data() + j * ldy, ldy,
                                      scratch.data(), threads);
          } else {
            test::matmul_on_threads(k, t, w.data(), rows, cols, x.data(), ldx, n, plain.data(), ldy, scratch.data(),
                                    threads);
          }
          test::matmul_on_threads(k, t, wx.data(), rows, cols, x.data(), ldx, n, x16.data(), ldy, scratch.data(),
                                  threads, /*x16=*/true);
          if (isa == Isa::avx512 && n < kPackedGemmAllTokens) {
            double mag = 0, err = 0;
            for (std::size_t i = 0; i < plain.size(); ++i) {
              mag = std::max(mag, std::fabs(double(plain[i])));
              err = std::max(err, std::fabs(double(x16[i]) - plain[i]));
            }
            EXPECT_LE(err, 1e-5 * mag);
          } else {
            EXPECT_EQ(x16, plain);
          }
        }
      }
    }
  }
}

// As Matvec.OneThreadInsideTheCallersRegion, for matmul_x16: a call with one
// thread from any thread of the caller's team computes every row.
TEST(MatvecX16, OneThreadInsideTheCallersRegion) {
  constexpr int kTeam = 3;
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    for (GgmlType t : kX16Types) {
      const std::size_t rows = 48, cols = 512;
      const auto wx = interleaved(t, random_matrix(t, rows, cols, 91), rows, cols);
      for (std::size_t n : {1, 3, 40}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + ggml_type_name(t) + " tokens=" + std::to_string(n));
        const auto x = test::random_vector(n * cols, 92 + n, -2.f, 2.f);  // (n, cols)
        const std::size_t sb = matvec_scratch_bytes_x16(t, cols, n);
        std::vector<float> want(n * rows);
        std::vector<std::uint8_t> scratch((kTeam + 1) * sb);
        k.matmul_x16(t, wx.data(), rows, cols, x.data(), cols, n, want.data(), rows, scratch.data());
        std::vector<std::vector<float>> got(kTeam, std::vector<float>(n * rows, -7.f));
        ThreadPool pool(kTeam);
        pool.run(kTeam, [&](int s, int ns) {
          for (int i = kTeam * s / ns; i < kTeam * (s + 1) / ns; ++i)
            k.matmul_x16(t, wx.data(), rows, cols, x.data(), cols, n, got[i].data(), rows,
                         scratch.data() + (i + 1) * sb);
        });
        for (int i = 0; i < kTeam; ++i) EXPECT_EQ(got[i], want) << "slot " << i << " of the caller's region";
      }
    }
  }
}

// No columns: every output is the empty sum, 0, on every path.
TEST(MatvecX16, NoColumnsGiveZeros) {
  for (Isa isa : supported_isas()) {
    for (GgmlType t : kX16Types) {
      for (std::size_t n : {1, 5, 20}) {
        std::vector<float> y(n * 32, -7.f);
        float x[1] = {0.f};
        std::vector<std::uint8_t> scratch(matvec_scratch_bytes_x16(t, 0, n) + 1);
        matvec_kernels(isa).matmul_x16(t, x, 32, 0, x, 0, n, y.data(), 32, scratch.data());
        EXPECT_EQ(y, std::vector<float>(n * 32, 0.f)) << isa_name(isa) << " " << ggml_type_name(t) << " tokens " << n;
      }
    }
  }
}

// Where an ISA has its own x16 kernels: x86 with AVX-512 VNNI.
TEST(MatvecX16, FastWhereTheIsaHasKernels) {
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    for (GgmlType t : kX16Types) EXPECT_EQ(k.x16_fast(t), isa == Isa::avx512) << isa_name(isa) << " " << ggml_type_name(t);
    EXPECT_FALSE(k.x16_fast(GgmlType::Q8_0)) << isa_name(isa);
  }
}

TEST(MatvecX16, RejectsBadArguments) {
  std::vector<std::uint8_t> w(32 * ggml_row_bytes(GgmlType::Q4_K, 256));
  auto message = [&](GgmlType t, std::size_t rows, std::size_t cols) -> std::string {
    try {
      test::x16_interleave(t, w.data(), rows, cols);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(message(GgmlType::Q4_K, 17, 256).find("17 rows is not a multiple of 16"), std::string::npos);
  EXPECT_NE(message(GgmlType::Q4_K, 16, 100).find("not a multiple of its block size"), std::string::npos);
  EXPECT_NE(message(GgmlType::Q8_0, 16, 256).find("Q8_0 has no row-interleaved layout"), std::string::npos);
  for (Isa isa : supported_isas()) {
    float x[256] = {}, y[32];
    std::vector<std::uint8_t> scratch(matvec_scratch_bytes_x16(GgmlType::Q4_K, 256, 1));
    EXPECT_THROW(matvec_kernels(isa).matmul_x16(GgmlType::Q4_K, w.data(), 24, 256, x, 256, 1, y, 32, scratch.data()),
                 std::invalid_argument)
        << isa_name(isa);
  }
}

}  // namespace
}  // namespace latte::kernels
