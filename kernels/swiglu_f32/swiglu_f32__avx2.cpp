// swiglu_f32 for avx2: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/swiglu_f32/swiglu_f32_impl.h"

namespace latte::kernels {

const SwigluF32Kernels* swiglu_f32_kernels_avx2() {
  static const SwigluF32Kernels k{&swiglu_f32_body<xsimd::fma3<xsimd::avx2>>};
  return &k;
}

}  // namespace latte::kernels
