// mla_attn for avx512: compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/mla_attn/mla_attn_impl.h"

namespace latte::kernels {

const MlaAttnKernels* mla_attn_kernels_avx512() {
  static const MlaAttnKernels k{&mla_scratch_body<xsimd::avx512bw>,
                                &mla_decode_body<xsimd::avx512bw>,
                                &mla_prefill_body<xsimd::avx512bw>,
                                &mla_decode_begin_body<xsimd::avx512bw>,
                                &mla_decode_query_body<xsimd::avx512bw>,
                                &mla_decode_items_body<xsimd::avx512bw>,
                                &mla_decode_item_body<xsimd::avx512bw>,
                                &mla_decode_merge_body<xsimd::avx512bw>,
                                &mla_prefill_queries_body<xsimd::avx512bw>};
  return &k;
}

}  // namespace latte::kernels
