// ISA selection: names, support, the LATTE_ISA cap, the ISAs this machine
// must run.
#include "kernels/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

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

}  // namespace
}  // namespace latte
