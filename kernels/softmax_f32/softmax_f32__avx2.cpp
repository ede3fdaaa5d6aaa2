// softmax_f32 for avx2: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/softmax_f32/softmax_f32_impl.h"

namespace latte::kernels {

const SoftmaxF32Kernels* softmax_f32_kernels_avx2() {
  static const SoftmaxF32Kernels k{&softmax_f32_body<xsimd::fma3<xsimd::avx2>>};
  return &k;
}

}  // namespace latte::kernels
