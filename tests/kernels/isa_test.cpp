// ISA selection (names, support, the LATTE_ISA cap, the ISAs this machine must
// run) and dot_f32, the smallest kernel family, on every ISA.
#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/dot_f32/dot_f32.h"
#include "tests/kernels/kernel_test_util.h"

namespace latte {
namespace {

TEST(Isa, NamesRoundTrip) {
  for (Isa i : {Isa::ref, Isa::avx2, Isa::avx512, Isa::asimd, Isa::neon}) {
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
  EXPECT_FALSE(isa_supported(Isa::asimd));
#endif
#if defined(__aarch64__)
  EXPECT_FALSE(isa_supported(Isa::avx2));
  // Every AArch64 Linux core has ASIMD; neon (dot products) falls back to it.
  EXPECT_TRUE(isa_supported(Isa::asimd));
  EXPECT_EQ(best_isa_up_to(Isa::asimd), Isa::asimd);
  EXPECT_EQ(best_isa_up_to(Isa::neon), isa_supported(Isa::neon) ? Isa::neon : Isa::asimd);
#endif
}

// LATTE_ISA caps the choice; unset, the best supported ISA is used.
TEST(Isa, ActiveIsaHonoursLatteIsa) {
  const char* env = std::getenv("LATTE_ISA");
  if (env != nullptr && *env != '\0') {
    auto cap = parse_isa(env);
    ASSERT_TRUE(cap.has_value()) << env;
    EXPECT_EQ(active_isa(), best_isa_up_to(*cap));
  } else {
    EXPECT_EQ(active_isa(), supported_isas().back());
  }
}

// scripts/test.sh names the ISAs this machine must run (from /proc/cpuinfo,
// or neon under qemu), so a build that silently lost a kernel fails here
// instead of testing only the reference.
TEST(Isa, ExpectedIsasAreSupported) {
  const char* env = std::getenv("LATTE_EXPECT_ISAS");
  if (env == nullptr || *env == '\0') GTEST_SKIP() << "LATTE_EXPECT_ISAS not set (CPU ISA list unknown)";
  std::string list = env;
  std::size_t start = 0;
  while (start <= list.size()) {
    std::size_t end = list.find(',', start);
    if (end == std::string::npos) end = list.size();
    const std::string name = list.substr(start, end - start);
    if (!name.empty()) {
      auto isa = parse_isa(name);
      ASSERT_TRUE(isa.has_value()) << name;
      EXPECT_TRUE(isa_supported(*isa)) << name << " expected but not supported";
    }
    start = end + 1;
  }
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
