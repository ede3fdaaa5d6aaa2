// mla_attn for neon (ARMv8.2 dot products): compiled with this ISA's flags only (see CMakeLists.txt).
#include "kernels/mla_attn/mla_attn_impl.h"

namespace latte::kernels {

const MlaAttnKernels* mla_attn_kernels_neon() {
  static const MlaAttnKernels k{&mla_scratch_body<xsimd::neon64>,
                                &mla_decode_body<xsimd::neon64>,
                                &mla_prefill_body<xsimd::neon64>,
                                &mla_decode_begin_body<xsimd::neon64>,
                                &mla_decode_query_body<xsimd::neon64>,
                                &mla_decode_items_body<xsimd::neon64>,
                                &mla_decode_item_body<xsimd::neon64>,
                                &mla_decode_merge_body<xsimd::neon64>,
                                &mla_prefill_queries_body<xsimd::neon64>};
  return &k;
}

}  // namespace latte::kernels
