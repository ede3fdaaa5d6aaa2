// matvec for avx512: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/matvec/matvec_impl.h"

namespace latte::kernels {

const MatvecKernels* matvec_kernels_avx512() {
  static const MatvecKernels k{&matvec_body<xsimd::avx512bw>, &matmul_body<xsimd::avx512bw>, &dequantize_body<xsimd::avx512bw>,
                               &dequantize_bf16_body<xsimd::avx512bw>, &matmul_x16_body<xsimd::avx512bw>, &x16_fast<xsimd::avx512bw>,
                               &matmul_plan_body<xsimd::avx512bw>, &matmul_quantize_body<xsimd::avx512bw>, &matmul_rows_body<xsimd::avx512bw>};
  return &k;
}

}  // namespace latte::kernels
