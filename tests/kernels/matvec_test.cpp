// matvec / matmul: every type x every supported ISA against the reference
// (dequantize + double accumulation, unquantized activations).
//
// Bounds: the quantized types' SIMD paths round each activation to int8 with
// one scale per 32 (per 256 for the K-quants; error <= amax_block / 254 per
// element), so every output must satisfy |got - ref| <= sum_c |W[r,c]| *
// amax_block(c) / 254 (+ f32 rounding); and over the real-model shapes the
// normalized MSE must be below 1e-4, well above what uniform random
// activations give (docs/performance-log.md, "Figures moved out of code
// comments"). F32/F16/BF16: f32 accumulation, NMSE < 1e-10.
#include "kernels/matvec/matvec.h"
#include "platform/thread_pool.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstddef>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>


#include "quant/fp16.h"
#include "quant/ggml_blocks.h"
#include "tests/kernels/kernel_test_util.h"
#include "tests/common/kernel_regions.h"

namespace latte::kernels {
namespace {

constexpr GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                               GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,
                               GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                               GgmlType::Q6_K, GgmlType::IQ4_NL, GgmlType::IQ4_XS};

bool is_float(GgmlType t) { return t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16; }

struct Weights {
  std::vector<std::uint8_t> bytes;  // [rows][row_bytes]
  std::vector<float> deq;           // [rows][cols] the values those bytes hold
};

Weights make_weights(GgmlType t, std::size_t rows, std::size_t cols, std::uint64_t seed) {
  Weights w;
  auto f = test::random_vector(rows * cols, seed);
  const std::size_t rb = ggml_row_bytes(t, cols);
  w.bytes.resize(rows * rb);
  w.deq.resize(rows * cols);
  for (std::size_t r = 0; r < rows; ++r) {
    quantize_row_ref(t, f.data() + r * cols, w.bytes.data() + r * rb, cols);
    dequantize_row_ref(t, w.bytes.data() + r * rb, w.deq.data() + r * cols, cols);
  }
  return w;
}

bool is_k(GgmlType t) { return ggml_has_super_blocks(t); }

// Per-output bound for the int8-activation paths (see the file comment).
double act_bound(GgmlType t, const float* wrow, const float* x, std::size_t cols) {
  double b = 0, mag = 0;
  const std::size_t ab = is_k(t) ? 256 : 32;  // activation scale block
  for (std::size_t c0 = 0; c0 < cols; c0 += ab) {
    double amax = 0;
    for (std::size_t c = c0; c < c0 + ab && c < cols; ++c) amax = std::max(amax, std::fabs(double(x[c])));
    for (std::size_t c = c0; c < c0 + ab && c < cols; ++c) {
      if (!is_float(t)) b += std::fabs(double(wrow[c])) * amax / 254.0;
      mag += std::fabs(double(wrow[c]) * x[c]);
    }
  }
  return b * 1.001 + 2e-6 * mag + 1e-6;
}

// What every ISA's matmul (and matvec when n_tokens == 1) must give for
// weights w and random activations: the reference outputs and each one's
// bound. Computed once and compared for every ISA: the reference and the
// bounds (double loops) cost far more than the kernels, ~20x more under qemu.
struct Expected {
  std::size_t rows, cols, n_tokens, ldx, ldy;
  std::vector<float> x;       // (n_tokens, ldx)
  std::vector<float> ref;     // (n_tokens, ldy)
  std::vector<double> bound;  // (n_tokens, rows)
};

Expected expected_outputs(GgmlType t, const Weights& w, std::size_t rows, std::size_t cols, std::size_t n_tokens,
                          std::uint64_t seed) {
  Expected e{rows, cols, n_tokens, cols + 3, rows + 5, {}, {}, {}};
  e.x = test::random_vector(n_tokens * e.ldx, seed + 1, -2.f, 2.f);
  e.ref.assign(n_tokens * e.ldy, 0.f);
  matmul_ref(t, w.bytes.data(), rows, cols, e.x.data(), e.ldx, n_tokens, e.ref.data(), e.ldy, nullptr);
  e.bound.resize(n_tokens * rows);
  for (std::size_t tok = 0; tok < n_tokens; ++tok)
    for (std::size_t row = 0; row < rows; ++row)
      e.bound[tok * rows + row] = act_bound(t, w.deq.data() + row * cols, e.x.data() + tok * e.ldx, cols);
  return e;
}

// Runs matmul (and matvec when n_tokens == 1) on `isa` and checks every
// output against e; returns the NMSE over all of them.
double check_against(Isa isa, GgmlType t, const Weights& w, const Expected& e, int threads) {
  const auto& k = matvec_kernels(isa);
  const std::size_t rows = e.rows, cols = e.cols, n_tokens = e.n_tokens, ldx = e.ldx, ldy = e.ldy;
  std::vector<float> got(n_tokens * ldy, -7.f);
  // Exactly the advertised scratch: ASan catches an overrun.
  std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, n_tokens));
  void* s = scratch.empty() ? nullptr : scratch.data();
  if (n_tokens == 1 && threads == 1)
    k.matvec(t, w.bytes.data(), rows, cols, e.x.data(), got.data(), s);
  else
    test::matmul_on_threads(k, t, w.bytes.data(), rows, cols, e.x.data(), ldx, n_tokens, got.data(), ldy, s, threads);
  std::vector<float> g, r;
  for (std::size_t tok = 0; tok < n_tokens; ++tok) {
    for (std::size_t row = 0; row < rows; ++row) {
      const float gv = got[tok * ldy + row], rv = e.ref[tok * ldy + row];
      EXPECT_LE(std::fabs(double(gv) - rv), e.bound[tok * rows + row])
          << isa_name(isa) << " " << ggml_type_name(t) << " rows=" << rows << " cols=" << cols
          << " tokens=" << n_tokens << " threads=" << threads << " at token " << tok << " row " << row;
      g.push_back(gv);
      r.push_back(rv);
    }
    for (std::size_t row = rows; row < ldy; ++row)  // padding untouched
      EXPECT_EQ(got[tok * ldy + row], -7.f) << "wrote past rows";
  }
  return test::nmse(g.data(), r.data(), g.size());
}

double check_weights(Isa isa, GgmlType t, const Weights& w, std::size_t rows, std::size_t cols, std::size_t n_tokens,
                     int threads, std::uint64_t seed) {
  return check_against(isa, t, w, expected_outputs(t, w, rows, cols, n_tokens, seed), threads);
}

double check(Isa isa, GgmlType t, std::size_t rows, std::size_t cols, std::size_t n_tokens, int threads,
             std::uint64_t seed) {
  return check_weights(isa, t, make_weights(t, rows, cols, seed), rows, cols, n_tokens, threads, seed);
}

std::size_t block_of(GgmlType t) { return ggml_block_elems(t) == 1 ? 32 : ggml_block_elems(t); }

TEST(Matvec, OddShapesEveryTypeEveryIsa) {
  for (Isa isa : supported_isas()) {
    for (GgmlType t : kTypes) {
      const std::size_t blk = block_of(t);
      for (std::size_t rows : {1, 3, 17}) {
        for (std::size_t nblk : {1, 2, 3, 5, 7}) check(isa, t, rows, nblk * blk, 1, 1, rows * 10 + nblk);
      }
      // Block-32 types: AVX-512 decode takes 16 groups at a time, in pairs;
      // full, partial and odd runs of 16.
      if (blk == 32)
        for (std::size_t nblk : {16, 17, 30, 33, 47}) check(isa, t, 5, nblk * blk, 1, 1, nblk);
      if (is_float(t)) {  // no block constraint: ragged tails, also after the unrolled decode loop
        for (std::size_t cols : {1, 5, 33, 67, 300, 1000}) check(isa, t, 3, cols, 1, 1, cols);
      }
    }
  }
}

TEST(Matvec, MatmulTokenGroupsAndThreads) {
  for (Isa isa : supported_isas()) {
    for (GgmlType t : kTypes) {
      const std::size_t cols = 2 * block_of(t);
      for (std::size_t n_tokens : {2, 3, 4, 5, 9}) check(isa, t, 17, cols, n_tokens, 1, n_tokens);
      for (int threads : {2, 3}) {
        check(isa, t, 37, cols, 1, threads, 100 + threads);
        check(isa, t, 37, cols, 6, threads, 200 + threads);
      }
    }
  }
}

// Real DeepSeek-V2-Lite shapes (cols as in the model; rows sub-sampled to
// keep the test fast, also under ASan and qemu). K-quants need cols % 256 ==
// 0: GGUF files fall back to other types for 576/1408/10944.
TEST(Matvec, ModelShapesNmse) {
  struct Shape { std::size_t rows, cols; };
  const Shape shapes[] = {{48, 576}, {24, 2048}, {16, 1408}, {6, 10944}};
  for (Isa isa : supported_isas()) {
    for (GgmlType t : kTypes) {
      for (const auto& sh : shapes) {
        if (sh.cols % ggml_block_elems(t) != 0) continue;
        const double bound = is_float(t) ? 1e-10 : 1e-4;
        // Decode single-threaded here (threads are covered above and by the
        // matmul below); a spinning OpenMP team is slow on a loaded machine.
        {
          const int threads = 1;
          const double e = check(isa, t, sh.rows, sh.cols, 1, threads, sh.cols + threads);
          EXPECT_LT(e, bound) << isa_name(isa) << " " << ggml_type_name(t) << " cols=" << sh.cols;
          // MV_PRINT=1 lists the measured NMSE per ISA, type, shape.
          if (std::getenv("MV_PRINT")) std::printf("%s %s %zu %d %.3g\n", isa_name(isa), ggml_type_name(t), sh.cols, threads, e);
        }
        const double e = check(isa, t, sh.rows, sh.cols, 7, 2, sh.cols + 9);
        EXPECT_LT(e, bound) << isa_name(isa) << " " << ggml_type_name(t) << " matmul cols=" << sh.cols;
      }
    }
  }
}

// SIMD dequantize (for packing weights at load time) against the reference:
// equal up to f32 rounding (the SIMD path fuses d*q + m into one FMA), and
// bf16 within half a bf16 ulp of that.
TEST(Matvec, DequantizeMatchesReference) {
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    for (GgmlType t : kTypes) {
      for (std::size_t n : {block_of(t), 3 * block_of(t), std::size_t(2048 + 512)}) {
        Weights w = make_weights(t, 1, n, n + 1);
        std::vector<float> got(n, -1.f);
        std::vector<std::uint16_t> gotb(n, 0xffff);
        k.dequantize(t, w.bytes.data(), got.data(), n);
        k.dequantize_bf16(t, w.bytes.data(), gotb.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
          const float r = w.deq[i];
          ASSERT_NEAR(got[i], r, 1e-6f * (std::fabs(r) + 1e-3f)) << isa_name(isa) << " " << ggml_type_name(t) << " " << i;
          ASSERT_NEAR(bf16_to_f32(gotb[i]), r, std::fabs(r) / 256.f + 1e-30f)
              << isa_name(isa) << " " << ggml_type_name(t) << " bf16 " << i;
        }
      }
    }
  }
}

// Found by review: a NaN keeps being a NaN in bf16 (rounding its mantissa
// carried into the sign or exponent: 0x7fffffff gave -0, 0x7f800001 +inf),
// and the packed GEMM writes its outputs for 0 columns (it left them).
TEST(Matvec, Bf16KeepsNaNsAndZeroColumnsGiveZeros) {
  const std::uint32_t bits[] = {0x7fffffffu, 0xffffffffu, 0x7f800001u, 0xff800001u, 0x7fc00000u};
  std::vector<float> row(64, 1.5f);
  for (std::size_t i = 0; i < 5; ++i) std::memcpy(&row[3 * i], &bits[i], 4);
  std::vector<std::uint8_t> bytes(64 * 4);
  std::memcpy(bytes.data(), row.data(), bytes.size());
  for (Isa isa : supported_isas()) {
    std::vector<std::uint16_t> out(64, 0);
    matvec_kernels(isa).dequantize_bf16(GgmlType::F32, bytes.data(), out.data(), 64);
    for (std::size_t i = 0; i < 64; ++i) {
      if (i % 3 == 0 && i < 15) {
        EXPECT_TRUE(std::isnan(bf16_to_f32(out[i]))) << isa_name(isa) << " " << i << " -> " << out[i];
        EXPECT_EQ(out[i] >> 15, bits[i / 3] >> 31) << isa_name(isa) << " sign " << i;
      } else {
        EXPECT_EQ(bf16_to_f32(out[i]), 1.5f) << isa_name(isa) << " " << i;
      }
    }
    // 0 columns, 8 and 32 tokens (the packed GEMM's range): zeros, as the
    // reference and the row paths give.
    for (std::size_t n : {std::size_t{8}, std::size_t{32}}) {
      std::vector<float> y(4 * n, 12345.f);
      std::vector<std::uint8_t> scratch(matvec_scratch_bytes(GgmlType::Q8_0, 0, n) + 64);
      std::vector<std::uint8_t> none(1);
      float x = 0.f;
      matvec_kernels(isa).matmul(GgmlType::Q8_0, none.data(), 4, 0, &x, 0, n, y.data(), 4, scratch.data());
      for (float v : y) EXPECT_EQ(v, 0.f) << isa_name(isa) << " " << n;
    }
  }
}

// The K-quants' activation quantizer after a NaN: its integer sums held
// INT_MIN-based garbage whose int sum overflowed (UBSan, AVX2). Activations
// of +-1 make the other sums large enough; the ASan+UBSan build runs this.
TEST(Matvec, NaNActivationsDoNotOverflowTheSums) {
  for (GgmlType t : {GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q2_K}) {
    Weights w = make_weights(t, 3, 256, 5);
    std::vector<float> x(256);
    for (std::size_t i = 0; i < 256; ++i) x[i] = (i % 32) < 16 ? 1.f : -1.f;
    x[0] = NAN;
    for (Isa isa : supported_isas()) {
      std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, 256, 1));
      std::vector<float> y(3, 0.f);
      matvec_kernels(isa).matvec(t, w.bytes.data(), 3, 256, x.data(), y.data(), scratch.data());
      for (float v : y) EXPECT_FALSE(std::isfinite(v)) << isa_name(isa) << " " << ggml_type_name(t);
    }
  }
}

// Activations holding a NaN or inf (a model whose numbers overflowed): every
// output whose row reads that block is NaN on every ISA, as the reference's,
// rather than finite garbage from the int8 conversion (whose result for NaN
// differs by ISA). Activations so small that 127 / amax overflows (~1e-38)
// quantize to zeros: finite outputs within the usual bound of the reference.
TEST(Matvec, NonFiniteAndTinyActivations) {
  const std::size_t rows = 7, cols = 512;
  for (GgmlType t : kTypes) {
    Weights w = make_weights(t, rows, cols, 31);
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      auto x = test::random_vector(cols, 32, -2.f, 2.f);
      x[300] = bad;
      std::vector<float> ref(rows);
      matmul_ref(t, w.bytes.data(), rows, cols, x.data(), cols, 1, ref.data(), rows, nullptr);
      for (Isa isa : supported_isas()) {
        std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, 2));
        std::vector<float> y(rows, 0.f), y2(2 * rows, 0.f);
        matvec_kernels(isa).matvec(t, w.bytes.data(), rows, cols, x.data(), y.data(), scratch.data());
        std::vector<float> x2 = x;
        x2.insert(x2.end(), x.begin(), x.end());
        matvec_kernels(isa).matmul(t, w.bytes.data(), rows, cols, x2.data(), cols, 2, y2.data(), rows,
                                   scratch.data());
        for (std::size_t r = 0; r < rows; ++r) {
          // The reference: NaN, or +-inf when the weight is finite and nonzero.
          ASSERT_FALSE(std::isfinite(ref[r])) << ggml_type_name(t);
          EXPECT_FALSE(std::isfinite(y[r])) << isa_name(isa) << " " << ggml_type_name(t) << " " << bad << " row " << r;
          EXPECT_FALSE(std::isfinite(y2[r])) << isa_name(isa) << " " << ggml_type_name(t) << " matmul row " << r;
          EXPECT_FALSE(std::isfinite(y2[rows + r])) << isa_name(isa) << " " << ggml_type_name(t) << " matmul row " << r;
        }
      }
    }
    auto tiny = test::random_vector(cols, 33, -1.f, 1.f);
    for (float& v : tiny) v *= 1e-38f;
    std::vector<float> ref(rows);
    matmul_ref(t, w.bytes.data(), rows, cols, tiny.data(), cols, 1, ref.data(), rows, nullptr);
    for (Isa isa : supported_isas()) {
      std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, 1));
      std::vector<float> y(rows, -1.f);
      matvec_kernels(isa).matvec(t, w.bytes.data(), rows, cols, tiny.data(), y.data(), scratch.data());
      for (std::size_t r = 0; r < rows; ++r)
        EXPECT_LE(std::fabs(double(y[r]) - ref[r]), act_bound(t, w.deq.data() + r * cols, tiny.data(), cols) + 1e-30)
            << isa_name(isa) << " " << ggml_type_name(t) << " tiny row " << r;
    }
  }
}

// From kPackedGemmAllTokens tokens on (from fewer too, by ISA and type),
// Q8_0 and the types whose 32-element groups are integers times a scale plus an offset (Q4_0, Q4_1, Q5_0, Q5_1,
// IQ4_NL, Q4_K, Q5_K, IQ4_XS; Q2_K, Q3_K, Q6_K per 16-element half): packed row tiles (32 rows on AVX-512, 16
// elsewhere), column chunks of 32 groups, token groups of 6 or 2.
// Rows and columns around those edges, every token count up to two groups
// past the threshold, odd thread counts. Beside the reference bound (check),
// each output must equal the single-token path's (the row kernels, the same
// int8 activations) up to f32 summation order: 1e-5 of sum |w x|.
// The K-quants' and IQ4_XS's row kernels quantize the activations per 256,
// the packed GEMM per 32: for them only the reference bound applies.
void check_packed_tiles(GgmlType t) {
  SCOPED_TRACE(ggml_type_name(t));
  const bool k256 = ggml_block_elems(t) == 256;
  struct Case { std::size_t rows, cols, n_tokens; int threads; };
  std::vector<Case> cases;
  // Q8_0 every edge; the other types (the same tiles, their own packing)
  // fewer: one chunk of 32 groups and more than one.
  const bool all = t == GgmlType::Q8_0;
  const std::vector<std::size_t> col_set = k256 ? std::vector<std::size_t>{256, 2304}
                                           : all ? std::vector<std::size_t>{32, 96, 1024, 1056, 2080}
                                                 : std::vector<std::size_t>{96, 1056};
  for (std::size_t rows : {1, 15, 16, 17, 31, 32, 33, 70})
    if (all || rows % 16 == 1 || rows == 70)
      for (std::size_t cols : col_set) cases.push_back({rows, cols, kPackedGemmAllTokens + rows % 5, 1});
  for (std::size_t n = kPackedGemmAllTokens; n <= kPackedGemmAllTokens + 9; n += all ? 1 : 4)
    cases.push_back({37, k256 ? 256u : 64u, n, 1});
  cases.push_back({100, k256 ? 1280u : 1056u, 13, 2});
  cases.push_back({45, k256 ? 1280u : 1056u, 40, 2});
  for (std::size_t n : {2, 7, 8, 12}) cases.push_back({37, k256 ? 512u : 1056u, n, 1});  // packed or not, by ISA and type
  cases.push_back({65, k256 ? 2304u : 2080u, 9, 3});
  for (const Case& c : cases) {
    SCOPED_TRACE("rows=" + std::to_string(c.rows) + " cols=" + std::to_string(c.cols) +
                 " tokens=" + std::to_string(c.n_tokens) + " threads=" + std::to_string(c.threads));
    const std::uint64_t seed = c.rows * 1000 + c.cols + c.n_tokens;
    const Weights w = make_weights(t, c.rows, c.cols, seed);
    const Expected e = expected_outputs(t, w, c.rows, c.cols, c.n_tokens, seed);
    std::vector<double> mag(c.n_tokens * c.rows);  // (n_tokens, rows) sum |w x|
    for (std::size_t tok = 0; tok < c.n_tokens; ++tok)
      for (std::size_t r = 0; r < c.rows; ++r)
        for (std::size_t i = 0; i < c.cols; ++i)
          mag[tok * c.rows + r] += std::fabs(double(w.deq[r * c.cols + i]) * e.x[tok * e.ldx + i]);
    for (Isa isa : supported_isas()) {
      SCOPED_TRACE(isa_name(isa));
      const auto& k = matvec_kernels(isa);
      check_against(isa, t, w, e, c.threads);
      const std::size_t ldy = c.rows + 2;
      std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, c.cols, c.n_tokens));
      std::vector<float> y(c.n_tokens * ldy, -7.f), y1(c.rows);
      test::matmul_on_threads(k, t, w.bytes.data(), c.rows, c.cols, e.x.data(), e.ldx, c.n_tokens, y.data(), ldy,
                              scratch.data(), c.threads);
      for (std::size_t tok = 0; tok < c.n_tokens && !k256; ++tok) {
        k.matvec(t, w.bytes.data(), c.rows, c.cols, e.x.data() + tok * e.ldx, y1.data(), scratch.data());
        for (std::size_t r = 0; r < c.rows; ++r)
          ASSERT_NEAR(y[tok * ldy + r], y1[r], 1e-5 * mag[tok * c.rows + r] + 1e-6) << "token " << tok << " row " << r;
        for (std::size_t r = c.rows; r < ldy; ++r) ASSERT_EQ(y[tok * ldy + r], -7.f) << "wrote past rows";
      }
    }
  }
  // A non-finite activation poisons only its own token's outputs.
  const std::size_t rows = 33, cols = k256 ? 1280 : 1056, n = kPackedGemmAllTokens + 2;
  const Weights w = make_weights(t, rows, cols, 5);
  auto x = test::random_vector(n * cols, 6, -2.f, 2.f);
  x[3 * cols + 1040] = NAN;
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, n));
    std::vector<float> y(n * rows);
    k.matmul(t, w.bytes.data(), rows, cols, x.data(), cols, n, y.data(), rows, scratch.data());
    for (std::size_t tok = 0; tok < n; ++tok)
      for (std::size_t r = 0; r < rows; ++r)
        EXPECT_EQ(std::isfinite(y[tok * rows + r]), tok != 3) << isa_name(isa) << " token " << tok << " row " << r;
  }
}

TEST(Matvec, Q8PackedTilesMatchRowKernels) {
  int n_packed = 0;
  for (GgmlType t : kTypes) {
    if (!matvec_has_packed_gemm(t)) continue;
    check_packed_tiles(t);
    ++n_packed;
  }
  EXPECT_EQ(n_packed, 12);  // Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS
}

// Blocks of random bytes, but for finite fp16 scales (d in [-0.05, 0.05],
// dmin in [0, 0.05]): every scale and integer pattern a file can hold, which
// Latte's own quantizer (its K-quant scales non-negative) never writes: Q3_K's
// negative sub-block scales, down to -32 against q = -4 (the packed GEMM's
// integer -128; row 0's first block is all of that), Q6_K's -128 scales.
template <class Block>
Weights random_blocks(GgmlType t, std::size_t rows, std::size_t cols, std::uint64_t seed, std::size_t d_off,
                      std::size_t dmin_off) {
  Weights w;
  const std::size_t nb = rows * cols / 256;
  w.bytes.resize(nb * sizeof(Block));
  auto r = test::random_vector(w.bytes.size() + 2 * nb, seed, 0.f, 256.f);
  for (std::size_t i = 0; i < w.bytes.size(); ++i) w.bytes[i] = static_cast<std::uint8_t>(r[i]);
  for (std::size_t b = 0; b < nb; ++b) {
    std::uint8_t* blk = w.bytes.data() + b * sizeof(Block);
    const std::uint16_t d = f32_to_fp16((r[w.bytes.size() + 2 * b] - 128.f) / 2560.f);
    std::memcpy(blk + d_off, &d, 2);
    if (dmin_off != d_off) {
      const std::uint16_t m = f32_to_fp16(r[w.bytes.size() + 2 * b + 1] / 5120.f);
      std::memcpy(blk + dmin_off, &m, 2);
    }
  }
  if (t == GgmlType::Q3_K) std::memset(w.bytes.data(), 0, offsetof(BlockQ3_K, d));  // scales -32, q -4
  w.deq.resize(rows * cols);
  const std::size_t rb = ggml_row_bytes(t, cols);
  for (std::size_t row = 0; row < rows; ++row)
    dequantize_row_ref(t, w.bytes.data() + row * rb, w.deq.data() + row * cols, cols);
  return w;
}

// Checks w (rows, cols) on every path: against the reference bound with
// random activations, and, with activations the int8 quantization holds
// exactly (integers up to 127, each 32 reaching 127), against the reference
// up to f32 summation order (1e-5 of sum |w x|): a wrong integer anywhere
// shows there, where the bound's slack for activation rounding would hide it.
void check_any_bits(Isa isa, GgmlType t, const Weights& w, std::size_t rows, std::size_t cols) {
  const auto& k = matvec_kernels(isa);
  for (std::size_t n : {1, 2, 5, 8, 12, 34}) {
    SCOPED_TRACE(std::string(isa_name(isa)) + " " + ggml_type_name(t) + " tokens=" + std::to_string(n));
    check_weights(isa, t, w, rows, cols, n, 1, n);
    auto r = test::random_vector(n * cols, n + 9, -127.f, 127.f);
    std::vector<float> x(n * cols);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 32 == 7 ? 127.f : std::nearbyint(r[i]);
    std::vector<float> ref(n * rows), got(n * rows);
    matmul_ref(t, w.bytes.data(), rows, cols, x.data(), cols, n, ref.data(), rows, nullptr);
    std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, n));
    if (n == 1) k.matvec(t, w.bytes.data(), rows, cols, x.data(), got.data(), scratch.data());
    else k.matmul(t, w.bytes.data(), rows, cols, x.data(), cols, n, got.data(), rows, scratch.data());
    for (std::size_t tok = 0; tok < n; ++tok)
      for (std::size_t row = 0; row < rows; ++row) {
        double mag = 0;
        for (std::size_t c = 0; c < cols; ++c) mag += std::fabs(double(w.deq[row * cols + c]) * x[tok * cols + c]);
        ASSERT_NEAR(got[tok * rows + row], ref[tok * rows + row], 1e-5 * mag + 1e-6)
            << "exact activations, token " << tok << " row " << row;
      }
  }
}

// asimd (ARMv8.0) runs neon's bodies with each sdot emulated, exactly: every
// type's decode and prefill products come out bit for bit the same (where
// the CPU runs both; under qemu -cpu max).
TEST(Matvec, AsimdEqualsNeonBitForBit) {
  if (!isa_supported(Isa::asimd) || !isa_supported(Isa::neon)) GTEST_SKIP() << "needs asimd and neon";
  const auto& a = matvec_kernels(Isa::asimd);
  const auto& n = matvec_kernels(Isa::neon);
  const std::size_t rows = 37, cols = 512, tokens = 20;
  for (GgmlType t : kTypes) {
    const Weights w = make_weights(t, rows, cols, 91);
    auto x = test::random_vector(tokens * cols, 92, -3.f, 3.f);  // (tokens, cols)
    std::vector<std::uint8_t> scratch(matvec_scratch_bytes(t, cols, tokens) + 64);
    std::vector<float> ya(tokens * rows), yn(tokens * rows);
    a.matvec(t, w.bytes.data(), rows, cols, x.data(), ya.data(), scratch.data());
    n.matvec(t, w.bytes.data(), rows, cols, x.data(), yn.data(), scratch.data());
    EXPECT_EQ(std::memcmp(ya.data(), yn.data(), rows * sizeof(float)), 0) << ggml_type_name(t) << " matvec";
    test::matmul_on_threads(a, t, w.bytes.data(), rows, cols, x.data(), cols, tokens, ya.data(), rows, scratch.data(), 2);
    test::matmul_on_threads(n, t, w.bytes.data(), rows, cols, x.data(), cols, tokens, yn.data(), rows, scratch.data(), 2);
    EXPECT_EQ(std::memcmp(ya.data(), yn.data(), ya.size() * sizeof(float)), 0) << ggml_type_name(t) << " matmul";
  }
}

TEST(Matvec, KQuantsAnyBitPattern) {
  const std::size_t rows = 37, cols = 1280;
  for (Isa isa : supported_isas()) {
    check_any_bits(isa, GgmlType::Q2_K,
                   random_blocks<BlockQ2_K>(GgmlType::Q2_K, rows, cols, 1, offsetof(BlockQ2_K, d),
                                            offsetof(BlockQ2_K, dmin)),
                   rows, cols);
    check_any_bits(isa, GgmlType::Q3_K,
                   random_blocks<BlockQ3_K>(GgmlType::Q3_K, rows, cols, 2, offsetof(BlockQ3_K, d),
                                            offsetof(BlockQ3_K, d)),
                   rows, cols);
    check_any_bits(isa, GgmlType::Q6_K,
                   random_blocks<BlockQ6_K>(GgmlType::Q6_K, rows, cols, 3, offsetof(BlockQ6_K, d),
                                            offsetof(BlockQ6_K, d)),
                   rows, cols);
  }
}

// The runtime calls the kernels with one thread from inside its own parallel
// region (a thread per expert, per run of rows): each call must compute
// every row itself, the same as a call from outside any region, whichever
// thread of the caller's team makes it. Tokens 1 (the row kernels), 3 (the
// token groups) and 40 (the packed GEMM where the ISA has one).
TEST(Matvec, OneThreadInsideTheCallersRegion) {
  constexpr int kTeam = 3;
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    for (GgmlType t : {GgmlType::F16, GgmlType::Q8_0, GgmlType::Q5_0, GgmlType::Q4_K}) {
      const std::size_t rows = 80, cols = 512;
      const Weights w = make_weights(t, rows, cols, 77);
      for (std::size_t n : {1, 3, 40}) {
        SCOPED_TRACE(std::string(isa_name(isa)) + " " + ggml_type_name(t) + " tokens=" + std::to_string(n));
        const auto x = test::random_vector(n * cols, 78 + n, -2.f, 2.f);  // (n, cols)
        const std::size_t sb = matvec_scratch_bytes(t, cols, n);
        std::vector<float> want(n * rows);
        std::vector<std::uint8_t> scratch((kTeam + 1) * sb);
        k.matmul(t, w.bytes.data(), rows, cols, x.data(), cols, n, want.data(), rows, scratch.data());
        std::vector<std::vector<float>> got(kTeam, std::vector<float>(n * rows, -7.f));
        ThreadPool pool(kTeam);
        pool.run(kTeam, [&](int s, int ns) {
          for (int i = kTeam * s / ns; i < kTeam * (s + 1) / ns; ++i)
            k.matmul(t, w.bytes.data(), rows, cols, x.data(), cols, n, got[i].data(), rows,
                     scratch.data() + (i + 1) * sb);
        });
        for (int i = 0; i < kTeam; ++i) EXPECT_EQ(got[i], want) << "slot " << i << " of the caller's region";
      }
    }
  }
}

TEST(Matvec, RejectsBadArguments) {
  for (Isa isa : supported_isas()) {
    const auto& k = matvec_kernels(isa);
    std::vector<std::uint8_t> w(1024);
    std::vector<float> x(300), y(4);
    std::vector<std::uint8_t> s(4096);
    EXPECT_THROW(k.matvec(GgmlType::Q4_K, w.data(), 1, 128, x.data(), y.data(), s.data()), std::invalid_argument);
    EXPECT_THROW(k.matvec(static_cast<GgmlType>(99), w.data(), 1, 32, x.data(), y.data(), s.data()),
                 std::invalid_argument);
  }
  EXPECT_THROW(matvec_scratch_bytes(GgmlType::Q8_0, 33, 1), std::invalid_argument);
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::F16, 64, 3), 0u);
  // 3 tokens' ActQ8s, then one token's pairs of groups for the AVX-512
  // decode rows: 64 bytes per pair, d and s padded to 16 groups.
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::Q4_0, 64, 3), 3u * 2u * sizeof(ActQ8) + 64u + 2u * 4u * 16u);
  // The packed GEMM's types, from kPackedGemmMinTokens (8): ActQ8s and
  // their integer sums per 16.
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::Q8_0, 64, 7), 7u * 2u * sizeof(ActQ8));
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::Q8_0, 64, 8), 8u * 2u * (sizeof(ActQ8) + 8u));
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::Q6_K, 256, 7), 7u * sizeof(ActQ8K));
  EXPECT_EQ(matvec_scratch_bytes(GgmlType::Q6_K, 256, 8), 8u * 8u * (sizeof(ActQ8) + 8u));
}

}  // namespace
}  // namespace latte::kernels
