// What the CPU runs, as far as Latte's kernels care (platform layer,
// cpu_features.cpp). A feature counts only where the OS also supports it:
// on x86 the CPUID bits and the register state the OS saves (XGETBV: the
// ymm state for AVX2, the zmm and mask state for AVX-512), on every OS; on
// aarch64 what the OS reports (getauxval on Linux and Android, sysctlbyname
// on macOS and iOS, IsProcessorFeaturePresent on Windows). Baseline flags
// only: this runs before any ISA is chosen.
#pragma once

namespace latte {

struct CpuFeatures {
  // x86-64
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false, avx512vnni = false;
  // aarch64: Advanced SIMD, and its dot products (ARMv8.2's sdot/udot)
  bool asimd = false, asimd_dot = false;
};

// Read once, on the first call.
const CpuFeatures& cpu_features();

}  // namespace latte
