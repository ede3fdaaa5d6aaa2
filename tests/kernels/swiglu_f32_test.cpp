// SwiGLU gating (silu(a) * b): every ISA against the double reference.
#include "kernels/swiglu_f32/swiglu_f32.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/isa.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

// Within a few float ulps of the double result: the polynomial exponential
// (~2 ulp), the division and the product each round once: 4 epsilon
// relative, above the measured error (docs/performance-log.md, "Figures
// moved out of code comments"). Below 1e-30 in magnitude (a gate below
// about -65) absolutely: the kernel gives -0 below -88, where the double
// reference still has a tiny or subnormal value.
void expect_close(float got, float ref, const char* what, std::size_t i) {
  const float tol = 4 * std::numeric_limits<float>::epsilon() * std::fabs(ref) + 1e-30f;
  EXPECT_NEAR(got, ref, tol) << what << " i=" << i;
}

// Odd lengths (the padded tail), FFN widths (V2-Lite's experts 1408, its
// dense FFN 10944), and gate values from where silu is ~x * b through the
// bend to where exp(-a) overflows (silu ~ -0).
TEST(SwigluF32, MatchesReferenceEveryIsa) {
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::swiglu_f32_kernels(isa);
    for (std::size_t n : {0, 1, 7, 15, 16, 17, 31, 33, 100, 1408, 10944}) {
      for (float range : {1.f, 12.f, 120.f}) {
        const auto a = test::random_vector(n, 3 + n, -range, range);
        const auto b = test::random_vector(n, 4 + n, -2.f, 2.f);
        auto got = a, ref = a;
        k.silu_mul(got.data(), b.data(), n);
        kernels::swiglu_f32_ref(ref.data(), b.data(), n);
        for (std::size_t i = 0; i < n; ++i) {
          expect_close(got[i], ref[i], isa_name(isa), i);
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
  }
}

// The values a model whose numbers overflow hands it: NaN stays NaN (the
// session's logits check then reports it), +-inf stays not finite (-inf
// gives NaN, as the formula's -inf / inf), and a gate far below zero gives
// ~0.
TEST(SwigluF32, SpecialValuesEveryIsa) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::swiglu_f32_kernels(isa);
    // 19 values: a full batch on every ISA and a tail
    std::vector<float> a = {nan, inf, -inf, -1000.f, -88.f, 88.f, 0.f, -0.f, 1e-30f, 3.f,
                            nan, 1.f, -1.f, 2.f, -2.f, 50.f, -50.f, inf, nan};
    const std::vector<float> b(a.size(), 1.5f);
    const auto a_in = a;
    auto ref = a;
    kernels::swiglu_f32_ref(ref.data(), b.data(), ref.size());
    k.silu_mul(a.data(), b.data(), a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::isnan(b[i] * a_in[i])) {
        EXPECT_TRUE(std::isnan(a[i])) << isa_name(isa) << " i=" << i << " got " << a[i];
      } else if (!std::isfinite(ref[i])) {
        EXPECT_FALSE(std::isfinite(a[i])) << isa_name(isa) << " i=" << i << " got " << a[i];
      } else {
        expect_close(a[i], ref[i], isa_name(isa), i);
      }
    }
  }
}

// Gates far below zero (an overflowing model's, short of -inf): silu(a) is
// ~a * exp(a), below any float. The clamped exponential stops at ~1.65e38,
// so a / (1 + exp(-a)) alone gave a / 1.65e38: -6e-9 at -1e30, -2.06 at
// -3.4e38, in a full batch and in the tail alike.
TEST(SwigluF32, HugeNegativeGatesGiveZeroEveryIsa) {
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::swiglu_f32_kernels(isa);
    const std::vector<float> gates = {-89.f, -200.f, -1e10f, -1e30f, -3.4e38f, -std::numeric_limits<float>::max()};
    for (float g : gates) {
      std::vector<float> a(19, g);  // a full batch on every ISA and a tail
      const std::vector<float> b(a.size(), 3.f);
      k.silu_mul(a.data(), b.data(), a.size());
      for (std::size_t i = 0; i < a.size(); ++i)
        EXPECT_LE(std::fabs(a[i]), 1e-30f) << isa_name(isa) << " gate " << g << " i=" << i << " got " << a[i];
    }
  }
}

}  // namespace
}  // namespace latte
