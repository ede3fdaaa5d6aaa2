// Dot product of two f32 vectors: the smallest kernel family, and the pattern
// every family follows:
//   <family>.h         the function table and the scalar reference
//   <family>.cpp       the reference and the dispatch (baseline flags)
//   <family>_impl.h    one body over an xsimd Arch template
//   <family>__<isa>.cpp  that body instantiated with one ISA's flags
#pragma once

#include <cstddef>

#include "kernels/dispatch.h"
#include "kernels/isa.h"

namespace latte::kernels {

struct DotF32Kernels {
  // sum_i a[i] * b[i]
  float (*dot)(const float* a, const float* b, std::size_t n);
};

// Naive on purpose: the ground truth (double accumulation).
float dot_f32_ref(const float* a, const float* b, std::size_t n);

// The table for `isa` (kernels/dispatch.h): isa must be supported
// (isa_supported), else throws; the per-ISA tables are defined in
// dot_f32__<isa>.cpp.
LATTE_DECLARE_KERNEL_TABLES(dot_f32, DotF32Kernels);

}  // namespace latte::kernels
