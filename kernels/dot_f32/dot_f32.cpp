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

const DotF32Kernels& dot_f32_kernels(Isa isa) {
  if (!isa_supported(isa))
    throw std::runtime_error(std::string("dot_f32: ISA ") + isa_name(isa) + " is not supported here");
  switch (isa) {
#ifdef LATTE_HAVE_AVX2
    case Isa::avx2: return *dot_f32_kernels_avx2();
#endif
#ifdef LATTE_HAVE_AVX512
    case Isa::avx512: return *dot_f32_kernels_avx512();
#endif
#ifdef LATTE_HAVE_NEON
    case Isa::neon: return *dot_f32_kernels_neon();
#endif
#ifdef LATTE_HAVE_ASIMD
    case Isa::asimd: return *dot_f32_kernels_asimd();
#endif
    default: return kRef;
  }
}

}  // namespace latte::kernels
