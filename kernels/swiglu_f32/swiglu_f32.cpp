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

const SwigluF32Kernels& swiglu_f32_kernels(Isa isa) {
  if (!isa_supported(isa))
    throw std::runtime_error(std::string("swiglu_f32: ISA ") + isa_name(isa) + " is not supported here");
  switch (isa) {
#ifdef LATTE_HAVE_AVX2
    case Isa::avx2: return *swiglu_f32_kernels_avx2();
#endif
#ifdef LATTE_HAVE_AVX512
    case Isa::avx512: return *swiglu_f32_kernels_avx512();
#endif
#ifdef LATTE_HAVE_NEON
    case Isa::neon: return *swiglu_f32_kernels_neon();
#endif
#ifdef LATTE_HAVE_ASIMD
    case Isa::asimd: return *swiglu_f32_kernels_asimd();
#endif
    default: return kRef;
  }
}

}  // namespace latte::kernels
