// One body for every ISA: included only by matvec__<isa>.cpp. This header
// is the driver (type dispatch, the row and packed-GEMM drivers); the parts
// are its includes, each a header of its own:
//   matvec_common_impl.h        shared helpers and the rules below
//   matvec_gguf_impl.h          the GGUF formats' decoders, over the int8
//                               operation layer (kernels/int8/)
//   matvec_rows_impl.h, matvec_rows_zmm_impl.h   quantized row kernels
//   matvec_float_rows_impl.h    F32/F16/BF16 rows
//   matvec_quantize_act_impl.h  activation quantization
//   matvec_dequantize_impl.h    dequantization (prefill GEMM panels)
//   matvec_packed_gemm_impl.h   the packed int8 GEMM: its tile products and
//                               driver; matvec_packed_dot_impl.h (the tile
//                               layout, the dot step), matvec_packed_pack_impl.h
//                               and matvec_packed_pack_x16_impl.h (packing)
//   matvec_x16_zmm_impl.h       tile kernels over row-interleaved weights
// The Arch template parameter is xsimd's; the bodies use xsimd where a
// float operation has a portable form, and per-ISA intrinsics for the
// integer decoding and dot products, which have none.
//
// Everything here is either a template over the xsimd Arch or in an anonymous
// namespace (per-TU copies compiled with that TU's flags), and nothing uses
// std templates: an inline copy compiled with -mavx512f must never be the one
// the linker keeps for baseline callers.
//
// Quantized types: the activations are quantized once to int8 (ActQ8: one
// scale per 32; ActQ8K: one per 256 for the K-quants); each 32-element weight
// group is decoded to 32 bytes (unsigned 0..31 or signed int8) and dotted
// with the int8 activations (VNNI / maddubs / sdot). *_0/*_1/Q8_0: scaled by
// d_w * d_x into an f32 accumulator per group. K-quants: the integer sub-block
// scales multiply the int32 dots, one f32 FMA per 256. Offsets and mins
// (Q4_0's -8, Q4_1's m, K-quant mins) are applied through activation sums,
// so the integer path stays unsigned x signed.
#pragma once

#include "kernels/matvec/matvec_dequantize_impl.h"
#include "kernels/matvec/matvec_float_rows_impl.h"
#include "kernels/matvec/matvec_packed_gemm_impl.h"
#include "kernels/matvec/matvec_quantize_act_impl.h"
#include "kernels/matvec/matvec_rows_zmm_impl.h"
#include "kernels/matvec/matvec_x16_zmm_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

template <class Arch, int NT, GgmlType T>
void row_of_type(const std::uint8_t* w, std::size_t cols, const float* const* xf, const void* const* xv, float* out) {
  const auto* xq = reinterpret_cast<const ActQ8* const*>(xv);
  const auto* xk = reinterpret_cast<const ActQ8K* const*>(xv);
  if constexpr (T == GgmlType::F32) row_float<Arch, NT, 0>(w, cols, xf, out);
  else if constexpr (T == GgmlType::F16) row_float<Arch, NT, 1>(w, cols, xf, out);
  else if constexpr (T == GgmlType::BF16) row_float<Arch, NT, 2>(w, cols, xf, out);
  else {
    using G = Gguf<T>;
    const auto* b = reinterpret_cast<const typename G::Block*>(w);
    const std::size_t nb = cols / (32 * G::kGroups);
    if constexpr (T == GgmlType::Q8_0) row_q8_0<NT>(b, nb, xq, out);
    else if constexpr (has_b32_zmm_row(T) && T != GgmlType::IQ4_NL) row_q32<NT, T>(b, nb, xq, out);
    else if constexpr (T == GgmlType::IQ4_NL) row_iq4_nl<NT>(b, nb, xq, out);
    else if constexpr (T == GgmlType::Q2_K || T == GgmlType::Q3_K) row_k23<NT, T>(b, nb, xk, out);
    else if constexpr (T == GgmlType::Q4_K || T == GgmlType::Q5_K) row_k45<NT, T>(b, nb, xk, out);
    else if constexpr (T == GgmlType::Q6_K) row_q6_k<NT>(b, nb, xk, out);
    else row_iq4_xs<NT>(b, nb, xk, out);
  }
}

// out[t] = W row . x_t for NT tokens
template <class Arch, int NT>
void matvec_row(GgmlType type, const std::uint8_t* w, std::size_t cols, const float* const* xf,
                const void* const* xv, float* out) {
  with_type<Arch>(type, [&](auto T) { row_of_type<Arch, NT, T.value>(w, cols, xf, xv, out); });
}

// One token: rows [r0, r1) straight through with the row kernel of `type`,
// dispatched once per call rather than per row. Decode streams every weight
// through this loop, and the general path's per-row switch, call and tile
// bookkeeping slow it down (docs/performance-log.md, "Figures moved out of
// code comments").
// pairs: the ActPairs of act where uses_zmm_rows and has_b32_zmm_row.
template <class Arch>
void rows_1(GgmlType type, const std::uint8_t* w, std::size_t rb, std::size_t r0, std::size_t r1, std::size_t cols,
            const float* x, const void* act, const ActPairs* pairs, float* y) {
  const float* xf[1] = {x};
  const void* xv[1] = {act};
  with_type<Arch>(type, [&](auto T) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
    if constexpr (uses_zmm_rows<Arch>() && (T.value == GgmlType::Q4_K || T.value == GgmlType::Q5_K)) {
      using Block = std::conditional_t<T.value == GgmlType::Q4_K, BlockQ4_K, BlockQ5_K>;
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_k45_zmm<Block, T.value == GgmlType::Q5_K>(reinterpret_cast<const Block*>(w + r * rb), cols / 256,
                                                             static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && T.value == GgmlType::Q6_K) {
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_q6_k_zmm(reinterpret_cast<const BlockQ6_K*>(w + r * rb), cols / 256, static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && T.value == GgmlType::IQ4_XS) {
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_iq4_xs_zmm(reinterpret_cast<const BlockIQ4_XS*>(w + r * rb), cols / 256,
                              static_cast<const ActQ8K*>(act));
      return;
    }
    if constexpr (uses_zmm_rows<Arch>() && has_b32_zmm_row(T.value)) {
      const auto* xq = static_cast<const ActQ8*>(act);
      const std::size_t nb = cols / 32;
      using Block = typename Gguf<T.value>::Block;
      for (std::size_t r = r0; r < r1; ++r)
        y[r] = row_b32_zmm<T.value>(reinterpret_cast<const Block*>(w + r * rb), nb, xq, *pairs);
      return;
    }
#endif
    for (std::size_t r = r0; r < r1; ++r) row_of_type<Arch, 1, T.value>(w + r * rb, cols, xf, xv, y + r);
  });
}

// From how many tokens matmul takes the packed GEMM rather than the row
// kernels. The repacking decodes each weight group once, where the row
// kernels decode it once per 4 tokens, but it reads a tile's rows a column
// chunk at a time (TR short runs), which streams from DRAM slower than the
// row kernels' whole rows: with few tokens, where both are bound by the
// weights' reads, the row kernels win. The thresholds are the crossovers
// with the weights in DRAM, as in a model (docs/performance-log.md,
// "Figures moved out of code comments"):
// - AVX-512: the block-32 types and Q4_K, Q5_K, Q6_K, IQ4_XS from 8; Q2_K
//   and Q3_K, which fold their scales when packing, from 12.
// - AVX2 (two tokens per pass over a packed tile): the block-32 types from
//   8; Q4_K, Q5_K, Q6_K, IQ4_XS from 16; Q2_K and Q3_K, whose byte multiply
//   is a widen, multiply and pack there, from 32.
// - NEON: 16, not measured on hardware.
template <class Arch>
std::size_t packed_min_tokens(GgmlType t) {
  const bool small_k = t == GgmlType::Q2_K || t == GgmlType::Q3_K;
  const bool k256 = small_k || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K ||
                    t == GgmlType::IQ4_XS;
  static_assert(kPackedGemmMinTokens <= 8 && kPackedGemmAllTokens >= 32);
  if constexpr (Q8Dot<Arch>::V == 16) return small_k ? 12 : 8;  // AVX-512 VNNI
  else if constexpr (Q8Dot<Arch>::V == 8) return small_k ? 32 : k256 ? 16 : 8;  // AVX2
  else return 16;
}

// True where matmul_x16_body has tile kernels for `type` (AVX-512 VNNI).
template <class Arch>
bool x16_fast(GgmlType type) {
  return uses_zmm_rows<Arch>() && x16_type(type);
}

// Where matmul_x16_body's tile kernels run (AVX-512 VNNI) they take every
// call below kPackedGemmAllTokens: four tokens per pass over a tile held in
// cache cost less than the packed GEMM's repacking of the whole matrix (a
// batched decode step of 8 sequences ran 3x faster, prompt chunks of 8 to
// 24 tokens as fast or faster: docs/performance-log.md).
template <class Arch>
std::size_t x16_packed_min_tokens(GgmlType type) {
  return uses_zmm_rows<Arch>() ? kPackedGemmAllTokens : packed_min_tokens<Arch>(type);
}

// The paths of a product (MatmulPlan::path).
enum MatmulPath : int {
  kRows1,      // one token: the row kernels, each row read whole
  kRows4,      // 2 tokens up to the packed GEMM: 16-row tiles, 4 tokens a pass
  kPacked,     // the packed int8 GEMM
  kX16Packed,  // the packed GEMM over x16 tiles
  kX16Tiles,   // x16 tile kernels (AVX-512 VNNI)
  kX16Plain,   // x16 elsewhere below the packed GEMM: each tile back to the original layout, then kRows1 / kRows4
};

template <class Arch>
MatmulPlan matmul_plan_body(GgmlType type, std::size_t cols, std::size_t n_tokens, bool x16) {
  MatmulPlan p = matmul_plan_args(type, cols, n_tokens, x16);
  p.quantize = !is_float_type(type);
  // (cols 0: the row paths write the zero sums; the packed GEMM has no group
  // to start its outputs from.)
  const bool packed = cols > 0 && (x16 ? n_tokens >= x16_packed_min_tokens<Arch>(type)
                                       : matvec_has_packed_gemm(type) && n_tokens >= packed_min_tokens<Arch>(type));
  if (packed) {
    // The packed GEMM takes ActQ8 (one scale per 32) whatever the type, and
    // its tiles are TR rows.
    p.path = x16 ? kX16Packed : kPacked;
    p.sums = true;
    p.row_unit = static_cast<std::size_t>(Q8Dot<Arch>::V * Q8Dot<Arch>::MR);
  } else if (x16 && uses_zmm_rows<Arch>()) {
    p.path = kX16Tiles;
    p.kq = ggml_block_elems(type) == 256;  // the K-quants and IQ4_XS; ActQ8 for Q5_0 and Q4_0
  } else {
    p.path = x16 ? kX16Plain : n_tokens == 1 ? kRows1 : kRows4;
    p.kq = ggml_has_super_blocks(type);
    p.pairs = n_tokens == 1 && uses_zmm_rows<Arch>() && has_b32_zmm_row(type);
    if (x16) p.work_bytes = 16 * ggml_row_bytes(type, cols);
  }
  p.act_bytes = p.kq ? cols / 256 * sizeof(ActQ8K) : cols / 32 * sizeof(ActQ8);
  return p;
}

// scratch: [n_tokens] act_bytes each (ActQ8 or ActQ8K runs), then the packed
// GEMM's integer sums (n_tokens, cols/16) or one token's ActPairs
// (matvec_scratch_bytes).
template <class Arch>
void matmul_quantize_body(const MatmulPlan& p, const float* x, std::size_t ldx, std::size_t t0, std::size_t t1,
                          void* scratch) {
  if (!p.quantize || t1 <= t0) return;
  auto* xb = static_cast<std::uint8_t*>(scratch);
  auto* xs = p.sums ? reinterpret_cast<std::int32_t*>(xb + p.n_tokens * p.act_bytes) : nullptr;
  quantize_tokens<Arch>(p.kq, x, ldx, t0, t1, p.cols, xb, p.act_bytes, xs);
  if (p.pairs && t0 == 0)
    build_act_pairs(reinterpret_cast<const ActQ8*>(xb), p.cols / 32, xb + p.act_bytes,
                    p.type == GgmlType::Q5_0 || p.type == GgmlType::Q5_1);
}

// Rows [0, rows) of w (original layout) for the kRows1 / kRows4 paths.
template <class Arch>
void rows_path(const MatmulPlan& p, const std::uint8_t* wb, std::size_t rows, const float* x, std::size_t ldx,
               float* y, std::size_t ldy, const std::uint8_t* xb) {
  const GgmlType type = p.type;
  const std::size_t cols = p.cols, n_tokens = p.n_tokens, rb = ggml_row_bytes(type, cols);
  if (p.path == kRows1) {
    // Each row read whole: one sequential stream the prefetchers follow per
    // run of rows (chunking a single token's rows into 16 interleaved
    // streams reads DRAM far slower: docs/performance-log.md, "Figures moved
    // out of code comments").
    const ActPairs pairs = p.pairs ? act_pairs_at(xb + p.act_bytes, cols / 32) : ActPairs{};
    rows_1<Arch>(type, wb, rb, 0, rows, cols, x, p.quantize ? xb : nullptr, &pairs, y);
    return;
  }
  // Tiles of rows; within a tile, groups of 4 tokens share every decoded
  // weight group. Columns go in chunks so the 4 tokens' activations stay in
  // L1 while the tile's weights stream from L2 (f32 activations: 4 x 1024 x
  // 4 bytes; int8: 4 x 4096 x ~1.2 bytes).
  constexpr std::size_t kRowTile = 16;
  const std::size_t chunk = mv_min(cols, p.quantize ? 4096 : 1024);  // a multiple of 256
  const std::size_t blk_elems = ggml_block_elems(type), blk_bytes = ggml_row_bytes(type, blk_elems);
  for (std::size_t r0 = 0; r0 < rows; r0 += kRowTile) {
    const std::size_t r1 = mv_min(rows, r0 + kRowTile);
    for (std::size_t t0 = 0; t0 < n_tokens; t0 += 4) {
      const std::size_t n = mv_min(4, n_tokens - t0);
      float sum[kRowTile][4] = {};  // [rows of the tile][tokens of the group]
      for (std::size_t c0 = 0; c0 < cols; c0 += chunk) {
        const std::size_t cl = mv_min(chunk, cols - c0);
        const std::size_t w_off = c0 / blk_elems * blk_bytes;
        const std::size_t a_off = p.kq ? c0 / 256 * sizeof(ActQ8K) : c0 / 32 * sizeof(ActQ8);
        const float* xf[4];
        const void* xa[4];
        for (std::size_t k = 0; k < n; ++k) {
          xf[k] = x + (t0 + k) * ldx + c0;
          xa[k] = p.quantize ? xb + (t0 + k) * p.act_bytes + a_off : nullptr;
        }
        for (std::size_t r = r0; r < r1; ++r) {
          float out[4];
          const std::uint8_t* wr = wb + r * rb + w_off;
          switch (n) {
            case 1: matvec_row<Arch, 1>(type, wr, cl, xf, xa, out); break;
            case 2: matvec_row<Arch, 2>(type, wr, cl, xf, xa, out); break;
            case 3: matvec_row<Arch, 3>(type, wr, cl, xf, xa, out); break;
            default: matvec_row<Arch, 4>(type, wr, cl, xf, xa, out); break;
          }
          for (std::size_t k = 0; k < n; ++k) sum[r - r0][k] += out[k];
        }
      }
      for (std::size_t r = r0; r < r1; ++r)
        for (std::size_t k = 0; k < n; ++k) y[(t0 + k) * ldy + r] = sum[r - r0][k];
    }
  }
}

template <class Arch>
void matmul_rows_body(const MatmulPlan& p, const void* w, std::size_t rows, const float* x, std::size_t ldx, float* y,
                      std::size_t ldy, const void* scratch, void* work) {
  if (rows == 0 || p.n_tokens == 0) return;
  const GgmlType type = p.type;
  const std::size_t cols = p.cols, n_tokens = p.n_tokens, rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  const auto* xb = static_cast<const std::uint8_t*>(scratch);
  const auto* xq = reinterpret_cast<const ActQ8*>(xb);
  const auto* xs = reinterpret_cast<const std::int32_t*>(xb + n_tokens * p.act_bytes);
  switch (p.path) {
    case kPacked:
      with_type<Arch>(type, [&](auto T) {
        if constexpr (packed_gemm_type(T.value)) q8_gemm<Arch, T.value>(wb, rb, rows, cols, xq, xs, n_tokens, y, ldy);
      });
      return;
    case kX16Packed:
      with_x16_type(type, [&](auto T) { q8_gemm<Arch, T.value, true>(wb, rb, rows, cols, xq, xs, n_tokens, y, ldy); });
      return;
    case kX16Tiles:
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
      if constexpr (uses_zmm_rows<Arch>()) {
        // Each run of tiles in order, as rows_1 reads its rows.
        for (std::size_t i = 0; i < rows / 16; ++i) {
          for (std::size_t t0 = 0; t0 < n_tokens; t0 += 4) {
            const int n = static_cast<int>(mv_min(4, n_tokens - t0));
            const void* xv[4];
            float* yo[4];
            for (int j = 0; j < n; ++j) {
              xv[j] = xb + (t0 + static_cast<std::size_t>(j)) * p.act_bytes;
              yo[j] = y + (t0 + static_cast<std::size_t>(j)) * ldy + 16 * i;
            }
            with_x16_type(type, [&](auto T) { tile_x16<T.value>(n, wb + i * 16 * rb, cols, xv, yo); });
          }
        }
      }
#endif
      return;
    case kX16Plain: {
      auto* plain = static_cast<std::uint8_t*>(work);  // (16, rb) one tile in the original layout
      MatmulPlan inner = p;
      inner.path = n_tokens == 1 ? kRows1 : kRows4;
      const std::size_t nb = cols / ggml_block_elems(type);
      for (std::size_t i = 0; i < rows / 16; ++i) {
        x16_deinterleave(type, wb + i * 16 * rb, 0, nb, plain, rb);
        rows_path<Arch>(inner, plain, 16, x, ldx, y + 16 * i, ldy, xb);
      }
      return;
    }
    default:
      rows_path<Arch>(p, wb, rows, x, ldx, y, ldy, xb);
  }
}

// The whole products on the calling thread: the phases above, in order.
template <class Arch>
void matmul_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch) {
  const MatmulPlan p = matmul_plan_body<Arch>(type, cols, n_tokens, false);  // checks the arguments
  if (rows == 0 || n_tokens == 0) return;
  matmul_quantize_body<Arch>(p, x, ldx, 0, n_tokens, scratch);
  matmul_rows_body<Arch>(p, w, rows, x, ldx, y, ldy, scratch, nullptr);
}

template <class Arch>
void matvec_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x, float* y,
                 void* scratch) {
  matmul_body<Arch>(type, w, rows, cols, x, cols, 1, y, rows, scratch);
}

// matmul over a row-interleaved matrix (matvec.h's x16): from
// x16_packed_min_tokens on the packed GEMM, which packs the tiles directly on
// AVX-512 and elsewhere takes each chunk back to the original layout as it
// packs; below, the tile kernels where x16_fast, else each tile back to the
// original layout in the scratch (after the activations) and the row paths
// over its 16 rows.
template <class Arch>
void matmul_x16_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                     std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch) {
  matvec_x16_check_args(type, rows, cols);
  if (rows == 0 || n_tokens == 0) return;
  const MatmulPlan p = matmul_plan_body<Arch>(type, cols, n_tokens, true);
  matmul_quantize_body<Arch>(p, x, ldx, 0, n_tokens, scratch);
  matmul_rows_body<Arch>(p, w, rows, x, ldx, y, ldy, scratch,
                         static_cast<std::uint8_t*>(scratch) + matvec_x16_rows_offset(type, cols, n_tokens));
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
