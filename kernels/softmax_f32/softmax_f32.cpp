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

const SoftmaxF32Kernels& softmax_f32_kernels(Isa isa) {
  if (!isa_supported(isa))
    throw std::runtime_error(std::string("softmax_f32: ISA ") + isa_name(isa) + " is not supported here");
  switch (isa) {
#ifdef LATTE_HAVE_AVX2
    case Isa::avx2: return *softmax_f32_kernels_avx2();
#endif
#ifdef LATTE_HAVE_AVX512
    case Isa::avx512: return *softmax_f32_kernels_avx512();
#endif
#ifdef LATTE_HAVE_NEON
    case Isa::neon: return *softmax_f32_kernels_neon();
#endif
#ifdef LATTE_HAVE_ASIMD
    case Isa::asimd: return *softmax_f32_kernels_asimd();
#endif
    default: return kRef;
  }
}

}  // namespace latte::kernels
