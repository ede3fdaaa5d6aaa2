// swiglu_f32's scalar reference and its dispatch to the per-ISA tables.
// Baseline flags: no SIMD body here (those are in swiglu_f32__<isa>.cpp).
#include "kernels/swiglu_f32/swiglu_f32.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace latte::kernels {

void swiglu_f32_ref(float* a, const float* b, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double x = a[i];
    a[i] = static_cast<float>(x / (1.0 + std::exp(-x)) * b[i]);
  }
}

namespace {
const SwigluF32Kernels kRef{&swiglu_f32_ref};
}

LATTE_DEFINE_KERNEL_DISPATCH(swiglu_f32, SwigluF32Kernels, kRef)

}  // namespace latte::kernels
