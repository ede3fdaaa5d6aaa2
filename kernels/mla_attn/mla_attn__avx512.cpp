// mla_attn for avx512: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/mla_attn/mla_attn_impl.h"

namespace latte::kernels {

const MlaAttnKernels* mla_attn_kernels_avx512() {
  static const MlaAttnKernels k{&mla_scratch_body<xsimd::avx512bw>, &mla_decode_body<xsimd::avx512bw>,
                                &mla_prefill_body<xsimd::avx512bw>};
  return &k;
}

}  // namespace latte::kernels
