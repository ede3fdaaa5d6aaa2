// mla_attn's float path (f32 and f16 caches): per tile, the scores
// (f_scores, reduced by lane_sums), the online softmax (exponential:
// kernels/exp_f32_impl.h) and the value products (f_values), driven per work
// item by f_item; f16 tiles are converted first (f16_to_f32_rows,
// mla_attn_plan_impl.h). xsimd over the Arch, but for lane_sums' AVX-512
// transpose (intrinsics). Like every body header: Arch-templated or in an
// anonymous namespace.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/exp_f32_impl.h"
#include "kernels/mla_attn/mla_attn_plan_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// Lane i of the result = the sum of a[i]'s lanes, for W vectors a. xsimd
// 8.1's AVX-512 haddp returns its sums out of order, so AVX-512 has its own:
// pairs of vectors folded within 128-bit blocks, then the blocks summed.
template <class Arch>
xsimd::batch<float, Arch> lane_sums(const xsimd::batch<float, Arch>* a) {
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<Arch, xsimd::avx512bw>) {
    __m512 p[8], q[4], r[2];
    for (int i = 0; i < 8; ++i)  // block: [a2i, a2i+1, a2i, a2i+1] partials
      p[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]), _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
    for (int i = 0; i < 4; ++i)  // block: [a4i .. a4i+3] partials
      q[i] = _mm512_add_ps(_mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                           _mm512_shuffle_ps(p[2 * i], p[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 2; ++i)  // blocks: q2i (0+1), q2i (2+3), q2i+1 (0+1), q2i+1 (2+3)
      r[i] = _mm512_add_ps(_mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                           _mm512_shuffle_f32x4(q[2 * i], q[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(r[0], r[1], _MM_SHUFFLE(3, 1, 3, 1)));
  }
#endif
  return xsimd::haddp(a);
}

// S (HB, stride) = rows (ntok, C) . qf (HB, C), ntok a multiple of J (the
// tile's padding rows are real memory; their scores are masked later).
// HB heads x J tokens of accumulators, reduced W at a time by a transposing
// add (lane_sums), as one hadd per accumulator is costly beside the FMAs
// (docs/performance-log.md, "Decode attention kernels on the Zen 4 machine").
// Meanwhile lines [0, pf_lines) from pf go to L2, a few per step of the
// dot products (in bursts they are slower than none).
template <class Arch, int HB, int J>
void f_scores(const float* rows, int ntok, int C, const float* qf, float* S, std::size_t stride,
              const std::uint8_t* pf, std::size_t pf_lines) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  constexpr int N = HB * J;
  // Whole lane_sums groups, the padding left zero: every head's scores are
  // reduced by the same tree however many heads a call takes (hadd's is
  // another), so a head's bits do not depend on how the heads were split
  // between threads.
  constexpr int NP = (N + W - 1) / W * W;
  for (int j = 0; j < ntok; j += J) {
    const float* r0 = rows + static_cast<std::size_t>(j) * C;
    F a[NP];
    for (int k = 0; k < NP; ++k) a[k] = F(0.f);
    std::size_t line = pf_lines * j / ntok;
    const std::size_t line_end = pf_lines * (j + J) / ntok;
    int c = 0;
    for (; c + W <= C; c += W) {
      if (line < line_end) __builtin_prefetch(pf + 64 * line++, 0, 2);
      F x[J];
      for (int t = 0; t < J; ++t) x[t] = F::load_unaligned(r0 + static_cast<std::size_t>(t) * C + c);
      for (int h = 0; h < HB; ++h) {
        const F q = F::load_unaligned(qf + static_cast<std::size_t>(h) * C + c);
        for (int t = 0; t < J; ++t) a[h * J + t] = xsimd::fma(q, x[t], a[h * J + t]);
      }
    }
    alignas(64) float sum[NP];
    for (int g = 0; g < NP; g += W) lane_sums<Arch>(a + g).store_aligned(sum + g);
    for (int h = 0; h < HB; ++h)
      for (int t = 0; t < J; ++t) {
        float v = sum[h * J + t];
        for (int k = c; k < C; ++k)
          v += qf[static_cast<std::size_t>(h) * C + k] * r0[static_cast<std::size_t>(t) * C + k];
        S[h * stride + j + t] = v;
      }
  }
}

// o (HB, d_c)[:, c0 : c0 + NV * W] += P (HB, stride) . rows (ntok, C)[:, c0 : c0 + NV * W]
template <class Arch, int HB, int NV>
void f_value_columns(const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o,
                     int c0) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  F a[HB][NV];
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < NV; ++v) a[h][v] = F::load_unaligned(o + static_cast<std::size_t>(h) * d_c + c0 + v * W);
  for (int j = 0; j < ntok; ++j) {
    const float* r = rows + static_cast<std::size_t>(j) * C + c0;
    F x[NV];
    for (int v = 0; v < NV; ++v) x[v] = F::load_unaligned(r + v * W);
    for (int h = 0; h < HB; ++h) {
      const F p(Pw[h * stride + j]);
      for (int v = 0; v < NV; ++v) a[h][v] = xsimd::fma(p, x[v], a[h][v]);
    }
  }
  for (int h = 0; h < HB; ++h)
    for (int v = 0; v < NV; ++v) a[h][v].store_unaligned(o + static_cast<std::size_t>(h) * d_c + c0 + v * W);
}

// o (HB, d_c) += P (HB, stride) . rows (ntok, C)[:, :d_c]: HB heads x NV
// vectors of columns in registers, one pass over the tokens per NV * W
// columns.
template <class Arch, int HB, int NV>
void f_values(const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o) {
  constexpr int W = xsimd::batch<float, Arch>::size;
  int c = 0;
  for (; c + NV * W <= d_c; c += NV * W) f_value_columns<Arch, HB, NV>(rows, ntok, C, d_c, Pw, stride, o, c);
  for (; c + W <= d_c; c += W) f_value_columns<Arch, HB, 1>(rows, ntok, C, d_c, Pw, stride, o, c);
  for (; c < d_c; ++c)
    for (int h = 0; h < HB; ++h) {
      float acc = o[static_cast<std::size_t>(h) * d_c + c];
      for (int j = 0; j < ntok; ++j) acc += Pw[h * stride + j] * rows[static_cast<std::size_t>(j) * C + c];
      o[static_cast<std::size_t>(h) * d_c + c] = acc;
    }
}

template <class Arch, int HB, int J>
void f_scores_n(int n, const float* rows, int ntok, int C, const float* qf, float* S, std::size_t stride,
                const std::uint8_t* pf, std::size_t pf_lines) {
  if constexpr (HB > 1) {
    if (n < HB) return f_scores_n<Arch, HB - 1, J>(n, rows, ntok, C, qf, S, stride, pf, pf_lines);
  }
  f_scores<Arch, HB, J>(rows, ntok, C, qf, S, stride, pf, pf_lines);
}

template <class Arch, int HB, int NV>
void f_values_n(int n, const float* rows, int ntok, int C, int d_c, const float* Pw, std::size_t stride, float* o) {
  if constexpr (HB > 1) {
    if (n < HB) return f_values_n<Arch, HB - 1, NV>(n, rows, ntok, C, d_c, Pw, stride, o);
  }
  f_values<Arch, HB, NV>(rows, ntok, C, d_c, Pw, stride, o);
}


// next_item(): as for i8_item, asked for during the item's last tile, so
// the next item's first tile is prefetched like any other.
template <class Arch, class NextItem>
void f_item(const MlaCtx<Arch>& X, int h0, int h1, std::int64_t t0, std::int64_t t1, float* po, float* pm,
            float* pl, std::uint8_t* thr, NextItem&& next_item) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  // Scores: 4 heads x 4 tokens of accumulators (NEON and AVX-512: 16 of 32
  // registers; AVX2: 2 x 4 of 16). Values: 4 heads x NV vectors of columns.
  constexpr int HBs = W == 8 ? 2 : 4, Js = 4;
  constexpr int HBv = 4, NVv = W == 8 ? 2 : 4;
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT, C = P.C, d_c = P.d_c;
  const bool f16 = X.cache->layout.storage == LatentStorage::f16;
  const float* qf = reinterpret_cast<const float*>(X.base + P.off_qf);
  float* S = reinterpret_cast<float*>(thr + P.t_S);
  float* conv = f16 ? reinterpret_cast<float*>(thr + P.t_conv) : nullptr;
  const std::size_t row_bytes = X.cache->layout.bytes / T;  // plain rows, f32 or f16
  for (int h = h0; h < h1; ++h) {
    pm[h] = -INFINITY;
    pl[h] = 0.f;
    std::memset(po + static_cast<std::size_t>(h) * d_c, 0, sizeof(float) * d_c);
  }
  for (std::int64_t t = t0; t < t1; ++t) {
    const int nvalid = static_cast<int>(imin(T, X.n_ctx - t * T));
    // Scores run over whole groups of Js rows (tiles hold a multiple of 32;
    // the padding rows' scores are masked), values over the valid rows only,
    // so a stale row past the end never meets a zero weight (0 x NaN).
    const int ntok = (nvalid + Js - 1) / Js * Js;
    const float* rows;
    if (f16) {
      f16_to_f32_rows<Arch>(static_cast<const std::uint16_t*>(X.cache->tiles[t]), conv,
                            static_cast<std::size_t>(ntok) * C);
      rows = conv;
    } else {
      rows = static_cast<const float*>(X.cache->tiles[t]);
    }
    // The next tile's lines go to L2 a share per head group (why: see
    // i8_scores).
    std::int64_t tn = t + 1;
    if (tn >= t1) {
      const auto r = next_item();
      tn = r.first < r.second ? r.first : -1;
    }
    const std::uint8_t* next = tn >= 0 ? static_cast<const std::uint8_t*>(X.cache->tiles[tn]) : nullptr;
    const std::size_t next_lines =
        next ? (static_cast<std::size_t>(imin(T, X.n_ctx - tn * T)) * row_bytes + 63) / 64 : 0;
    const int groups = (h1 - h0 + HBs - 1) / HBs;
    for (int h = h0, g = 0; h < h1; h += HBs, ++g) {
      const std::size_t l0 = next_lines * g / groups, l1 = next_lines * (g + 1) / groups;
      f_scores_n<Arch, HBs, Js>(h1 - h, rows, ntok, C, qf + static_cast<std::size_t>(h) * C,
                                S + static_cast<std::size_t>(h) * BT, BT, next + 64 * l0, l1 - l0);
    }
    for (int h = h0; h < h1; ++h) {
      float* s = S + static_cast<std::size_t>(h) * BT;
      float mb = kMasked;
      for (int j = 0; j < nvalid; ++j) mb = fmx(mb, s[j]);
      const float mn = fmx(pm[h], mb);
      const float alpha = std::exp(pm[h] - mn);
      pm[h] = mn;
      F lsum(0.f);
      const F vmn(mn);
      int j = 0;
      for (; j + W <= nvalid; j += W) {
        // <= 0, or NaN for a NaN query: then the block max is NaN too
        F p = exp_clamped_nan_dropped<Arch>(F::load_unaligned(s + j) - vmn);
        lsum += p;
        p.store_unaligned(s + j);
      }
      float l = xsimd::hadd(lsum);
      for (; j < nvalid; ++j) l += (s[j] = std::exp(s[j] - mn));
      for (; j < ntok; ++j) s[j] = 0.f;
      pl[h] = pl[h] * alpha + l;
      if (alpha != 1.f) {
        float* o = po + static_cast<std::size_t>(h) * d_c;
        const F va(alpha);
        int c = 0;
        for (; c + W <= d_c; c += W) (F::load_unaligned(o + c) * va).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] *= alpha;
      }
    }
    for (int h = h0; h < h1; h += HBv)
      f_values_n<Arch, HBv, NVv>(h1 - h, rows, nvalid, C, d_c, S + static_cast<std::size_t>(h) * BT, BT,
                                 po + static_cast<std::size_t>(h) * d_c);
  }
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
