// cpu_features (cpu_features.h): CPUID and XGETBV on x86-64 (any OS; GCC's and
// clang's <cpuid.h>, MSVC's intrinsics); on aarch64 the OS's report, one
// branch per OS below. Architectures and OSes without a branch report nothing
// (the scalar kernels run).
#include "platform/cpu_features.h"

#if defined(__x86_64__) || defined(_M_X64)
#if defined(_MSC_VER)
#include <immintrin.h>
#include <intrin.h>
#else
#include <cpuid.h>
#endif
#elif defined(__aarch64__) || defined(_M_ARM64)
#if defined(__linux__)
#include <sys/auxv.h>
#elif defined(__APPLE__)
#include <sys/sysctl.h>
#elif defined(_WIN32)
#include <windows.h>
#endif
#endif

#include <cstdint>

namespace latte {

namespace {

#if defined(__x86_64__) || defined(_M_X64)

struct Regs {
  std::uint32_t a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(std::uint32_t leaf, std::uint32_t sub) {
  Regs r;
#if defined(_MSC_VER)
  int v[4];
  __cpuidex(v, static_cast<int>(leaf), static_cast<int>(sub));
  r = {static_cast<std::uint32_t>(v[0]), static_cast<std::uint32_t>(v[1]), static_cast<std::uint32_t>(v[2]),
       static_cast<std::uint32_t>(v[3])};
#else
  if (!__get_cpuid_count(leaf, sub, &r.a, &r.b, &r.c, &r.d)) r = {};
#endif
  return r;
}

// XCR0: which register state the OS saves on a context switch.
std::uint64_t xcr0() {
#if defined(_MSC_VER)
  return _xgetbv(0);
#else
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
#endif
}

bool bit(std::uint32_t v, int n) { return (v >> n) & 1u; }

CpuFeatures detect() {
  CpuFeatures f;
  const std::uint32_t max_leaf = cpuid(0, 0).a;
  if (max_leaf < 1) return f;
  const Regs l1 = cpuid(1, 0);
  // OSXSAVE: XGETBV may be executed; without it no AVX state is saved.
  if (!bit(l1.c, 27)) return f;
  const std::uint64_t xcr = xcr0();
  const bool ymm = (xcr & 0x6) == 0x6;           // SSE and AVX state
  const bool zmm = ymm && (xcr & 0xe0) == 0xe0;  // opmask, ZMM0-15 upper halves, ZMM16-31
  if (!ymm || !bit(l1.c, 28)) return f;          // AVX
  const Regs l7 = max_leaf >= 7 ? cpuid(7, 0) : Regs{};
  f.fma = bit(l1.c, 12);
  f.f16c = bit(l1.c, 29);
  f.avx2 = bit(l7.b, 5);
  if (zmm) {
    f.avx512f = bit(l7.b, 16);
    f.avx512dq = bit(l7.b, 17);
    f.avx512bw = bit(l7.b, 30);
    f.avx512vl = bit(l7.b, 31);
    f.avx512vnni = bit(l7.c, 11);
  }
  return f;
}

#elif defined(__aarch64__) || defined(_M_ARM64)

CpuFeatures detect() {
  CpuFeatures f;
#if defined(__linux__)
  // HWCAP_ASIMD and HWCAP_ASIMDDP of <asm/hwcap.h> (Linux and Android).
  const unsigned long hw = getauxval(AT_HWCAP);
  f.asimd = (hw & (1ul << 1)) != 0;
  f.asimd_dot = f.asimd && (hw & (1ul << 20)) != 0;
#elif defined(__APPLE__)
  // Every Apple arm64 core has Advanced SIMD; the dot products are reported
  // as FEAT_DotProd (macOS 12, iOS 15), before that as armv8_2_dotprod.
  f.asimd = true;
  for (const char* name : {"hw.optional.arm.FEAT_DotProd", "hw.optional.armv8_2_dotprod"}) {
    int v = 0;
    size_t n = sizeof v;
    if (sysctlbyname(name, &v, &n, nullptr, 0) == 0) {
      f.asimd_dot = v != 0;
      break;
    }
  }
#elif defined(_WIN32)
  // Windows on Arm requires Advanced SIMD; the dot products are feature 43.
#ifndef PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE
#define PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE 43
#endif
  f.asimd = true;
  f.asimd_dot = ::IsProcessorFeaturePresent(PF_ARM_V82_DP_INSTRUCTIONS_AVAILABLE) != 0;
#endif
  return f;
}

#else

CpuFeatures detect() { return {}; }

#endif

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

}  // namespace latte
