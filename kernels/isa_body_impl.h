// What every per-ISA kernel body (*_impl.h) includes first, in one place:
// GCC's AVX-512 warning state (before the intrinsic headers), xsimd, this
// target's intrinsics, and the check that the including file is an ISA's
// translation unit (<family>__<isa>.cpp), which names the ISA's namespace.
// The bodies then open `namespace latte::kernels { inline namespace
// LATTE_KERNEL_ISA_NS {`: each ISA's instances in a namespace of their own,
// so two ISAs compiled with the same flags (neon, asimd) never share one.
#pragma once

#include "kernels/gcc_avx512_warnings.h"  // before the intrinsic headers

#include <xsimd/xsimd.hpp>

#if defined(__x86_64__)
#include <immintrin.h>
#elif defined(__aarch64__)
#include <arm_neon.h>
#endif

#ifndef LATTE_KERNEL_ISA_NS
#error "a kernel body is compiled in its ISA's file, which names the ISA's namespace (CMakeLists.txt)"
#endif
