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

template <class Arch>
void matmul_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                 std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch, int threads) {
  matvec_check_args(type, cols);
  if (rows == 0 || n_tokens == 0) return;
  const std::size_t rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  const bool quant = !is_float_type(type);
  // (cols 0: the row paths write the zero sums; the packed GEMM has no group
  // to start its outputs from.)
  const bool q8_packed = matvec_has_packed_gemm(type) && n_tokens >= packed_min_tokens<Arch>(type) && cols > 0;
  // The packed GEMM takes ActQ8 (one scale per 32) whatever the type.
  const bool kq = ggml_has_super_blocks(type) && !q8_packed;
  // scratch: [n_tokens][cols/32] ActQ8, or [n_tokens][cols/256] ActQ8K for the K-quants
  auto* xb = static_cast<std::uint8_t*>(scratch);
  const std::size_t act_bytes = kq ? cols / 256 * sizeof(ActQ8K) : cols / 32 * sizeof(ActQ8);  // per token
  const int nth = threads > 1 ? threads : 1;
  // Packed: the activations' integer sums (n_tokens, cols/16), after the
  // ActQ8s (matvec_scratch_bytes)
  std::int32_t* xs = q8_packed ? reinterpret_cast<std::int32_t*>(xb + n_tokens * act_bytes) : nullptr;
  if (quant) quantize_tokens<Arch>(kq, x, ldx, n_tokens, cols, xb, act_bytes, xs, nth);
  if (q8_packed) {
    with_type<Arch>(type, [&](auto T) {
      if constexpr (packed_gemm_type(T.value))
        q8_gemm<Arch, T.value>(wb, rb, rows, cols, reinterpret_cast<const ActQ8*>(xb), xs, n_tokens, y, ldy, nth);
    });
    return;
  }
  if (n_tokens == 1) {
    // Each thread a contiguous run of 16-row tiles, each row read whole: one
    // sequential stream the prefetchers follow (chunking a single token's
    // rows into 16 interleaved streams reads DRAM far slower:
    // docs/performance-log.md, "Figures moved out of code comments").
    constexpr std::size_t kRows = 16;
    const std::size_t tiles = (rows + kRows - 1) / kRows;
    ActPairs pairs{};
    if (uses_zmm_rows<Arch>() && has_b32_zmm_row(type))  // after the ActQ8s (matvec_scratch_bytes)
      pairs = build_act_pairs(reinterpret_cast<const ActQ8*>(xb), cols / 32, xb + act_bytes,
                              type == GgmlType::Q5_0 || type == GgmlType::Q5_1);
    mv_parallel(nth, [&](std::size_t t, std::size_t nt) {
      const std::size_t r0 = mv_min(rows, tiles * t / nt * kRows), r1 = mv_min(rows, tiles * (t + 1) / nt * kRows);
      rows_1<Arch>(type, wb, rb, r0, r1, cols, x, quant ? xb : nullptr, &pairs, y);
    });
    return;
  }
  // Tiles of rows per thread; within a tile, groups of 4 tokens share every
  // decoded weight group. Columns go in chunks so the 4 tokens' activations
  // stay in L1 while the tile's weights stream from L2 (f32 activations:
  // 4 x 1024 x 4 bytes; int8: 4 x 4096 x ~1.2 bytes).
  constexpr std::size_t kRowTile = 16;
  const std::size_t chunk = mv_min(cols, quant ? 4096 : 1024);  // a multiple of 256
  // Weight bytes per block, so the parallel region calls nothing that throws.
  const std::size_t blk_elems = ggml_block_elems(type), blk_bytes = ggml_row_bytes(type, blk_elems);
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>((rows + kRowTile - 1) / kRowTile);
  mv_parallel_for(nth, tiles, [&](std::ptrdiff_t tile) {
    const std::size_t r0 = static_cast<std::size_t>(tile) * kRowTile, r1 = mv_min(rows, r0 + kRowTile);
    for (std::size_t t0 = 0; t0 < n_tokens; t0 += 4) {
      const std::size_t n = mv_min(4, n_tokens - t0);
      float sum[kRowTile][4] = {};  // [rows of the tile][tokens of the group]
      for (std::size_t c0 = 0; c0 < cols; c0 += chunk) {
        const std::size_t cl = mv_min(chunk, cols - c0);
        const std::size_t w_off = c0 / blk_elems * blk_bytes;
        const std::size_t a_off = kq ? c0 / 256 * sizeof(ActQ8K) : c0 / 32 * sizeof(ActQ8);
        const float* xf[4];
        const void* xa[4];
        for (std::size_t k = 0; k < n; ++k) {
          xf[k] = x + (t0 + k) * ldx + c0;
          xa[k] = quant ? xb + (t0 + k) * act_bytes + a_off : nullptr;
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
  });
}

template <class Arch>
void matvec_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x, float* y,
                 void* scratch, int threads) {
  matmul_body<Arch>(type, w, rows, cols, x, cols, 1, y, rows, scratch, threads);
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

// matmul over a row-interleaved matrix (matvec.h's x16): from
// x16_packed_min_tokens on the packed GEMM, which packs the tiles directly on
// AVX-512 and elsewhere takes each chunk back to the original layout as it
// packs; below, the tile kernels where x16_fast (each
// thread a contiguous run of tiles, as rows_1), else each tile back to the
// original layout in the scratch and matmul_body over its 16 rows.
template <class Arch>
void matmul_x16_body(GgmlType type, const void* w, std::size_t rows, std::size_t cols, const float* x,
                     std::size_t ldx, std::size_t n_tokens, float* y, std::size_t ldy, void* scratch, int threads) {
  matvec_x16_check_args(type, rows, cols);
  if (rows == 0 || n_tokens == 0) return;
  const std::size_t rb = ggml_row_bytes(type, cols);
  const auto* wb = static_cast<const std::uint8_t*>(w);
  auto* xb = static_cast<std::uint8_t*>(scratch);
  const int nth = threads > 1 ? threads : 1;
  // (cols 0: the other paths write the zero sums; the packed GEMM has no group to start its outputs from.)
  if (n_tokens >= x16_packed_min_tokens<Arch>(type) && cols > 0) {
    // As matmul_body: [n_tokens][cols/32] ActQ8, then their integer sums per 16
    const std::size_t act = cols / 32 * sizeof(ActQ8);
    auto* xq = reinterpret_cast<ActQ8*>(xb);
    auto* xs = reinterpret_cast<std::int32_t*>(xb + n_tokens * act);
    quantize_tokens<Arch>(false, x, ldx, n_tokens, cols, xb, act, xs, nth);
    with_x16_type(type, [&](auto T) { q8_gemm<Arch, T.value, true>(wb, rb, rows, cols, xq, xs, n_tokens, y, ldy, nth); });
    return;
  }
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
  if constexpr (uses_zmm_rows<Arch>()) {
    // [n_tokens] ActQ8K (cols/256 each) for the 256-element blocks, ActQ8 (cols/32 each) for Q5_0 and Q4_0
    const bool k = ggml_block_elems(type) == 256;  // the K-quants and IQ4_XS
    const std::size_t act = k ? cols / 256 * sizeof(ActQ8K) : cols / 32 * sizeof(ActQ8);
    quantize_tokens<Arch>(k, x, ldx, n_tokens, cols, xb, act, nullptr, nth);
    const std::size_t tiles = rows / 16;
    mv_parallel(nth, [&](std::size_t th, std::size_t nt) {
      for (std::size_t i = tiles * th / nt; i < tiles * (th + 1) / nt; ++i) {
        for (std::size_t t0 = 0; t0 < n_tokens; t0 += 4) {
          const int n = static_cast<int>(mv_min(4, n_tokens - t0));
          const void* xv[4];
          float* yo[4];
          for (int j = 0; j < n; ++j) {
            xv[j] = xb + (t0 + static_cast<std::size_t>(j)) * act;
            yo[j] = y + (t0 + static_cast<std::size_t>(j)) * ldy + 16 * i;
          }
          with_x16_type(type, [&](auto T) { tile_x16<T.value>(n, wb + i * 16 * rb, cols, xv, yo); });
        }
      }
    });
    return;
  }
#endif
  std::uint8_t* plain = xb + matvec_x16_rows_offset(type, cols, n_tokens);  // (16, rb)
  const std::size_t nb = cols / ggml_block_elems(type);
  for (std::size_t i = 0; i < rows / 16; ++i) {
    x16_deinterleave(type, wb + i * 16 * rb, 0, nb, plain, rb);
    matmul_body<Arch>(type, plain, 16, cols, x, ldx, n_tokens, y + 16 * i, ldy, scratch, threads);
  }
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
