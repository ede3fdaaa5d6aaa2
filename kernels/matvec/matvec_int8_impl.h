// matvec's int8 primitives for this TU's architecture: one interface, two
// implementations (x86 and NEON intrinsics), over the dot products and
// reductions every family shares (kernels/int8_impl.h).
#pragma once

#if defined(__AVX2__)
#include "kernels/matvec/matvec_int8_x86_impl.h"
#elif defined(__aarch64__)
#include "kernels/matvec/matvec_int8_neon_impl.h"
#else
#error "matvec_int8_impl.h: no SIMD primitives for this target"
#endif
