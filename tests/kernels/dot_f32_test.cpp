// dot_f32, the smallest kernel family: every ISA against the reference, on
// odd and round lengths, and an ISA the CPU does not run refused.
#include "kernels/dot_f32/dot_f32.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <stdexcept>

#include "kernels/isa.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

TEST(DotF32, MatchesReferenceEveryIsa) {
  for (Isa isa : supported_isas()) {
    const auto& k = kernels::dot_f32_kernels(isa);
    for (std::size_t n : {0, 1, 7, 15, 16, 17, 31, 33, 64, 100, 511, 512, 2048, 4097}) {
      auto a = test::random_vector(n, 1, -1.f, 1.f);
      auto b = test::random_vector(n, 2, -1.f, 1.f);
      float ref = kernels::dot_f32_ref(a.data(), b.data(), n);
      float got = k.dot(a.data(), b.data(), n);
      EXPECT_NEAR(got, ref, 1e-5f * (1.f + static_cast<float>(n))) << isa_name(isa) << " n=" << n;
    }
  }
}

TEST(DotF32, UnsupportedIsaIsRefused) {
#if defined(__x86_64__)
  EXPECT_THROW(kernels::dot_f32_kernels(Isa::neon), std::runtime_error);
#else
  EXPECT_THROW(kernels::dot_f32_kernels(Isa::avx2), std::runtime_error);
#endif
}

}  // namespace
}  // namespace latte
