// dot_f32 for avx2: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/dot_f32/dot_f32_impl.h"

namespace latte::kernels {

const DotF32Kernels* dot_f32_kernels_avx2() {
  static const DotF32Kernels k{&dot_f32_body<xsimd::fma3<xsimd::avx2>>};
  return &k;
}

}  // namespace latte::kernels
