// dot_f32 for neon (ARMv8.2 dot products): compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/dot_f32/dot_f32_impl.h"

namespace latte::kernels {

const DotF32Kernels* dot_f32_kernels_neon() {
  static const DotF32Kernels k{&dot_f32_body<xsimd::neon64>};
  return &k;
}

}  // namespace latte::kernels
