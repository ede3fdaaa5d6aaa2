// matvec's packed int8 GEMM for chunks of many tokens, the products and the
// driver: q8_tile_tokens runs up to NT tokens over one packed column chunk
// of a tile (the dot steps per-ISA intrinsics through Q8Dot<Arch>; scaling
// and accumulation xsimd over the Arch), q8_gemm takes the given rows a
// tile at a time (its caller splits rows by whole tiles), packs each tile a
// chunk at a time (matvec_packed_pack*) and prefetches the next. The layout and the rules of the packing:
// matvec_packed_dot_impl.h.
#pragma once

#include "kernels/matvec/matvec_packed_pack_impl.h"
#include "kernels/matvec/matvec_packed_pack_x16_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// y[t] (the tile's outputs; only the first nr written) for tokens t < N over
// ng packed groups of a type with kS scales and kO offsets per group: =
// (first) or += the products. xq[t], xs[t]: token t's ActQ8 groups and
// their integer sums per 16, from the packed range's first.
// With two scales a group is two 16-element halves, each 4 dot steps then
// its own conversion and FMA (the sub-block scales differ per row, so they
// cannot fold into the activations' scale).
template <class Arch, int N, int kS, int kO>
void q8_tile_tokens(const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                    float* const* y, int nr, bool first) {
  using D = Q8Dot<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int V = D::V, MR = D::MR, TR = V * MR;
  constexpr std::size_t kGB = pack_group_bytes(kS, kO) * TR;
  static_assert(F::size == V);
  F acc[MR][N];  // (rows of the tile / V, tokens)
  alignas(64) float tmp[V];
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    for (int t = 0; t < N; ++t) {
      if (first || valid <= 0) {
        acc[m][t] = F(0.f);
      } else if (valid >= V) {
        acc[m][t] = F::load_unaligned(y[t] + m * V);
      } else {
        for (int l = 0; l < V; ++l) tmp[l] = l < valid ? y[t][m * V + l] : 0.f;
        acc[m][t] = F::load_aligned(tmp);
      }
    }
  }
  for (std::size_t g = 0; g < ng; ++g) {
    const std::uint8_t* blk = pk + g * kGB;
    const float* dw = reinterpret_cast<const float*>(blk);  // (kS, TR) scales, then (kO, TR) offsets
    const std::uint8_t* q = blk + 4 * (kS + kO) * TR;
    for (int h = 0; h < kS; ++h) {  // steps [k0, k1) of 4 bytes
      const int k0 = kS == 1 ? 0 : 4 * h, k1 = kS == 1 ? 8 : k0 + 4;
      typename D::I s[MR][N];  // int32 dots of the group (or half)
      for (int t = 0; t < N; ++t) {
        const std::int32_t xsum = kS == 1 ? xs[t][2 * g] + xs[t][2 * g + 1] : xs[t][2 * g + h];
        const typename D::I s0 = D::start(D::kOffset ? -128 * xsum : 0);
        for (int m = 0; m < MR; ++m) s[m][t] = s0;
      }
      for (int k = k0; k < k1; ++k) {
        typename D::Wv wv[MR];
        for (int m = 0; m < MR; ++m) wv[m] = D::load_w(q + (k * TR + m * V) * 4);
        for (int t = 0; t < N; ++t) {
          std::int32_t x4;
          std::memcpy(&x4, xq[t][g].qs + 4 * k, 4);
          for (int m = 0; m < MR; ++m) s[m][t] = D::dot(s[m][t], wv[m], x4);
        }
      }
      for (int m = 0; m < MR; ++m) {
        const F d = F::load_aligned(dw + h * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(F(D::to_f(s[m][t])), d * F(xq[t][g].d), acc[m][t]);
      }
    }
    if constexpr (kO == 1) {  // + o * sum(x of the group)
      for (int m = 0; m < MR; ++m) {
        const F o = F::load_aligned(dw + kS * TR + m * V);
        for (int t = 0; t < N; ++t) acc[m][t] = xsimd::fma(o, F(xq[t][g].s), acc[m][t]);
      }
    } else if constexpr (kO == 2) {  // + o[h] * sum(x of half h)
      for (int h = 0; h < 2; ++h)
        for (int m = 0; m < MR; ++m) {
          const F o = F::load_aligned(dw + (kS + h) * TR + m * V);
          for (int t = 0; t < N; ++t)
            acc[m][t] = xsimd::fma(o, F(xq[t][g].d * static_cast<float>(xs[t][2 * g + h])), acc[m][t]);
        }
    }
  }
  for (int m = 0; m < MR; ++m) {
    const int valid = nr - m * V;
    if (valid <= 0) break;
    for (int t = 0; t < N; ++t) {
      if (valid >= V) {
        acc[m][t].store_unaligned(y[t] + m * V);
      } else {
        acc[m][t].store_aligned(tmp);
        for (int l = 0; l < valid; ++l) y[t][m * V + l] = tmp[l];
      }
    }
  }
}

// q8_tile_tokens for n <= N tokens
template <class Arch, int N, int kS, int kO>
void q8_tile_upto(int n, const std::uint8_t* pk, std::size_t ng, const ActQ8* const* xq, const std::int32_t* const* xs,
                  float* const* y, int nr, bool first) {
  if constexpr (N > 1) {
    if (n < N) return q8_tile_upto<Arch, N - 1, kS, kO>(n, pk, ng, xq, xs, y, nr, first);
  }
  q8_tile_tokens<Arch, N, kS, kO>(pk, ng, xq, xs, y, nr, first);
}

// Y (n_tokens, ldy) = X W^T for W of a packed type T, the activations
// already quantized (xq: [n_tokens][cols/32] ActQ8; xs: [n_tokens][cols/16]
// their integer sums per 16). Threads take whole tiles; each packs its tile
// a column chunk at a time (kQ8PackGroups groups: 36.9 KB for 32 rows, 41
// KB with one scale and one offset, 45 KB with two and two, on the stack,
// in L1/L2) and runs every token over it before the next chunk.
constexpr std::size_t kQ8PackGroups = 32;

// The 32-element groups and bytes of one block of T in the original layout,
// where q8_gemm takes x16 tiles back (kUsed; only for the types of
// quant/x16_layout.h's kX16Types).
struct PlainBlock {
  std::size_t groups, bytes;
};
template <GgmlType T>
constexpr bool in_x16_types() {
  for (GgmlType t : kX16Types)
    if (t == T) return true;
  return false;
}
template <GgmlType T, bool kUsed>
constexpr PlainBlock plain_block() {
  if constexpr (!kUsed) {
    return {1, 0};
  } else {
    static_assert(in_x16_types<T>(), "plain_block: not an x16 type");
    return {Gguf<T>::kGroups, sizeof(typename Gguf<T>::Block)};
  }
}

// kX16: w is row-interleaved (matvec.h's x16; rows a multiple of 16): packed
// straight from the tiles where uses_zmm_rows (q8_pack_x16), else each
// chunk's rows go back to the original layout on the stack first.
template <class Arch, GgmlType T, bool kX16 = false>
void q8_gemm(const std::uint8_t* w, std::size_t rb, std::size_t rows, std::size_t cols, const ActQ8* xq,
             const std::int32_t* xs, std::size_t n_tokens, float* y, std::size_t ldy) {
  using D = Q8Dot<Arch>;
  constexpr int TR = D::V * D::MR, NT = D::NT;
  static_assert(!kX16 || TR % 16 == 0);
  const std::size_t groups = cols / 32;
  const std::ptrdiff_t tiles = static_cast<std::ptrdiff_t>((rows + TR - 1) / TR);
  // x16 (x16_type) taken back: groups per block of the type; the chunk's rows in the original layout
  constexpr bool kPlain = kX16 && !uses_zmm_rows<Arch>();
  constexpr std::size_t kBlockGroups = plain_block<T, kPlain>().groups, kBlockBytes = plain_block<T, kPlain>().bytes;
  static_assert(kQ8PackGroups % kBlockGroups == 0);
  constexpr std::size_t kPlainBytes = kPlain ? kQ8PackGroups / kBlockGroups * kBlockBytes * TR : 1;  // (TR, chunk)
  for (std::ptrdiff_t tile = 0; tile < tiles; ++tile) {
    alignas(64) std::uint8_t pk[kQ8PackGroups * pack_group_bytes(T) * TR];  // one column chunk of the tile, packed
    alignas(64) std::uint8_t plain[kPlainBytes];
    const std::size_t r0 = static_cast<std::size_t>(tile) * TR;
    const int nr = static_cast<int>(mv_min(TR, rows - r0));
    // After packing a chunk, the next one's rows (TR short runs of a row
    // each, which the hardware prefetchers follow poorly) are prefetched
    // before the products, with prefetcht1 (faster with the weights in DRAM
    // than none or prefetcht0: docs/performance-log.md, "Figures moved out
    // of code comments").
    for (std::size_t g0 = 0; g0 < groups; g0 += kQ8PackGroups) {
      const std::size_t ng = mv_min(kQ8PackGroups, groups - g0);
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
      if constexpr (kX16 && !kPlain) {
        q8_pack_x16<T>(w + r0 * rb, rb, static_cast<std::size_t>(nr), g0, ng, pk);
      } else
#endif
      if constexpr (kPlain) {
        const std::size_t crb = rb / (groups / kBlockGroups) * (ng / kBlockGroups);  // the chunk's bytes per row
        for (int i = 0; i < nr; i += 16)
          x16_deinterleave(T, w + (r0 + static_cast<std::size_t>(i)) * rb, g0 / kBlockGroups, ng / kBlockGroups,
                                  plain + static_cast<std::size_t>(i) * crb, crb);
        q8_pack_tile<Arch, T>(plain, crb, static_cast<std::size_t>(nr), 0, ng, pk);
      } else {
        q8_pack_tile<Arch, T>(w + r0 * rb, rb, static_cast<std::size_t>(nr), g0, ng, pk);
      }
      {  // the next chunk's rows (this tile's, or the next tile's first)
        // x16: a run of 16 rows' groups lies together, 16 times a row's
        constexpr std::size_t kStep = kX16 ? 16 : 1;
        const std::size_t gb = rb / groups * kStep;  // bytes per group (of kStep rows)
        std::size_t pr0 = r0, pg = g0 + ng, pn = static_cast<std::size_t>(nr);
        if (pg >= groups) {
          pr0 = r0 + TR;
          pg = 0;
          pn = pr0 < rows ? mv_min(TR, rows - pr0) : 0;
        }
        const std::size_t b0 = pg * gb, b1 = mv_min(groups, pg + kQ8PackGroups) * gb;
        for (std::size_t r = 0; r < pn; r += kStep) {
          const std::uintptr_t a = reinterpret_cast<std::uintptr_t>(w + (pr0 + r) * rb);
          for (std::uintptr_t l = (a + b0) & ~std::uintptr_t{63}; l < a + b1; l += 64)
            __builtin_prefetch(reinterpret_cast<const void*>(l), 0, 2);
        }
      }
      for (std::size_t t0 = 0; t0 < n_tokens; t0 += NT) {
        const int n = static_cast<int>(mv_min(NT, n_tokens - t0));
        const ActQ8* xa[NT];
        const std::int32_t* xi[NT];
        float* yo[NT];
        for (int k = 0; k < n; ++k) {
          xa[k] = xq + (t0 + k) * groups + g0;
          xi[k] = xs + (t0 + k) * 2 * groups + 2 * g0;
          yo[k] = y + (t0 + k) * ldy + r0;
        }
        q8_tile_upto<Arch, NT, packed_scales(T), packed_offsets(T)>(n, pk, ng, xa, xi, yo, nr, g0 == 0);
      }
    }
  }
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
