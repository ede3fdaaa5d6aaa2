// mla_attn for avx2: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/mla_attn/mla_attn_impl.h"

namespace latte::kernels {

const MlaAttnKernels* mla_attn_kernels_avx2() {
  static const MlaAttnKernels k{&mla_scratch_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_prefill_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_begin_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_query_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_items_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_item_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_decode_merge_body<xsimd::fma3<xsimd::avx2>>,
                                &mla_prefill_queries_body<xsimd::fma3<xsimd::avx2>>};
  return &k;
}

}  // namespace latte::kernels
