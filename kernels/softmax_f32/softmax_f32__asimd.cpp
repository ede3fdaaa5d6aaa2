// softmax_f32 for asimd (ARMv8.0, dot products emulated): compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/softmax_f32/softmax_f32_impl.h"

namespace latte::kernels {

const SoftmaxF32Kernels* softmax_f32_kernels_asimd() {
  static const SoftmaxF32Kernels k{&softmax_f32_body<xsimd::neon64>};
  return &k;
}

}  // namespace latte::kernels
