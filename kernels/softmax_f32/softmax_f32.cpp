// softmax_f32's scalar reference and its dispatch to the per-ISA tables.
// Baseline flags: no SIMD body here (those are in softmax_f32__<isa>.cpp).
#include "kernels/softmax_f32/softmax_f32.h"

#include <cmath>
#include <stdexcept>
#include <string>

namespace latte::kernels {

float softmax_f32_exp_shift_sum_ref(float* x, std::size_t n, float shift) {
  double sum = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // the argument rounded to f32 as the kernels (and their callers) form it
    const double e = std::exp(static_cast<double>(x[i] - shift));
    x[i] = static_cast<float>(e);
    sum += e;
  }
  return static_cast<float>(sum);
}

namespace {
const SoftmaxF32Kernels kRef{&softmax_f32_exp_shift_sum_ref};
}

LATTE_DEFINE_KERNEL_DISPATCH(softmax_f32, SoftmaxF32Kernels, kRef)

}  // namespace latte::kernels
