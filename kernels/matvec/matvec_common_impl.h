// The matvec family's per-ISA bodies: what every part shares (included only
// through matvec_impl.h by matvec__<isa>.cpp). Everything in these headers is
// a template over the xsimd Arch or in an anonymous namespace (per-TU copies
// compiled with that TU's flags), and nothing uses std templates: an inline
// copy compiled with -mavx512f must never be the one the linker keeps for
// baseline callers (isa_object_hygiene). Each part's first comment says
// where its bodies are xsimd (one body over the Arch) and where per-ISA
// intrinsics, and why.
#pragma once

#include "kernels/int8/int8_ops_impl.h"  // first: kernels/isa_body_impl.h

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {
namespace {

inline std::size_t mv_min(std::size_t a, std::size_t b) { return a < b ? a : b; }

// True where the AVX-512 VNNI kernels serve Arch: the decode rows
// (row_b32_zmm, row_k45_zmm, row_q6_k_zmm, row_iq4_xs_zmm) in place of the
// 256-bit ones, the x16 tile kernels, and the packed GEMM's packing straight
// from x16 tiles.
template <class Arch>
constexpr bool uses_zmm_rows() {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
  return std::is_same_v<Arch, xsimd::avx512bw>;
#else
  return false;
#endif
}

// IQ4_NL's table, copied by value into this file's own (internal) array:
// taking the address of the header's inline variable here made it a weak
// symbol of this per-ISA object (isa_object_hygiene).
alignas(16) constexpr std::int8_t kIq4Table[16] = {
    kIq4nlValues[0], kIq4nlValues[1], kIq4nlValues[2],  kIq4nlValues[3],  kIq4nlValues[4],  kIq4nlValues[5],
    kIq4nlValues[6], kIq4nlValues[7], kIq4nlValues[8],  kIq4nlValues[9],  kIq4nlValues[10], kIq4nlValues[11],
    kIq4nlValues[12], kIq4nlValues[13], kIq4nlValues[14], kIq4nlValues[15]};

}  // namespace
}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
