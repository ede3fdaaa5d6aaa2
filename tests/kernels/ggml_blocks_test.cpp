// Dequantize references on hand-built blocks (expected values derived by hand
// from the bit layouts in mla-spec.md section 3), and quantize -> dequantize
// round trips with stated error bounds.
#include "quant/ggml_blocks.h"

#include <gtest/gtest.h>

#include <cstring>
#include <stdexcept>
#include <vector>

#include "quant/fp16.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

template <class Block>
std::vector<float> deq(GgmlType t, const Block& b, std::size_t n) {
  std::vector<float> y(n, 1e30f);
  dequantize_row_ref(t, &b, y.data(), n);
  return y;
}

TEST(GgmlBlocks, Q4_0HandBuilt) {
  BlockQ4_0 b{};
  b.d = 0x3800;  // 0.5
  std::memset(b.qs, 0x88, 16);  // every q = 8 -> 0
  b.qs[0] = 0x1F;  // y[0] = (15-8)*0.5, y[16] = (1-8)*0.5
  b.qs[1] = 0x80;  // y[1] = (0-8)*0.5, y[17] = 0
  auto y = deq(GgmlType::Q4_0, b, 32);
  EXPECT_EQ(y[0], 3.5f);
  EXPECT_EQ(y[16], -3.5f);
  EXPECT_EQ(y[1], -4.f);
  EXPECT_EQ(y[17], 0.f);
  EXPECT_EQ(y[31], 0.f);
}

TEST(GgmlBlocks, Q4_1HandBuilt) {
  BlockQ4_1 b{};
  b.d = 0x3400;  // 0.25
  b.m = 0xBC00;  // -1
  b.qs[0] = 0x3A;  // y[0] = 10*0.25-1, y[16] = 3*0.25-1
  auto y = deq(GgmlType::Q4_1, b, 32);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[16], -0.25f);
  EXPECT_EQ(y[5], -1.f);
}

TEST(GgmlBlocks, Q5_0HandBuilt) {
  BlockQ5_0 b{};
  b.d = 0x3C00;  // 1
  const std::uint8_t qh[4] = {0x02, 0x00, 0x01, 0x00};  // u32 LE 0x00010002: bits 1 and 16
  std::memcpy(b.qh, qh, 4);
  b.qs[1] = 0x2F;
  auto y = deq(GgmlType::Q5_0, b, 32);
  EXPECT_EQ(y[1], 15.f);    // (15 | 16) - 16
  EXPECT_EQ(y[17], -14.f);  // (2 | 0) - 16: bit 17 clear
  EXPECT_EQ(y[16], 0.f);    // (0 | 16) - 16: bit 16 set
  EXPECT_EQ(y[0], -16.f);   // 0 - 16
}

TEST(GgmlBlocks, Q5_1HandBuilt) {
  BlockQ5_1 b{};
  b.d = 0x3800;  // 0.5
  b.m = 0x4000;  // 2
  const std::uint8_t qh[4] = {0, 0, 0, 0x80};  // bit 31: element 31
  std::memcpy(b.qh, qh, 4);
  b.qs[15] = 0x7F;
  auto y = deq(GgmlType::Q5_1, b, 32);
  EXPECT_EQ(y[15], 9.5f);   // 15*0.5 + 2
  EXPECT_EQ(y[31], 13.5f);  // (7|16)*0.5 + 2
  EXPECT_EQ(y[0], 2.f);
}

TEST(GgmlBlocks, Q8_0HandBuilt) {
  BlockQ8_0 b{};
  b.d = 0x3000;  // 0.125
  b.qs[0] = -128;
  b.qs[31] = 127;
  b.qs[5] = -3;
  auto y = deq(GgmlType::Q8_0, b, 32);
  EXPECT_EQ(y[0], -16.f);
  EXPECT_EQ(y[31], 15.875f);
  EXPECT_EQ(y[5], -0.375f);
  EXPECT_EQ(y[6], 0.f);
}

// Scales for Q4_K/Q5_K: sub-block 0: sc 2, m 3; sub-block 5: sc 37 (0b100101),
// m 20 (0b010100): low 4 bits in byte 9 (5 | 4<<4), sc's top 2 bits (2) in
// byte 1 bits 6-7, m's top 2 bits (1) in byte 5 bits 6-7; all others 0.
constexpr std::uint8_t kK4Scales[12] = {2, 0x80, 0, 0, 3, 0x40, 0, 0, 0, 0x45, 0, 0};

TEST(GgmlBlocks, ScaleMinK4) {
  std::uint8_t sc, m;
  get_scale_min_k4(0, kK4Scales, &sc, &m);
  EXPECT_EQ(sc, 2);
  EXPECT_EQ(m, 3);
  get_scale_min_k4(5, kK4Scales, &sc, &m);
  EXPECT_EQ(sc, 37);
  EXPECT_EQ(m, 20);
  for (int j : {1, 2, 3, 4, 6, 7}) {
    get_scale_min_k4(j, kK4Scales, &sc, &m);
    EXPECT_EQ(sc, 0) << j;
    EXPECT_EQ(m, 0) << j;
  }
  const std::uint8_t scs[8] = {2, 0, 0, 0, 0, 37, 0, 0}, ms[8] = {3, 0, 0, 0, 0, 20, 0, 0};
  std::uint8_t packed[12];
  pack_scale_min_k4(scs, ms, packed);
  EXPECT_EQ(0, std::memcmp(packed, kK4Scales, 12));
}

TEST(GgmlBlocks, Q2_KHandBuilt) {
  BlockQ2_K b{};
  b.d = 0x3C00;        // 1
  b.dmin = 0x3800;     // 0.5
  b.scales[0] = 0x32;  // sub-block 0: sc 2, m 3
  b.scales[1] = 0x05;  // sub-block 1: sc 5, m 0
  b.scales[13] = 0x47; // sub-block 13: sc 7, m 4
  b.qs[3] = 0x03;      // half 0, field 0, byte 3: element 3 = 3
  b.qs[17] = 0x02;     // half 0, field 0, byte 17: element 17 (sub-block 1) = 2
  b.qs[53] = 0x10;     // half 1, field 2, byte 21: element 128 + 64 + 21 = 213 (sub-block 13) = 1
  auto y = deq(GgmlType::Q2_K, b, 256);
  EXPECT_EQ(y[3], 4.5f);    // 1*2*3 - 0.5*3
  EXPECT_EQ(y[1], -1.5f);   // 1*2*0 - 0.5*3
  EXPECT_EQ(y[17], 10.f);   // 1*5*2 - 0
  EXPECT_EQ(y[16], 0.f);
  EXPECT_EQ(y[213], 5.f);   // 1*7*1 - 0.5*4
  EXPECT_EQ(y[212], -2.f);  // sub-block 13, q 0
  EXPECT_EQ(y[128], 0.f);   // sub-block 8: sc 0, m 0
}

// Q3_K scales: stored (6-bit) 34 for sub-block 0, 27 for 9, 40 for 13, 32
// (zero) for the others: low nibbles in bytes 0-7 (k >= 8 in the high
// nibble of byte k - 8), top two bits at bit 2 * (k / 4) of byte 8 + k % 4.
constexpr std::uint8_t kQ3Scales[12] = {0x02, 0xB0, 0, 0, 0, 0x80, 0, 0, 0xAA, 0x9A, 0xAA, 0xAA};

TEST(GgmlBlocks, Q3_KHandBuilt) {
  std::int8_t sc[16];
  q3_k_scales(kQ3Scales, sc);
  EXPECT_EQ(sc[0], 2);
  EXPECT_EQ(sc[9], -5);
  EXPECT_EQ(sc[13], 8);
  for (int k : {1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15}) EXPECT_EQ(sc[k], 0) << k;
  BlockQ3_K b{};
  b.d = 0x3800;  // 0.5
  std::memcpy(b.scales, kQ3Scales, 12);
  b.qs[3] = 0x03;      // element 3: low bits 3
  b.hmask[3] = 0x01;   // ... and bit plane 0 (half 0, field 0): 7 - 4 = 3
  b.qs[50] = 0x01;     // half 1, field 0, byte 18: element 146 (sub-block 9) low bits 1
  b.hmask[18] = 0x10;  // bit plane 4 (half 1, field 0): 5 - 4 = 1
  b.qs[53] = 0x20;     // half 1, field 2, byte 21: element 213 (sub-block 13) low bits 2, plane 6 clear
  auto y = deq(GgmlType::Q3_K, b, 256);
  EXPECT_EQ(y[3], 3.f);     // 0.5*2*3
  EXPECT_EQ(y[4], -4.f);    // 0.5*2*(0-4)
  EXPECT_EQ(y[146], -2.5f); // 0.5*-5*1
  EXPECT_EQ(y[147], 10.f);  // 0.5*-5*(0-4)
  EXPECT_EQ(y[213], -8.f);  // 0.5*8*(2-4)
  EXPECT_EQ(y[133], 0.f);   // sub-block 8: scale 0
}

TEST(GgmlBlocks, IQ4_NLHandBuilt) {
  BlockIQ4_NL b{};
  b.d = 0x3800;     // 0.5
  b.qs[0] = 0x80;   // element 0: index 0 (-127), element 16: index 8 (1)
  b.qs[5] = 0xF3;   // element 5: index 3 (-65), element 21: index 15 (113)
  auto y = deq(GgmlType::IQ4_NL, b, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[16], 0.5f);
  EXPECT_EQ(y[5], -32.5f);
  EXPECT_EQ(y[21], 56.5f);
  EXPECT_EQ(y[1], -63.5f);  // index 0
}

TEST(GgmlBlocks, IQ4_XSHandBuilt) {
  BlockIQ4_XS b{};
  b.d = 0x3C00;  // 1
  // sub-block 0: ls 34 (+2): low 2, high 2 -> scales_l[0] low nibble 2, scales_h bits 0-1 = 2;
  // sub-block 3: ls 27 (-5): low 11, high 1 -> scales_l[1] high nibble 11, scales_h bits 6-7 = 1;
  // the others ls 32 (0): low 0, high 2.
  b.scales_l[0] = 0x02;
  b.scales_l[1] = 0xB0;
  b.scales_h = 0xAAAA & ~(3 << 6);
  b.scales_h |= 1 << 6;
  b.qs[0] = 0x0F;           // sub-block 0: element 0 index 15 (113), element 16 index 0 (-127)
  b.qs[16 * 3 + 2] = 0x70;  // sub-block 3: element 98 index 0 (-127), element 114 index 7 (-10)
  auto y = deq(GgmlType::IQ4_XS, b, 256);
  EXPECT_EQ(y[0], 226.f);    // 2 * 113
  EXPECT_EQ(y[16], -254.f);  // 2 * -127
  EXPECT_EQ(y[98], 635.f);   // -5 * -127
  EXPECT_EQ(y[114], 50.f);   // -5 * -10
  EXPECT_EQ(y[40], 0.f);     // sub-block 1: scale 0
}

TEST(GgmlBlocks, Q4_KHandBuilt) {
  BlockQ4_K b{};
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kK4Scales, 12);
  b.qs[7] = 0x09;   // chunk 0 low nibble: element 7 of sub-block 0
  b.qs[67] = 0xA0;  // chunk 2 high nibble: element 3 of sub-block 5 (= 163)
  auto y = deq(GgmlType::Q4_K, b, 256);
  EXPECT_EQ(y[7], 16.5f);    // 1*2*9 - 0.5*3
  EXPECT_EQ(y[1], -1.5f);    // 1*2*0 - 0.5*3
  EXPECT_EQ(y[163], 360.f);  // 1*37*10 - 0.5*20
  EXPECT_EQ(y[131], 0.f);    // sub-block 4: sc 0, m 0
  EXPECT_EQ(y[32], 0.f);
}

TEST(GgmlBlocks, Q5_KHandBuilt) {
  BlockQ5_K b{};
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kK4Scales, 12);
  b.qs[7] = 0x09;
  b.qs[67] = 0xA0;
  b.qh[7] = 0x01;  // bit 0 (sub-block 0) of element 7
  b.qh[3] = 0x20;  // bit 5 (sub-block 5) of element 3 -> 163
  auto y = deq(GgmlType::Q5_K, b, 256);
  EXPECT_EQ(y[7], 48.5f);    // 2*(9|16) - 1.5
  EXPECT_EQ(y[3], -1.5f);    // bit 0 of qh[3] is clear
  EXPECT_EQ(y[163], 952.f);  // 37*(10|16) - 10
  EXPECT_EQ(y[131], 0.f);    // sub-block 4 (bit 4 of qh[3] clear, sc 0)
}

TEST(GgmlBlocks, Q6_KHandBuilt) {
  BlockQ6_K b{};
  b.d = 0x3800;  // 0.5
  b.scales[0] = 2;
  b.scales[1] = -3;
  b.scales[2] = 1;
  b.scales[4] = 1;
  b.scales[6] = -1;
  b.scales[10] = 4;
  b.ql[0] = 0x5F;   // y[0] low 4 = 15, y[64] low 4 = 5
  b.qh[0] = 0xE4;   // 2-bit fields 0,1,2,3 for y[0], y[32], y[64], y[96]
  b.ql[96] = 0x07;  // half 1: y[128+32] low 4 = 7
  b.qh[32] = 0x0C;  // half 1: y[160] high 2 bits = 3
  auto y = deq(GgmlType::Q6_K, b, 256);
  EXPECT_EQ(y[0], -17.f);  // 0.5*2*((15|0)-32)
  EXPECT_EQ(y[1], -32.f);  // 0.5*2*(0-32)
  EXPECT_EQ(y[16], 48.f);  // 0.5*-3*(0-32)
  EXPECT_EQ(y[17], 48.f);
  EXPECT_EQ(y[32], -8.f);  // 0.5*1*((0|16)-32)
  EXPECT_EQ(y[33], -16.f); // 0.5*1*(0-32)
  EXPECT_EQ(y[64], 2.5f);  // 0.5*1*((5|32)-32)
  EXPECT_EQ(y[65], -16.f);
  EXPECT_EQ(y[96], -8.f);  // 0.5*-1*((0|48)-32)
  EXPECT_EQ(y[128], 0.f);  // scales[8] = 0
  EXPECT_EQ(y[160], 46.f); // 0.5*4*((7|48)-32)
  EXPECT_EQ(y[161], -64.f);// 0.5*4*(0-32)
}

TEST(GgmlBlocks, FloatTypesHandBuilt) {
  const std::uint16_t h[4] = {0x3C00, 0xC000, 0x7BFF, 0x0001};
  std::vector<float> y(4);
  dequantize_row_ref(GgmlType::F16, h, y.data(), 4);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -2.f);
  EXPECT_EQ(y[2], 65504.f);
  EXPECT_EQ(y[3], 5.9604644775390625e-8f);  // 2^-24, the smallest subnormal
  const std::uint16_t bf[3] = {0x3F80, 0xC0A0, 0x4049};
  dequantize_row_ref(GgmlType::BF16, bf, y.data(), 3);
  EXPECT_EQ(y[0], 1.f);
  EXPECT_EQ(y[1], -5.f);
  EXPECT_EQ(y[2], 3.140625f);
  const float f[2] = {1.25f, -7.f};
  dequantize_row_ref(GgmlType::F32, f, y.data(), 2);
  EXPECT_EQ(y[0], 1.25f);
  EXPECT_EQ(y[1], -7.f);
}

TEST(GgmlBlocks, RowBytesAndValidation) {
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q4_0, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q6_K, 512), 420u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q2_K, 512), 168u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::Q3_K, 256), 110u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::IQ4_NL, 64), 36u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::IQ4_XS, 512), 272u);
  EXPECT_EQ(ggml_row_bytes(GgmlType::BF16, 3), 6u);
  EXPECT_THROW(ggml_row_bytes(GgmlType::Q4_K, 1408), std::invalid_argument);
  EXPECT_THROW(ggml_row_bytes(static_cast<GgmlType>(99), 32), std::invalid_argument);
  float y[32];
  BlockQ8_0 b{};
  EXPECT_THROW(dequantize_row_ref(GgmlType::Q8_0, &b, y, 16), std::invalid_argument);
}

struct RoundTrip {
  GgmlType type;
  double nmse;     // bound on sum err^2 / sum x^2 for x uniform in [-1, 1]
  double max_err;  // bound on max |err|
};

// Bounds: half a quantization step for x in [-1, 1] (step 2/levels), plus
// the K-quants' 6-bit scales and mins (up to a step more). Q4_0/Q5_0 put the
// signed extreme at -2^(b-1), so the opposite extreme may clip by a full step
// (Q3_K: levels -4..3 of amax/4, so +amax clips by one step, 0.25). Q2_K has
// 4 levels over [lo, hi]: half a step is 1/3. IQ4_NL maps the absmax to
// -127, so a value at the other extreme lands on 113: 1 - 113/127 = 0.11
// (IQ4_XS's 6-bit scales add to that). Each bound sits above the measured
// error (docs/performance-log.md, "Figures moved out of code comments").
TEST(GgmlBlocks, QuantizeRoundTrip) {
  const RoundTrip cases[] = {
      {GgmlType::F32, 0, 0},           {GgmlType::F16, 1e-7, 5e-4},     {GgmlType::BF16, 2e-5, 4e-3},
      {GgmlType::Q8_0, 3e-5, 0.0045},  {GgmlType::Q4_0, 8e-3, 0.126},  {GgmlType::Q4_1, 8e-3, 0.07},
      {GgmlType::Q5_0, 2e-3, 0.063},   {GgmlType::Q5_1, 2e-3, 0.035},   {GgmlType::Q4_K, 1.2e-2, 0.14},
      {GgmlType::Q5_K, 3e-3, 0.07},    {GgmlType::Q6_K, 6e-4, 0.04},    {GgmlType::Q2_K, 0.1, 0.36},
      {GgmlType::Q3_K, 0.03, 0.27},    {GgmlType::IQ4_NL, 6e-3, 0.12},  {GgmlType::IQ4_XS, 6e-3, 0.15},
  };
  const std::size_t n = 4096;
  auto x = test::random_vector(n, 7);
  for (const auto& c : cases) {
    std::vector<std::uint8_t> q(ggml_row_bytes(c.type, n));
    std::vector<float> y(n);
    quantize_row_ref(c.type, x.data(), q.data(), n);
    dequantize_row_ref(c.type, q.data(), y.data(), n);
    double max_err = 0;
    for (std::size_t i = 0; i < n; ++i) max_err = std::max(max_err, std::fabs(double(y[i]) - x[i]));
    const double e = test::nmse(y.data(), x.data(), n);
    EXPECT_LE(e, c.nmse) << ggml_type_name(c.type);
    EXPECT_LE(max_err, c.max_err) << ggml_type_name(c.type);
    RecordProperty(ggml_type_name(c.type), std::to_string(e));
  }
}

// Zero blocks and blocks with one large outlier must not produce NaN/inf.
TEST(GgmlBlocks, QuantizeDegenerate) {
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                     GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K,
                     GgmlType::IQ4_NL, GgmlType::IQ4_XS}) {
    std::vector<float> x(256, 0.f), y(256);
    std::vector<std::uint8_t> q(ggml_row_bytes(t, 256));
    quantize_row_ref(t, x.data(), q.data(), 256);
    dequantize_row_ref(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_EQ(v, 0.f) << ggml_type_name(t);
    x[100] = -3.f;
    quantize_row_ref(t, x.data(), q.data(), 256);
    dequantize_row_ref(t, q.data(), y.data(), 256);
    for (float v : y) ASSERT_TRUE(std::isfinite(v)) << ggml_type_name(t);
    EXPECT_NEAR(y[100], -3.f, 0.1f) << ggml_type_name(t);
  }
}

}  // namespace
}  // namespace latte
