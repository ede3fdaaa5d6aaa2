// The exponentials of a softmax: x[j] = exp(x[j] - shift) and their sum, for
// the naive prefill form's online softmax over blocks of decompressed keys
// (the absorbed form's kernels have their own, over int8 weights). SIMD,
// because scalar std::exp there is a large share of an f16-cache prefill
// (docs/performance-log.md, "Figures moved out of code comments").
#pragma once

#include <cstddef>

#include "kernels/dispatch.h"
#include "kernels/isa.h"

namespace latte::kernels {

struct SoftmaxF32Kernels {
  // x[j] = exp(x[j] - shift) for j < n, in place; returns their sum (f32
  // lanes, then added). The exponential as swiglu_f32's (kernels/
  // exp_f32_impl.h: within ~2 ulp; arguments below -87 give ~1.6e-38, not
  // 0). A NaN score gives NaN, and a NaN sum.
  float (*exp_shift_sum)(float* x, std::size_t n, float shift);
};

// Naive on purpose: the ground truth, exp in double of the f32 argument
// x[j] - shift (that rounding is the callers', as before the kernels).
float softmax_f32_exp_shift_sum_ref(float* x, std::size_t n, float shift);

// The table for `isa` (kernels/dispatch.h): isa must be supported
// (isa_supported), else throws; the per-ISA tables are defined in
// softmax_f32__<isa>.cpp.
LATTE_DECLARE_KERNEL_TABLES(softmax_f32, SoftmaxF32Kernels);

}  // namespace latte::kernels
