#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#include "kernels/dot_f32/dot_f32.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

TEST(Isa, NamesRoundTrip) {
  for (Isa i : {Isa::ref, Isa::avx2, Isa::avx512, Isa::neon}) {
    auto p = parse_isa(isa_name(i));
    ASSERT_TRUE(p.has_value());
    EXPECT_EQ(*p, i);
  }
  EXPECT_FALSE(parse_isa("sse9").has_value());
}

TEST(Isa, RefAlwaysSupportedAndFirst) {
  auto isas = supported_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::ref);
  EXPECT_EQ(best_isa_up_to(Isa::ref), Isa::ref);
}

TEST(Isa, CapNeverExceedsRequest) {
  for (Isa cap : {Isa::ref, Isa::avx2, Isa::avx512}) {
    Isa got = best_isa_up_to(cap);
    EXPECT_LE(static_cast<int>(got), static_cast<int>(cap));
    EXPECT_TRUE(isa_supported(got));
  }
#if defined(__x86_64__)
  EXPECT_FALSE(isa_supported(Isa::neon));
#endif
#if defined(__aarch64__)
  EXPECT_FALSE(isa_supported(Isa::avx2));
#endif
}

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
