// mla_attn's int8 path (int8 and int4 caches; Q4: int4), its driver: per
// work item (i8_item), per tile block, three named steps: the scores by
// integer dot products, the online softmax with quantized weights, and the
// integer value products scaled into the partial output. The products are
// mla_attn_int8_products_impl.h's; the byte operations I8<Arch>
// (mla_attn_int8_ops_impl.h). Like every body header: Arch-templated or in
// an anonymous namespace.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/mla_attn/mla_attn_int8_ops_impl.h"
#include "kernels/mla_attn/mla_attn_int8_products_impl.h"
#include "kernels/mla_attn/mla_attn_plan_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

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

// A query part quantized for the integer scores: q = round(x / s), s =
// max|x| / QMAX (I8<Arch>), qs = s * scale; Scaled: of x times ch (an int4
// tile's channel scales) instead of x. Vector loops: this runs once per
// call for every head (and per int4 tile), and written scalar (9216
// elements for 16 heads) it would dominate a call at a short context
// (docs/performance-log.md, "Figures moved out of code comments"). Rounding
// as nearbyint's (to nearest even), so the result is the scalar one bit for
// bit. Returns the quantized values' sum (0 for a bad row), which times the
// cache bytes' offset is the scores' correction.
template <class Arch, bool Scaled = false>
float quant_query(const float* x, const float* ch, int n, std::int8_t* q, float scale, float& qs) {
  using K = I8<Arch>;
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  constexpr int QMAX = K::QMAX;
  const auto vec = [&](int i) {
    const F v = F::load_unaligned(x + i);
    return Scaled ? v * F::load_unaligned(ch + i) : v;
  };
  const auto one = [&](int i) { return Scaled ? x[i] * ch[i] : x[i]; };
  F amv(0.f);
  int i = 0;
  for (; i + W <= n; i += W) amv = xsimd::max(amv, xsimd::abs(vec(i)));
  float amax = hmax<Arch>(amv, 0.f);
  for (; i < n; ++i) amax = fmx(amax, std::fabs(one(i)));
  // amax so small that QMAX / amax overflows: quantized as zeros.
  const float inv = amax > 0.f && __builtin_isfinite(QMAX / amax) ? QMAX / amax : 0.f;
  const F vinv(inv);
  typename K::acc sv = K::zero();
  // A NaN or inf in the query (a model whose numbers overflow) makes a
  // scaled lane NaN; the others stay within [-QMAX, QMAX] (2 * QMAX: room
  // for rounding). Such a query gets a NaN scale, so the output is NaN and
  // the session's logits check reports it, instead of finite garbage (the
  // conversion's result for NaN differs by ISA) or an int overflow; its
  // lanes are stored as zeros.
  typename F::batch_bool_type finite(true);
  i = 0;
  for (; i + W <= n; i += W) {
    const F y = vec(i) * vinv;
    finite = finite & (xsimd::abs(y) <= F(2.f * QMAX));
    sv = K::add(sv, K::quant_store(xsimd::select(finite, y, F(0.f)), q + i));  // lanes wrap, exact unless not finite
  }
  bool bad = !xsimd::all(finite);
  int sum = bad ? 0 : hsum_i32(sv);
  for (; i < n; ++i) {
    const float r = std::nearbyint(one(i) * inv);
    bad |= !(std::fabs(r) <= 2.f * QMAX);
    const int v = bad ? 0 : static_cast<int>(r);
    q[i] = static_cast<std::int8_t>(v);
    sum += v;
  }
  qs = bad ? __builtin_nanf("") : inv > 0.f ? amax / QMAX * scale : 0.f;
  return bad ? 0.f : static_cast<float>(sum);
}

namespace {  // not Arch-templated: internal, so no other ISA's object shares them

// An int8 item's query and thread slot, at the plan's offsets.
struct I8Slot {
  const std::int8_t* q8;             // (nh, C) quantized query
  const float *qsl, *qsr, *cl, *cr;  // (nh) query scales (times log2(e)) and corrections (int8 tiles)
  float* S;                          // (nh, BT) scores, then weights
  float* mx;                         // (nh, W) the block's running score max
  std::uint8_t* pv;                  // (nh, pv_stride) quantized weights
  float* scl;                        // (BT) the block's latent scales
  float *ps, *cp;                    // (nh) weight scales, value offsets
  std::size_t pv_stride;
  // int4 tiles (per-channel scales): see Plan
  const float* qf;                   // (nh, C) the scaled float query
  std::int8_t* q8t;                  // (nh, C) the query quantized for one tile
  float *qslt, *clt;                 // (nh) its latent scale and correction
  float* chs;                        // (UT, d_c) the block's channel scales
  float* cpt;                        // (nh, UT) value offsets per tile
};

inline I8Slot i8_slot(const Plan& P, const std::uint8_t* base, std::uint8_t* thr) {
  const float* qv = reinterpret_cast<const float*>(base + P.off_qv);
  float* hv = reinterpret_cast<float*>(thr + P.t_hv);
  return I8Slot{reinterpret_cast<const std::int8_t*>(base + P.off_q8),
                qv,
                qv + P.nh,
                qv + 2 * P.nh,
                qv + 3 * P.nh,
                reinterpret_cast<float*>(thr + P.t_S),
                reinterpret_cast<float*>(thr + P.t_mx),
                thr + P.t_pv,
                reinterpret_cast<float*>(thr + P.t_sc),
                hv,
                hv + P.nh,
                static_cast<std::size_t>(P.BT) * 4,
                reinterpret_cast<const float*>(base + P.off_qf),
                reinterpret_cast<std::int8_t*>(thr + P.t_q8t),
                reinterpret_cast<float*>(thr + P.t_qvt),
                reinterpret_cast<float*>(thr + P.t_qvt) + P.nh,
                reinterpret_cast<float*>(thr + P.t_chs),
                reinterpret_cast<float*>(thr + P.t_cpt)};
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

// An int4 tile's query (Q4, not the filling tile): each head's latent query
// times the tile's channel scales (ch, d_c), quantized again (quant_query),
// for heads [h0, h1); the rope part was copied at the item's start (i8_item).
template <class Arch>
[[gnu::always_inline]] inline void i8_tile_query(const Plan& P, const I8Slot& s, const float* ch, int h0, int h1) {
  for (int h = h0; h < h1; ++h) {
    const std::size_t o = static_cast<std::size_t>(h) * P.C;
    const float sum = quant_query<Arch, true>(s.qf + o, ch, P.d_c, s.q8t + o, kLog2e, s.qslt[h]);
    s.clt[h] = 8.f * sum;  // int4's nibbles carry +8 on every ISA
  }
}

// Step 1: the block's scores and their max. int4 tiles: first their
// channel scales, then per tile the query scaled by them.
template <class Arch, bool Q4>
[[gnu::always_inline]] inline void i8_block_scores(const MlaCtx<Arch>& X, const I8Slot& s, const I8Block& B, int h0,
                                                   int h1) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const Plan& P = X.P;
  const int T = P.T, BT = P.BT;
  for (int h = h0; h < h1; ++h) F(kMasked).store_aligned(s.mx + static_cast<std::size_t>(h) * W);
  const bool is8 = Q4 && B.int8;
  const bool chan = Q4 && !B.int8;  // per-channel scales
  if (chan)
    for (int i = 0; i < B.ntile; ++i)
      f16_to_f32_rows<Arch>(reinterpret_cast<const std::uint16_t*>(B.tp[i] + X.cache->layout.channel_scale_offset),
                            s.chs + static_cast<std::size_t>(i) * P.d_c, static_cast<std::size_t>(P.d_c));
  // The int8 layout's scales: an int4 cache's filling tile's, or an int8 tile's.
  const std::size_t lat_off = is8 ? X.cache->int8_scale_offset : X.cache->layout.scale_offset;
  const std::size_t rope_off = is8 ? X.cache->int8_scale_offset + 4 * static_cast<std::size_t>(T)
                                   : X.cache->layout.rope_scale_offset;
  for (int i = 0; i < B.ntile && i * T < B.nvalid; ++i) {
    if (chan) i8_tile_query<Arch>(P, s, s.chs + static_cast<std::size_t>(i) * P.d_c, h0, h1);
    const float* tl = chan ? nullptr : reinterpret_cast<const float*>(B.tp[i] + lat_off);
    const float* tr = reinterpret_cast<const float*>(B.tp[i] + rope_off);
    // The tile after this one (in this block or the next), prefetched
    // during the first head block's pass.
    const std::uint8_t* next = i + 1 < B.ntile ? B.tp[i + 1] : B.nb0 < B.nb1 ? tile_at(*X.cache, B.nb0) : nullptr;
    for (int h = h0; h < h1; h += score_hb<Arch>()) {
      float* S = s.S + static_cast<std::size_t>(h) * BT + i * T;
      float* mx = s.mx + static_cast<std::size_t>(h) * W;
      if (chan) {
        const ScoreScales f{s.qslt + h, s.qsr + h, s.clt + h, s.cr + h, tl, tr, B.nvalid - i * T};
        i8_scores_n<Arch, score_hb<Arch>(), true>(h1 - h, B.tp[i], T, P.Gl, P.G, s.q8t + static_cast<std::size_t>(h) * P.C,
                                                  P.C, f, S, BT, mx, h == h0 ? next : nullptr);
      } else {
        const ScoreScales f{s.qsl + h, s.qsr + h, s.cl + h, s.cr + h, tl, tr, B.nvalid - i * T};
        i8_scores_n<Arch, score_hb<Arch>(), false>(h1 - h, B.tp[i], T, P.Gl, P.G, s.q8 + static_cast<std::size_t>(h) * P.C,
                                                   P.C, f, S, BT, mx, h == h0 ? next : nullptr);
      }
    }
  }
}

// Step 2: per head, online softmax, weights quantized with the token's
// latent scale folded in (int4 tiles: none, their channel scales come with
// the value products). The block's latent scales are gathered once for
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
  const bool q4 = Q4 && !B.int8;  // the block's tiles are int4: no token scales (their channels' come at the values)
  const std::size_t scale_offset = Q4 && B.int8 ? X.cache->int8_scale_offset : X.cache->layout.scale_offset;
  if (q4)
    for (int k = 0; k < ntok; ++k) scl[k] = 1.f;
  else
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
    std::uint8_t* v = s.pv + static_cast<std::size_t>(h) * s.pv_stride;
    // The cache bytes' offset times the weights' sum: int4's nibbles carry
    // +8 on every ISA (I8<Arch>), per tile (each has its channel scales);
    // int8's bytes +128 where kValueOffset.
    if (q4) {
      for (int i = 0, j = 0; j < ntok; ++i) {
        typename K::acc qsum = K::zero();
        for (const int e = j + T < ntok ? j + T : ntok; j < e; j += W)
          K::quant_pvec(F::load_unaligned(sh + j) * vinv, qsum, v + static_cast<std::size_t>(j) * 4);
        s.cpt[static_cast<std::size_t>(h) * P.UT + i] = 8.f * static_cast<float>(hsum_i32(qsum));
      }
    } else {
      typename K::acc qsum = K::zero();  // exact: at most 127 * BT / W per lane
      for (int j = 0; j < ntok; j += W)
        K::quant_pvec(F::load_unaligned(sh + j) * vinv, qsum, v + static_cast<std::size_t>(j) * 4);
      cp[h] = K::kValueOffset ? 128.f * static_cast<float>(hsum_i32(qsum)) : 0.f;
    }
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
  // int4 tiles: each tile's sums scaled by its channel scales in the products
  // (i8_values_ch), which give floats; int8 tiles: integer sums.
  const bool chan = Q4 && !B.int8;
  alignas(64) std::int32_t vo[16 * value_hb<Arch>()];
  alignas(64) float vf[16 * value_hb<Arch>()];
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
      const int n = 4 * ng;
      if (chan) {
        i8_values_ch_n<Arch, value_hb<Arch>(), 4>(nhb, ng, B.tp, T, g, nch, pv, s.pv_stride, s.chs, d_c,
                                                  s.cpt + static_cast<std::size_t>(h) * P.UT, P.UT, vf, pf);
        for (int k = 0; k < nhb; ++k) {
          float* o = po + static_cast<std::size_t>(h + k) * d_c + 4 * g;
          const float* r = vf + 16 * k;
          const float sc = s.ps[h + k];
          int c = 0;
          if (n == 16) {
            const F vs(sc);
            for (; c + W <= 16; c += W)
              xsimd::fma(F::load_aligned(r + c), vs, first ? F(0.f) : F::load_unaligned(o + c)).store_unaligned(o + c);
          }
          for (; c < n; ++c) o[c] = (first ? 0.f : o[c]) + sc * r[c];
        }
        continue;
      }
      // int8 tiles (an int4 cache's filling tile among them)
      i8_values_n<Arch, value_hb<Arch>(), 4>(nhb, ng, B.tp, T, g, nch, pv, s.pv_stride, vo, pf);
      for (int k = 0; k < nhb; ++k) {
        float* o = po + static_cast<std::size_t>(h + k) * d_c + 4 * g;
        const std::int32_t* r = vo + 16 * k;
        const float sc = s.ps[h + k], cc = s.cp[h + k];
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
    // int4 tiles quantize the latent query per tile; its rope part is the call's.
    if (Q4)
      std::memcpy(s.q8t + static_cast<std::size_t>(h) * P.C + d_c, s.q8 + static_cast<std::size_t>(h) * P.C + d_c,
                  static_cast<std::size_t>(P.d_R));
  }
  for (std::int64_t tb = t0, ntile = 0; tb < t1; tb += ntile) {
    const std::uint8_t* tp[kMaxBlockTiles];
    I8Block B;
    B.tp = tp;
    ntile = imin(P.UT, t1 - tb);
    // An int4 cache's int8 tile (always its last) is a block of its own:
    // the block's steps take one path for all of its tiles (B.int8), and
    // its weights carry its tokens' latent scales where int4 tiles' carry
    // none, so quantized beside them against the block's largest they
    // would keep fewer bits.
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
