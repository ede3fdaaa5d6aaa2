// dot_f32's scalar reference and its dispatch to the per-ISA tables. Baseline
// flags: no SIMD body here (those are in dot_f32__<isa>.cpp).
#include "kernels/dot_f32/dot_f32.h"

#include <stdexcept>
#include <string>

namespace latte::kernels {

float dot_f32_ref(const float* a, const float* b, std::size_t n) {
  double acc = 0.0;
  for (std::size_t i = 0; i < n; ++i) acc += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(acc);
}

namespace {
const DotF32Kernels kRef{&dot_f32_ref};
}

LATTE_DEFINE_KERNEL_DISPATCH(dot_f32, DotF32Kernels, kRef)

}  // namespace latte::kernels
