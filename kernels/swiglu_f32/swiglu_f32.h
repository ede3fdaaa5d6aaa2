// SwiGLU's gating, the step between a SwiGLU FFN's gate and up products and
// its down product: a[i] = silu(a[i]) * b[i] = a[i] / (1 + exp(-a[i])) * b[i].
// SIMD, because scalar std::exp here is a visible part of every layer's
// decode step (docs/performance-log.md, "Figures moved out of code comments").
#pragma once

#include <cstddef>

#include "kernels/dispatch.h"
#include "kernels/isa.h"

namespace latte::kernels {

struct SwigluF32Kernels {
  // a[i] = a[i] / (1 + exp(-a[i])) * b[i] for i < n, in place. The
  // exponential is a polynomial after range reduction (kernels/
  // exp_f32_impl.h, within ~2 ulp of exp); a gate below -88 gives -0 times
  // b (silu is below any float there); NaN in, NaN out; a = -inf gives NaN,
  // as the formula does.
  void (*silu_mul)(float* a, const float* b, std::size_t n);
};

// Naive on purpose: the ground truth, in double.
void swiglu_f32_ref(float* a, const float* b, std::size_t n);

// The table for `isa` (kernels/dispatch.h): isa must be supported
// (isa_supported), else throws; the per-ISA tables are defined in
// swiglu_f32__<isa>.cpp.
LATTE_DECLARE_KERNEL_TABLES(swiglu_f32, SwigluF32Kernels);

}  // namespace latte::kernels
