// matvec for avx2: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/matvec/matvec_impl.h"

namespace latte::kernels {

const MatvecKernels* matvec_kernels_avx2() {
  static const MatvecKernels k{&matvec_body<xsimd::fma3<xsimd::avx2>>, &matmul_body<xsimd::fma3<xsimd::avx2>>, &dequantize_body<xsimd::fma3<xsimd::avx2>>,
                               &dequantize_bf16_body<xsimd::fma3<xsimd::avx2>>, &matmul_x16_body<xsimd::fma3<xsimd::avx2>>, &x16_fast<xsimd::fma3<xsimd::avx2>>,
                               &matmul_plan_body<xsimd::fma3<xsimd::avx2>>, &matmul_quantize_body<xsimd::fma3<xsimd::avx2>>, &matmul_rows_body<xsimd::fma3<xsimd::avx2>>};
  return &k;
}

}  // namespace latte::kernels
