// mla_attn's int8 path (int8 and int4 caches; Q4: int4): per tile block, the scores by integer
// dot products (i8_scores), the online softmax with quantized weights, and
// the integer value products (i8_values), driven per work item by i8_item
// in three named steps. Its byte operations are I8<Arch>
// (mla_attn_int8_ops_impl.h). Like every body header: Arch-templated or in
// an anonymous namespace.
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
  const float *tl, *tr;              // (T) the tile's latent and rope token scales
  int nvalid;                        // tokens of the tile inside the context
};

// Scores of HB heads over one tile, in log2 units (log2(e) is folded into
// the query scales, so the softmax's exponential is a bare 2^x): S (HB, stride)
// floats, tokens past the context masked; mx (HB, W) the running max of
// each head's scores, lane-wise. The integer dot products of a vector pair
// are turned into floats right away, while they are in L1, rather than in
// a pass over the block's raw scores.
// pf: the next tile to read, or null. Its bytes at the same offsets are
// prefetched as this tile's are read. Without it the scores stalled on
// DRAM (in a model the weights stream through the LLC between layers), even
// with a layer's tiles in one range: presumably because a tile is read in a
// burst and then worked on far longer, while the hardware prefetchers run
// only a short way ahead of the reads. Where the cache could not reserve one
// range, tiles are separate allocations besides.
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
// a pass over the block's raw scores. Q4: the tile is int4.
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
        F x = (K::i2f(il[h] + v * W) - vcl) * F::load_unaligned(f.tl + j) * ql +
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
// first nch weight chunks of a block: out (HB, 16) int32, out[h][4i+d] =
// channel 4(g0+i)+d. Q4: the tiles are int4.
template <class Arch, int HB, int GB, bool Q4>
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
    const std::uint8_t* d = tiles[t] + static_cast<std::size_t>(g0) * TG * (Q4 ? 8 : 16);
    const std::uint8_t* b = pv + static_cast<std::size_t>(ch0) * 16 * L;
    const int n = nch - ch0 < cpt ? nch - ch0 : cpt;  // >= 1
    int c = 0;
    if constexpr (Q4) {
      for (; c < n; ++c, b += 16 * L) {
        const Q4Pos q = q4_pos<L>(c);
        chunk_dots4<Arch, HB, GB>(a, d + q.off, TG * 8, q.hi, b, pv_stride);
        if constexpr (K::L != 2) pf.at(k++);
      }
    } else if constexpr (K::L == 2) {
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

template <class Arch, int HB, bool Q4>
void i8_scores_n(int n, const std::uint8_t* data, int T, int Gl, int G, const std::int8_t* q8, int C,
                 const ScoreScales& f, float* S, std::size_t stride, float* mx, const std::uint8_t* pf) {
  if constexpr (HB > 1) {
    if (n < HB) return i8_scores_n<Arch, HB - 1, Q4>(n, data, T, Gl, G, q8, C, f, S, stride, mx, pf);
  }
  i8_scores<Arch, HB, Q4>(data, T, Gl, G, q8, C, f, S, stride, mx, pf);
}

template <class Arch, int HB, int GB, bool Q4>
void i8_values_n(int nh, int ng, const std::uint8_t* const* tiles, int T, int g0, int nch,
                 const std::uint8_t* pv, std::size_t pv_stride, std::int32_t* out, LinePrefetch pf) {
  if constexpr (HB > 1) {
    if (nh < HB) return i8_values_n<Arch, HB - 1, GB, Q4>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  if constexpr (GB > 1) {
    if (ng < GB) return i8_values_n<Arch, HB, GB - 1, Q4>(nh, ng, tiles, T, g0, nch, pv, pv_stride, out, pf);
  }
  i8_values<Arch, HB, GB, Q4>(tiles, T, g0, nch, pv, pv_stride, out, pf);
}

template <class Arch>
constexpr int score_hb() {
  return I8<Arch>::L == 2 ? 4 : 8;  // 16 ymm on avx2, 32 registers elsewhere
}
// Heads per value-product call. AVX-512: 6 heads x 4 vectors (24 of the 32
// registers) read each block's cache vectors from L2 3 times for 16 heads
// instead of 4: on Zen 5, which issues two 512-bit vpdpbusd per cycle, the
// L2 reads, not the dot products, limit the value pass
// (docs/performance-log.md, "First measurements: 6 heads per value call").
// NEON keeps 4 (not measured on hardware), AVX2 (16 registers) 2.
template <class Arch>
constexpr int value_hb() {
  return I8<Arch>::L == 4 ? 6 : I8<Arch>::L == 2 ? 2 : 4;
}

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// An int8 item's query and thread slot, at the plan's offsets.
struct I8Slot {
  const std::int8_t* q8;             // (nh, C) quantized query
  const float *qsl, *qsr, *cl, *cr;  // (nh) query scales (times log2(e)) and corrections
  const float* cl8;                  // (nh) the latent correction over an int4 cache's int8 tile
  float* S;                          // (nh, BT) scores, then weights
  float* mx;                         // (nh, W) the block's running score max
  std::uint8_t* pv;                  // (nh, pv_stride) quantized weights
  float* scl;                        // (BT) the block's latent scales
  float *ps, *cp;                    // (nh) weight scales, value offsets
  std::size_t pv_stride;
};

inline I8Slot i8_slot(const Plan& P, const std::uint8_t* base, std::uint8_t* thr) {
  const float* qv = reinterpret_cast<const float*>(base + P.off_qv);
  float* hv = reinterpret_cast<float*>(thr + P.t_hv);
  return I8Slot{reinterpret_cast<const std::int8_t*>(base + P.off_q8),
                qv,
                qv + P.nh,
                qv + 2 * P.nh,
                qv + 3 * P.nh,
                qv + 4 * P.nh,
                reinterpret_cast<float*>(thr + P.t_S),
                reinterpret_cast<float*>(thr + P.t_mx),
                thr + P.t_pv,
                reinterpret_cast<float*>(thr + P.t_sc),
                hv,
                hv + P.nh,
                static_cast<std::size_t>(P.BT) * 4};
}

// Tile t of a layer: an int4 cache's filling tile is int8 and elsewhere.
inline const std::uint8_t* tile_at(const LatentLayerView& v, std::int64_t t) {
  return static_cast<const std::uint8_t*>(t == v.int8_tile ? v.int8_data : v.tiles[t]);
}

// One block of an item: its tiles, and the block after it.
struct I8Block {
  const std::uint8_t* const* tp;        // (ntile) the tiles
  int ntile = 0, nvalid = 0, ntok = 0;  // tiles; tokens inside the context; those in whole vectors
  bool int8 = false;                    // an int4 cache's filling tile, in int8's layout (alone in its block)
  bool first = false;                   // the item's first block: po not yet written
  std::int64_t nb0 = 0, nb1 = 0;        // the block after this one: [nb0, nb1) of this item, or of the next
};

}  // namespace

// Step 1: the block's scores and their max.
template <class Arch, bool Q4>
[[gnu::always_inline]] inline void i8_block_scores(const MlaCtx<Arch>& X, const I8Slot& s, const I8Block& B, int h0,
                                                   int h1) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT;
  for (int h = h0; h < h1; ++h) F(kMasked).store_aligned(s.mx + static_cast<std::size_t>(h) * W);
  const bool is8 = Q4 && B.int8;
  for (int i = 0; i < B.ntile && i * T < B.nvalid; ++i) {
    const float* tsc = reinterpret_cast<const float*>(
        B.tp[i] + (is8 ? X.cache->int8_scale_offset : X.cache->layout.scale_offset));
    // The tile after this one (in this block or the next), prefetched
    // during the first head block's pass.
    const std::uint8_t* next = i + 1 < B.ntile ? B.tp[i + 1] : B.nb0 < B.nb1 ? tile_at(*X.cache, B.nb0) : nullptr;
    for (int h = h0; h < h1; h += score_hb<Arch>()) {
      const ScoreScales f{s.qsl + h, s.qsr + h, (is8 ? s.cl8 : s.cl) + h, s.cr + h, tsc, tsc + T, B.nvalid - i * T};
      const std::int8_t* q8 = s.q8 + static_cast<std::size_t>(h) * P.C;
      float* S = s.S + static_cast<std::size_t>(h) * BT + i * T;
      float* mx = s.mx + static_cast<std::size_t>(h) * W;
      if (is8)
        i8_scores_n<Arch, score_hb<Arch>(), false>(h1 - h, B.tp[i], T, P.Gl, P.G, q8, P.C, f, S, BT, mx,
                                                   h == h0 ? next : nullptr);
      else
        i8_scores_n<Arch, score_hb<Arch>(), Q4>(h1 - h, B.tp[i], T, P.Gl, P.G, q8, P.C, f, S, BT, mx,
                                                h == h0 ? next : nullptr);
    }
  }
}

// Step 2: per head, online softmax, weights quantized with the token's
// latent scale folded in. The block's latent scales are gathered once for
// all heads, so the passes read them contiguously instead of finding each
// vector's tile and offset (a division).
template <class Arch, bool Q4>
[[gnu::always_inline]] inline void i8_block_weights(const MlaCtx<Arch>& X, const I8Slot& s, const I8Block& B, int h0,
                                                    int h1, float* po, float* pm, float* pl) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT, d_c = P.d_c, ntok = B.ntok;
  float *scl = s.scl, *ps = s.ps, *cp = s.cp;
  const bool q4 = Q4 && !B.int8;  // the block's tiles are int4
  const std::size_t scale_offset = Q4 && B.int8 ? X.cache->int8_scale_offset : X.cache->layout.scale_offset;
  for (int i = 0; i < B.ntile; ++i)
    std::memcpy(scl + static_cast<std::size_t>(i) * T, B.tp[i] + scale_offset, sizeof(float) * T);
  // Rows past the context may hold stale rows (a truncated session's),
  // even NaN scales; their weights must come out exactly 0.
  for (int k = B.nvalid; k < ntok; ++k) scl[k] = 0.f;
  for (int h = h0; h < h1; ++h) {
    float* sh = s.S + static_cast<std::size_t>(h) * BT;
    // Two passes over the block's scores: exponentials, their sum and the
    // weights' max; quantized weights laid out for the value products.
    // pm is in log2 units, like the scores, until the end of the item.
    const float mn = fmx(pm[h], hmax<Arch>(F::load_aligned(s.mx + static_cast<std::size_t>(h) * W), kMasked));
    const float alpha = std::exp2(pm[h] - mn);
    pm[h] = mn;
    F lsum(0.f), wmx(0.f);
    const F vmn(mn);
    for (int j = 0; j < ntok; j += W) {
      F p = exp2_i8<Arch>(F::load_unaligned(sh + j) - vmn);
      lsum += p;
      F w = p * F::load_unaligned(scl + j);
      w.store_unaligned(sh + j);
      wmx = xsimd::max(wmx, w);
    }
    pl[h] = pl[h] * alpha + xsimd::hadd(lsum);
    const float wm = hmax<Arch>(wmx, 0.f);
    const float inv = wm > 0.f ? K::PMAX / wm : 0.f;
    ps[h] = wm / K::PMAX;
    const F vinv(inv);
    typename K::acc qsum = K::zero();  // exact: at most 127 * BT / W per lane
    std::uint8_t* v = s.pv + static_cast<std::size_t>(h) * s.pv_stride;
    for (int j = 0; j < ntok; j += W)
      K::quant_pvec(F::load_unaligned(sh + j) * vinv, qsum, v + static_cast<std::size_t>(j) * 4);
    // The cache bytes' offset times the weights' sum: int4's nibbles carry
    // +8 on every ISA (I8<Arch>), int8's bytes +128 where kValueOffset.
    cp[h] = q4 ? 8.f * static_cast<float>(hsum_i32(qsum))
            : K::kValueOffset ? 128.f * static_cast<float>(hsum_i32(qsum)) : 0.f;
    // Rescaled by alpha, except on an item's first block, where po is not
    // yet written (the value products store it) and alpha is 0 or, for a
    // NaN query, NaN: that NaN still spreads, through the block's scale.
    if (B.first) {
      if (alpha != alpha) ps[h] = alpha;
    } else if (alpha != 1.f) {
      float* o = po + static_cast<std::size_t>(h) * d_c;
      const F va(alpha);
      int c = 0;
      for (; c + W <= d_c; c += W) (F::load_unaligned(o + c) * va).store_unaligned(o + c);
      for (; c < d_c; ++c) o[c] *= alpha;
    }
  }
}

// Step 3: integer value products, scaled into the partial output. Meanwhile
// the next block's tiles are prefetched (LinePrefetch says with which hint),
// spread evenly over the calls and one line per chunk within them: the
// scores of a block stream the cache from DRAM at about twice the call's
// average rate and the value products read none, so fetching during the
// values halves the demand (without it the scores stall on DRAM; in bursts
// it is slower than no prefetch: docs/performance-log.md, "Decode attention
// kernels on the Zen 4 machine").
template <class Arch, bool Q4>
[[gnu::always_inline]] inline void i8_block_values(const MlaCtx<Arch>& X, const I8Slot& s, const I8Block& B, int h0,
                                                   int h1, float* po) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const Plan& P = X.P;
  const int T = P.T, d_c = P.d_c;
  const std::int64_t nb0 = B.nb0, nb1 = B.nb1;
  const bool first = B.first;
  const int nch = B.ntok / W;
  alignas(64) std::int32_t vo[16 * value_hb<Arch>()];
  const std::size_t tile_lines = (X.cache->layout.bytes + 63) / 64;
  const std::size_t pf_lines = nb0 < nb1 ? static_cast<std::size_t>(imin(P.UT, nb1 - nb0)) * tile_lines : 0;
  const std::size_t n_calls = static_cast<std::size_t>((h1 - h0 + value_hb<Arch>() - 1) / value_hb<Arch>()) *
                              static_cast<std::size_t>((P.Gl + 3) / 4);
  std::size_t call = 0;
  for (int h = h0; h < h1; h += value_hb<Arch>()) {
    const int nhb = static_cast<int>(imin(value_hb<Arch>(), h1 - h));
    for (int g = 0; g < P.Gl; g += 4) {
      const int ng = static_cast<int>(imin(4, P.Gl - g));
      LinePrefetch pf{s.pv, 1};  // nothing to fetch: a line in L1
      if (pf_lines) {  // lines [a, e) of the next block
        const std::size_t a = pf_lines * call / n_calls, ti = a / tile_lines, te = (ti + 1) * tile_lines;
        std::size_t e = pf_lines * (call + 1) / n_calls;
        const auto* tile = tile_at(*X.cache, nb0 + static_cast<std::int64_t>(ti));
        for (std::size_t l = te, tj = ti + 1; l < e; l += tile_lines, ++tj)  // later tiles' part: now
          LinePrefetch{tile_at(*X.cache, nb0 + static_cast<std::int64_t>(tj)),
                       static_cast<int>(e - l < tile_lines ? e - l : tile_lines)}
              .from(0);
        if (e > te) e = te;
        if (e > a) pf = LinePrefetch{tile + (a - ti * tile_lines) * 64, static_cast<int>(e - a)};
        ++call;
      }
      const std::uint8_t* pv = s.pv + static_cast<std::size_t>(h) * s.pv_stride;
      if (Q4 && B.int8)
        i8_values_n<Arch, value_hb<Arch>(), 4, false>(nhb, ng, B.tp, T, g, nch, pv, s.pv_stride, vo, pf);
      else
        i8_values_n<Arch, value_hb<Arch>(), 4, Q4>(nhb, ng, B.tp, T, g, nch, pv, s.pv_stride, vo, pf);
      for (int k = 0; k < nhb; ++k) {
        float* o = po + static_cast<std::size_t>(h + k) * d_c + 4 * g;
        const std::int32_t* r = vo + 16 * k;
        const float sc = s.ps[h + k], cc = s.cp[h + k];
        const int n = 4 * ng;
        int c = 0;
        if (n == 16) {
          const F vs(sc), vc(cc);
          for (; c + W <= 16; c += W)
            xsimd::fma(K::i2f(r + c) - vc, vs, first ? F(0.f) : F::load_unaligned(o + c)).store_unaligned(o + c);
        }
        for (; c < n; ++c) o[c] = (first ? 0.f : o[c]) + sc * (static_cast<float>(r[c]) - cc);
      }
    }
  }
}

// next_item(): the tile range [first, end) of the work item this thread
// takes after this one (first == end if none), asked for once, when the
// item's last block starts, so its first block is prefetched like any
// other (unprefetched it would wait on DRAM: docs/performance-log.md,
// "Figures moved out of code comments") while the choice of item stays
// dynamic but for that one block.
template <class Arch, bool Q4, class NextItem>
void i8_item(const MlaCtx<Arch>& X, int h0, int h1, std::int64_t t0, std::int64_t t1, float* po,
             float* pm, float* pl, std::uint8_t* thr, NextItem&& next_item) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;  // == 4L
  static_assert(W == 4 * K::L, "int32 batch must match the token vector");
  const Plan& P = X.P;
  const int T = P.T, d_c = P.d_c;
  const I8Slot s = i8_slot(P, X.base, thr);

  // po is not zeroed here: the item's first block stores its value
  // products instead of adding them. Its lines were last touched by the
  // previous call's merge, often on the other thread's L3, and zeroing them
  // up front waits on those transfers; the first block's stores overlap
  // them with the dot products (docs/performance-log.md, "Figures moved out
  // of code comments").
  for (int h = h0; h < h1; ++h) {
    pm[h] = -INFINITY;
    pl[h] = 0.f;
    if (t0 >= t1) std::memset(po + static_cast<std::size_t>(h) * d_c, 0, sizeof(float) * d_c);
  }
  for (std::int64_t tb = t0, ntile = 0; tb < t1; tb += ntile) {
    const std::uint8_t* tp[kMaxBlockTiles];
    I8Block B;
    B.tp = tp;
    ntile = imin(P.UT, t1 - tb);
    // An int4 cache's int8 tile is a block of its own: its latent scales are
    // ~18x smaller than int4's, and beside them its weights, quantized
    // against the block's largest, would keep ~4 bits.
    const std::int64_t t8 = Q4 ? X.cache->int8_tile : -1;
    if (t8 > tb && t8 < tb + ntile) ntile = t8 - tb;
    B.ntile = static_cast<int>(ntile);
    for (int i = 0; i < B.ntile; ++i) tp[i] = tile_at(*X.cache, tb + i);
    B.int8 = t8 == tb;
    B.nvalid = static_cast<int>(imin(static_cast<std::int64_t>(B.ntile) * T, X.n_ctx - tb * T));
    B.ntok = (B.nvalid + W - 1) / W * W;  // whole vectors
    B.first = tb == t0;
    B.nb0 = tb + ntile;
    B.nb1 = t1;
    if (B.nb0 >= t1) {
      const auto r = next_item();
      B.nb0 = r.first;
      B.nb1 = r.second;
    }
    i8_block_scores<Arch, Q4>(X, s, B, h0, h1);
    i8_block_weights<Arch, Q4>(X, s, B, h0, h1, po, pm, pl);
    i8_block_values<Arch, Q4>(X, s, B, h0, h1, po);
  }
  for (int h = h0; h < h1; ++h) pm[h] /= kLog2e;  // natural units for the merge
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
