// mla_attn's int8 path, its integer products over one block of tiles (Q4:
// int4 tiles): the scores of a few heads against a tile's cache vectors
// (i8_scores) and the value products of a few heads' quantized weights
// against a block's channel groups (i8_values over int8 tiles, i8_values_ch
// over int4 tiles, tile by tile times their channel scales), with the
// prefetch of the next tiles they spread over their calls. mla_attn_int8_impl.h drives them.
// Like every body header: Arch-templated or in an anonymous namespace.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/mla_attn/mla_attn_int8_ops_impl.h"
#include "kernels/mla_attn/mla_attn_plan_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// The float scores' factors for HB heads (from the first) and one tile.
struct ScoreScales {
  const float *qsl, *qsr, *cl, *cr;  // (nh) query scales (times log2(e)) and corrections
  const float *tl, *tr;              // (T) the tile's latent (null: int4's, per channel) and rope token scales
  int nvalid;                        // tokens of the tile inside the context
};

// An int4 tile's latent vector vi (tokens 4L vi .. 4L vi + 4L - 1 of a
// channel group): its bytes' offset from the group's start (groups T / 2
// bytes apart) and whether it is their high nibbles (quant/latent_formats.h).
struct Q4Pos {
  std::size_t off;
  bool hi;
};
template <int L>
inline Q4Pos q4_pos(int vi) {
  constexpr int per = 4 / L;  // vectors in a unit's low (or high) nibbles
  const int v = vi % (2 * per);
  return {static_cast<std::size_t>(vi / (2 * per)) * 64 + static_cast<std::size_t>(16 * L * (v % per)), v >= per};
}

// Scores of HB heads over one tile, in log2 units (log2(e) is folded into
// the query scales, so the softmax's exponential is a bare 2^x): S (HB, stride)
// floats, tokens past the context masked; mx (HB, W) the running max of
// each head's scores, lane-wise. The integer dot products of a vector pair
// are turned into floats right away, while they are in L1, rather than in
// a pass over the block's raw scores. Q4: the tile is int4 and q8 its own
// query (scaled by the tile's channel scales).
// pf: the next tile to read, or null. Its bytes at the same offsets are
// prefetched as this tile's are read. Without it the scores stalled on
// DRAM (in a model the weights stream through the LLC between layers), even
// with a layer's tiles in one range: presumably because a tile is read in a
// burst and then worked on far longer, while the hardware prefetchers run
// only a short way ahead of the reads. Where the cache could not reserve one
// range, tiles are separate allocations besides.
template <class Arch, int HB, bool Q4>
void i8_scores(const std::uint8_t* data, int T, int Gl, int G, const std::int8_t* q8, int C, const ScoreScales& f,
               float* S, std::size_t stride, float* mx, const std::uint8_t* pf) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int L = K::L;
  constexpr int W = F::size;  // == 4L
  const std::size_t TG = T / 4;
  // The rope part: int8's layout, after the latent groups.
  const std::size_t rope = static_cast<std::size_t>(Gl) * TG * (Q4 ? 8 : 16);
  alignas(64) std::int32_t il[HB][2 * W], ir[HB][2 * W];  // this vector pair's raw scores
  for (int c = 0; c < T / (4 * L); c += 2) {
    typename K::acc a[HB][2];
    // Channel groups [g0, g1) at byte offsets base + (g - g0) * gstride:
    // the pair's two vectors at o0, o1 in them (nibbles hi0, hi1 for int4).
    auto run = [&](int g0, int g1, std::size_t base, std::size_t gstride, std::size_t o0, std::size_t o1, bool q4,
                   bool hi0, bool hi1, std::int32_t (*out)[2 * W]) {
      for (int h = 0; h < HB; ++h) a[h][0] = a[h][1] = K::zero();
      for (int g = g0; g < g1; ++g) {
        const std::size_t off = base + static_cast<std::size_t>(g - g0) * gstride;
        const std::uint8_t* p = data + off;
        if (pf) {
          for (int k = 0; k < 32 * L; k += 64) __builtin_prefetch(pf + off + o0 + k, 0, 2);
        }
        typename K::vec x0, x1;
        if (q4) {
          x0 = K::tshuf(K::nib(K::load_raw(p + o0), hi0));
          x1 = K::tshuf(K::nib(K::load_raw(p + o1), hi1));
        } else {
          x0 = K::tshuf(K::load(p + o0));
          x1 = K::tshuf(K::load(p + o1));
        }
        for (int h = 0; h < HB; ++h) {
          typename K::vec b = K::bcast(q8 + static_cast<std::size_t>(h) * C + 4 * g);
          a[h][0] = K::dot(a[h][0], x0, b);
          a[h][1] = K::dot(a[h][1], x1, b);
        }
      }
      for (int h = 0; h < HB; ++h) {
        K::store(a[h][0], out[h]);
        K::store(a[h][1], out[h] + W);
      }
    };
    const std::size_t o8 = static_cast<std::size_t>(c) * L * 16;
    if constexpr (Q4) {
      const Q4Pos p0 = q4_pos<L>(c), p1 = q4_pos<L>(c + 1);
      run(0, Gl, 0, TG * 8, p0.off, p1.off, true, p0.hi, p1.hi, il);
    } else {
      run(0, Gl, 0, TG * 16, o8, o8 + 16 * L, false, false, false, il);
    }
    run(Gl, G, rope, TG * 16, o8, o8 + 16 * L, false, false, false, ir);
    for (int h = 0; h < HB; ++h) {
      const F ql(f.qsl[h]), qr(f.qsr[h]), vcl(f.cl[h]), vcr(f.cr[h]);
      float* s = S + h * stride;
      F m = F::load_aligned(mx + h * W);
      for (int v = 0; v < 2; ++v) {
        const int j = c * 4 * L + v * W;  // the vector's first token in the tile
        // int4: the tile's channel scales are in the query (ql), not per token.
        F x;
        if constexpr (Q4)
          x = (K::i2f(il[h] + v * W) - vcl) * ql + (K::i2f(ir[h] + v * W) - vcr) * F::load_unaligned(f.tr + j) * qr;
        else
          x = (K::i2f(il[h] + v * W) - vcl) * F::load_unaligned(f.tl + j) * ql +
              (K::i2f(ir[h] + v * W) - vcr) * F::load_unaligned(f.tr + j) * qr;
        x.store_unaligned(s + j);
        // Rows past the context may hold stale rows (a truncated
        // session's), even NaN scales: masked before the max.
        if (j + W > f.nvalid) {
          for (int k = j > f.nvalid ? j : f.nvalid; k < j + W; ++k) s[k] = kMasked;
          x = F::load_unaligned(s + j);
        }
        m = xsimd::max(m, x);
      }
      m.store_aligned(mx + h * W);
    }
  }
}

namespace {  // not Arch-templated: internal, so no other ISA's object shares it

// Cache lines to prefetch while a value-product call runs: lines
// [0, n) from p, one per chunk (line k at chunk k, the last one again once
// they run out: branch-free, as a conditional advance made GCC copy
// accumulators between registers every chunk), the rest at the end. n >= 1
// and p a valid address. prefetcht0, not prefetcht1: faster with the cache
// in DRAM, no different with it in L3 (docs/performance-log.md,
// "`prefetcht0` for the next block"); AMD's T1/T2 prefetches are reported
// to be dropped at times on Zen 4.
struct LinePrefetch {
  const std::uint8_t* p;
  int n;
  void at(int k) const { __builtin_prefetch(p + 64 * static_cast<std::size_t>(k < n ? k : n - 1), 0, 3); }
  void from(int k) const {
    for (; k < n; ++k) __builtin_prefetch(p + 64 * static_cast<std::size_t>(k), 0, 3);
  }
};

}  // namespace

// One chunk of value products: a[h][i] += cache vector i (at d, groups TG*16
// bytes apart) . weights of head h (at b, heads pv_stride apart).
template <class Arch, int HB, int GB>
[[gnu::always_inline]] inline void chunk_dots(typename I8<Arch>::acc (&a)[HB][4], const std::uint8_t* d,
                                              std::size_t TG, const std::uint8_t* b, std::size_t pv_stride) {
  using K = I8<Arch>;
  typename K::vec x[GB];
  for (int i = 0; i < GB; ++i) x[i] = K::load_v(d + i * TG * 16);
  for (int h = 0; h < HB; ++h) {
    const typename K::vec w = K::load_raw(b + h * pv_stride);
    for (int i = 0; i < GB; ++i) a[h][i] = K::dot_v(a[h][i], x[i], w);
  }
}

// chunk_dots over an int4 tile's nibbles (groups gstride bytes apart).
template <class Arch, int HB, int GB>
[[gnu::always_inline]] inline void chunk_dots4(typename I8<Arch>::acc (&a)[HB][4], const std::uint8_t* d,
                                               std::size_t gstride, bool hi, const std::uint8_t* b,
                                               std::size_t pv_stride) {
  using K = I8<Arch>;
  typename K::vec x[GB];
  for (int i = 0; i < GB; ++i) x[i] = K::nib(K::load_raw(d + i * gstride), hi);
  for (int h = 0; h < HB; ++h) {
    const typename K::vec w = K::load_raw(b + h * pv_stride);
    for (int i = 0; i < GB; ++i) a[h][i] = K::dot_v(a[h][i], x[i], w);
  }
}

// Integer value products of HB heads x GB channel groups (from g0) over the
// first nch weight chunks of a block of int8 tiles: out (HB, 16) int32,
// out[h][4i+d] = channel 4(g0+i)+d.
template <class Arch, int HB, int GB>
[[gnu::noinline]] void i8_values(const std::uint8_t* const* tiles, int T, int g0, int nch, const std::uint8_t* pv,
                                 std::size_t pv_stride, std::int32_t* out, LinePrefetch pf) {
  using K = I8<Arch>;
  constexpr int L = K::L;
  const int cpt = T / (4 * L);  // chunks per tile
  const std::size_t TG = T / 4;
  if (nch <= 0) {
    std::memset(out, 0, sizeof(std::int32_t) * 16 * HB);
    pf.from(0);
    return;
  }
  typename K::acc a[HB][4];
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < 4; ++i) a[h][i] = K::zero();
  // Tile by tile, chunk by chunk within: no division in the inner loop.
  // The loop shapes are for GCC 12 (docs/performance-log.md, "Figures
  // moved out of code comments"):
  // - AVX-512: with loops that might run zero times, it merges the paths'
  //   accumulators through a stack array (zeroed on entry, stored and
  //   reloaded at the end): do-whiles, and the prefetch one line per chunk.
  // - AVX2 (16 registers): an inner do-while, or any prefetch in the loop,
  //   makes it copy accumulators between registers every chunk: a for loop,
  //   and the prefetch after it.
  int ch0 = 0, t = 0, k = 0;
  do {
    const std::uint8_t* d = tiles[t] + static_cast<std::size_t>(g0) * TG * 16;
    const std::uint8_t* b = pv + static_cast<std::size_t>(ch0) * 16 * L;
    const int n = nch - ch0 < cpt ? nch - ch0 : cpt;  // >= 1
    int c = 0;
    if constexpr (K::L == 2) {
      for (; c < n; ++c, d += 16 * L, b += 16 * L) chunk_dots<Arch, HB, GB>(a, d, TG, b, pv_stride);
    } else {
      do {
        chunk_dots<Arch, HB, GB>(a, d, TG, b, pv_stride);
        d += 16 * L;
        b += 16 * L;
        pf.at(k++);
      } while (++c < n);
    }
    ch0 += cpt;
    ++t;
  } while (ch0 < nch);
  pf.from(k);
  for (int h = 0; h < HB; ++h) K::lanesum4(a[h][0], a[h][1], a[h][2], a[h][3], out + 16 * h);
}

// The value products over int4 tiles with channel scales: as i8_values
// over nibbles, but each tile's integer sums, less their nibbles' offset
// (qoff[h * qoff_stride + tile]: 8 times the tile's quantized weights'
// sum), are turned into floats times the tile's channel scales (chs: d_c
// floats a tile) before the next tile's: out (HB, 16) floats. The acc
// lanes of one channel (L of them, lane j holding channel j % 4) each take
// 1/L of its offset, so their sum takes all of it. Float sums across tiles
// live in fa (L1), the integer ones in registers.
template <class Arch, int HB, int GB>
[[gnu::noinline]] void i8_values_ch(const std::uint8_t* const* tiles, int T, int g0, int nch, const std::uint8_t* pv,
                                    std::size_t pv_stride, const float* chs, int d_c, const float* qoff,
                                    int qoff_stride, float* out, LinePrefetch pf) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int L = K::L;
  constexpr int W = F::size;  // == 4L
  const int cpt = T / (4 * L);  // chunks per tile
  const std::size_t TG = T / 4;
  if (nch <= 0) {
    std::memset(out, 0, sizeof(float) * 16 * HB);
    pf.from(0);
    return;
  }
  alignas(64) float fa[HB][GB][W];
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < GB; ++i) F(0.f).store_aligned(fa[h][i]);
  // Loop shapes as i8_values' (do-whiles on AVX-512, where a loop that might
  // run zero times made GCC keep the accumulators in a stack array).
  int ch0 = 0, t = 0, k = 0;
  do {
    typename K::acc a[HB][4];
    for (int h = 0; h < HB; ++h)
      for (int i = 0; i < 4; ++i) a[h][i] = K::zero();
    const std::uint8_t* d = tiles[t] + static_cast<std::size_t>(g0) * TG * 8;
    const std::uint8_t* b = pv + static_cast<std::size_t>(ch0) * 16 * L;
    const int n = nch - ch0 < cpt ? nch - ch0 : cpt;  // >= 1
    int c = 0;
    if constexpr (K::L == 2) {
      for (; c < n; ++c, b += 16 * L) {
        const Q4Pos q = q4_pos<L>(c);
        chunk_dots4<Arch, HB, GB>(a, d + q.off, TG * 8, q.hi, b, pv_stride);
      }
    } else {
      do {
        const Q4Pos q = q4_pos<L>(c);
        chunk_dots4<Arch, HB, GB>(a, d + q.off, TG * 8, q.hi, b, pv_stride);
        b += 16 * L;
        pf.at(k++);
      } while (++c < n);
    }
    const float* cs = chs + static_cast<std::size_t>(t) * d_c + 4 * g0;
    for (int h = 0; h < HB; ++h) {
      const F off(qoff[h * qoff_stride + t] * (1.f / L));
      for (int i = 0; i < GB; ++i)
        xsimd::fma(K::acc2f(a[h][i]) - off, K::bcast4f(cs + 4 * i), F::load_aligned(fa[h][i])).store_aligned(fa[h][i]);
    }
    ch0 += cpt;
    ++t;
  } while (ch0 < nch);
  pf.from(k);
  for (int h = 0; h < HB; ++h)
    for (int i = 0; i < 4; ++i)
      for (int dd = 0; dd < 4; ++dd) {
        float v = 0.f;
        if (i < GB)
          for (int m = 0; m < L; ++m) v += fa[h][i][4 * m + dd];
        out[16 * h + 4 * i + dd] = v;
      }
}

template <class Arch, int HB, bool Q4>
void i8_scores_n(int n, const std::uint8_t* data, int T, int Gl, int G, const std::int8_t* q8, int C,
                 const ScoreScales& f, float* S, std::size_t stride, float* mx, const std::uint8_t* pf) {
  if constexpr (HB > 1) {
    if (n < HB) return i8_scores_n<Arch, HB - 1, Q4>(n, data, T, Gl, G, q8, C, f, S, stride, mx, pf);
  }
  i8_scores<Arch, HB, Q4>(data, T, Gl, G, q8, C, f, S, stride, mx, pf);
}

template <class Arch, int HB, int GB>
void i8_values_ch_n(int nh, int ng, const std::uint8_t* const* tiles, int T, int g0, int nch, const std::uint8_t* pv,
                    std::size_t pv_stride, const float* chs, int d_c, const float* qoff, int qoff_stride, float* out,
                    LinePrefetch pf) {
  if constexpr (HB > 1) {
    if (nh < HB)
      return i8_values_ch_n<Arch, HB - 1, GB>(nh, ng, tiles, T, g0, nch, pv, pv_stride, chs, d_c, qoff, qoff_stride,
                                              out, pf);
  }
  if constexpr (GB > 1) {
    if (ng < GB)
      return i8_values_ch_n<Arch, HB, GB - 1>(nh, ng, tiles, T, g0, nch, pv, pv_stride, chs, d_c, qoff, qoff_stride,
                                              out, pf);
  }
  i8_values_ch<Arch, HB, GB>(tiles, T, g0, nch, pv, pv_stride, chs, d_c, qoff, qoff_stride, out, pf);
}

template <class Arch, int HB, int GB>
void i8_values_n(int nh, int ng, const std::uint8_t* const* tiles, int T, int g0, int nch,
                 const std::uint8_t* pv, std::size_t pv_stride, std::int32_t* out, LinePrefetch pf) {
  if constexpr (HB > 1) {
    if (nh < HB) return i8_values_n<Arch, HB - 1, GB>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  if constexpr (GB > 1) {
    if (ng < GB) return i8_values_n<Arch, HB, GB - 1>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  i8_values<Arch, HB, GB>(tiles, T, g0, nch, pv, pv_stride, out, pf);
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
