// matvec for neon (ARMv8.2 dot products): compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/matvec/matvec_impl.h"

namespace latte::kernels {

const MatvecKernels* matvec_kernels_neon() {
  static const MatvecKernels k{&matvec_body<xsimd::neon64>, &matmul_body<xsimd::neon64>, &dequantize_body<xsimd::neon64>,
                               &dequantize_bf16_body<xsimd::neon64>, &matmul_x16_body<xsimd::neon64>, &x16_fast<xsimd::neon64>,
                               &matmul_plan_body<xsimd::neon64>, &matmul_quantize_body<xsimd::neon64>, &matmul_rows_body<xsimd::neon64>};
  return &k;
}

}  // namespace latte::kernels
