// The softmax's exponentials and their sum: every ISA against the double
// reference.
#include "kernels/softmax_f32/softmax_f32.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/isa.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

// Scores as the naive form makes them (shifted by their running maximum, so
// every argument is <= 0, most far below): each exponential within 4 float
// epsilon relative (above the measured error: docs/performance-log.md,
// "Figures moved out of code comments"), or 1e-30 absolute where the
// reference is subnormal or the argument is below -87 (the kernel's clamp);
// the sum within 4 epsilon of the double sum plus n rounding steps of f32
// adds.
TEST(SoftmaxF32, MatchesReferenceEveryIsa) {
  const float eps = std::numeric_limits<float>::epsilon();
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::softmax_f32_kernels(isa);
    for (std::size_t n : {0, 1, 7, 15, 16, 17, 31, 33, 100, 256, 4097}) {
      for (float range : {1.f, 20.f, 120.f}) {
        const auto x = test::random_vector(n, 7 + n, -range, range);
        const float mx = n ? *std::max_element(x.begin(), x.end()) : 0.f;
        auto got = x, ref = x;
        const float sum = k.exp_shift_sum(got.data(), n, mx);
        const float ref_sum = kernels::softmax_f32_exp_shift_sum_ref(ref.data(), n, mx);
        for (std::size_t i = 0; i < n; ++i) {
          EXPECT_NEAR(got[i], ref[i], 4 * eps * ref[i] + 1e-30f) << isa_name(isa) << " n=" << n << " i=" << i;
          if (::testing::Test::HasFailure()) return;
        }
        EXPECT_NEAR(sum, ref_sum, (4 + static_cast<float>(n)) * eps * ref_sum + 1e-30f)
            << isa_name(isa) << " n=" << n << " range=" << range;
      }
    }
  }
}

// A NaN score (a model whose numbers overflowed) gives NaN there and a NaN
// sum, so the session's logits check reports it rather than attending past
// it; arguments of 0 give exactly 1.
TEST(SoftmaxF32, NanPropagatesEveryIsa) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::softmax_f32_kernels(isa);
    for (std::size_t pos : {0, 5, 16, 18}) {  // in a full batch and in the tail
      std::vector<float> x(19, 2.f);
      x[pos] = nan;
      const float sum = k.exp_shift_sum(x.data(), x.size(), 2.f);
      EXPECT_TRUE(std::isnan(sum)) << isa_name(isa) << " pos=" << pos;
      EXPECT_TRUE(std::isnan(x[pos])) << isa_name(isa) << " pos=" << pos;
      EXPECT_EQ(x[pos == 0 ? 1 : 0], 1.f) << isa_name(isa);
    }
  }
}

}  // namespace
}  // namespace latte
