// swiglu_f32 for neon (ARMv8.2 dot products): compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/swiglu_f32/swiglu_f32_impl.h"

namespace latte::kernels {

const SwigluF32Kernels* swiglu_f32_kernels_neon() {
  static const SwigluF32Kernels k{&swiglu_f32_body<xsimd::neon64>};
  return &k;
}

}  // namespace latte::kernels
