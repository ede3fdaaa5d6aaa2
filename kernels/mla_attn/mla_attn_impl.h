// One body for every ISA: included only by mla_attn__<isa>.cpp. This header
// is the driver (the query's preparation, the context and head splits, the
// work items, the merge of the splits: the phases its caller runs on its
// threads, and the whole calls on one thread); the
// parts are its includes, each a header of its own:
//   mla_attn_plan_impl.h      the plan, scratch layout and split policy
//   mla_attn_int8_ops_impl.h  the int8 operations per ISA (I8<Arch>, exp2_i8)
//   mla_attn_int8_impl.h      the int8 path (int8 and int4 caches): its steps
//   mla_attn_int8_products_impl.h  the int8 path's score and value products
//   mla_attn_float_impl.h     the float path (f32 and f16 caches)
// Everything here is a template over the xsimd Arch or sits in an anonymous
// namespace, so no ISA-compiled inline code is shared with other objects.
// The float path, the softmax and the merge are xsimd over the Arch
// (exponential: kernels/exp_f32_impl.h); the int8 path's byte work is
// per-ISA intrinsics (I8<Arch> over kernels/int8/int8_ops_impl.h: vpdpbusd,
// vpmaddubsw, sdot and byte shuffles have no xsimd spelling), as are the f16
// conversion and lane_sums' AVX-512 transpose.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <new>
#include <utility>

#include "kernels/mla_attn/mla_attn.h"
#include "kernels/mla_attn/mla_attn_float_impl.h"
#include "kernels/mla_attn/mla_attn_int8_impl.h"
#include "kernels/mla_attn/mla_attn_plan_impl.h"

namespace latte::kernels {
inline namespace LATTE_KERNEL_ISA_NS {

// The query of heads [h0, h1) prepared in the scratch (each head's alone).
// int4 caches keep the latent query in floats too (qf): each tile scales it
// by its channel scales and quantizes it again (i8_block_scores).
template <class Arch>
void prepare_query(const Plan& P, std::uint8_t* base, const float* q_lat, const float* q_pe, float scale, int h0,
                   int h1) {
  const int nh = P.nh, d_c = P.d_c, d_R = P.d_R, C = P.C;
  float* qf = reinterpret_cast<float*>(base + P.off_qf);
  if (!P.i8 || P.q4) {
    for (int h = h0; h < h1; ++h) {
      for (int c = 0; c < d_c; ++c) qf[static_cast<std::size_t>(h) * C + c] = q_lat[static_cast<std::size_t>(h) * d_c + c] * scale;
      for (int c = 0; c < d_R; ++c) qf[static_cast<std::size_t>(h) * C + d_c + c] = q_pe[static_cast<std::size_t>(h) * d_R + c] * scale;
    }
    if (!P.i8) return;
  }
  std::int8_t* q8 = reinterpret_cast<std::int8_t*>(base + P.off_q8);
  float* qv = reinterpret_cast<float*>(base + P.off_qv);
  const auto corr8 = [](float sum) { return I8<Arch>::kOffset ? 128.f * sum : 0.f; };  // int8 bytes
  for (int h = h0; h < h1; ++h) {
    const float sl = quant_query<Arch>(q_lat + static_cast<std::size_t>(h) * d_c, nullptr, d_c,
                                       q8 + static_cast<std::size_t>(h) * C, scale, qv[h]);
    qv[2 * nh + h] = corr8(sl);  // int8 tiles, an int4 cache's filling one among them (int4 tiles: i8_tile_query)
    const float sr = quant_query<Arch>(q_pe + static_cast<std::size_t>(h) * d_R, nullptr, d_R,
                                       q8 + static_cast<std::size_t>(h) * C + d_c, scale, qv[nh + h]);
    qv[3 * nh + h] = corr8(sr);
    // The score pass works in log2 units: log2(e) goes into the scales once
    // here rather than at every vector pair.
    qv[h] *= kLog2e;
    qv[nh + h] *= kLog2e;
  }
}

// Merge split partials into out (heads [h0, h1)).
template <class Arch>
void merge_heads(const Plan& P, const std::uint8_t* base, int nsplit, int h0, int h1, float* out) {
  using F = xsimd::batch<float, Arch>;
  constexpr int W = F::size;
  const int nh = P.nh, d_c = P.d_c;
  for (int h = h0; h < h1; ++h) {
    float M = -INFINITY;
    for (int s = 0; s < nsplit; ++s) {
      const float* part = reinterpret_cast<const float*>(base + P.off_part) + s * P.part_floats;
      M = fmx(M, part[static_cast<std::size_t>(nh) * d_c + h]);
    }
    float wsum = 0.f;
    float* o = out + static_cast<std::size_t>(h) * d_c;
    for (int s = 0; s < nsplit; ++s) {
      const float* part = reinterpret_cast<const float*>(base + P.off_part) + s * P.part_floats;
      const float m = part[static_cast<std::size_t>(nh) * d_c + h];
      const float l = part[static_cast<std::size_t>(nh) * d_c + nh + h];
      const float w = l > 0.f ? std::exp(m - M) : 0.f;
      wsum += w * l;
      const float* po = part + static_cast<std::size_t>(h) * d_c;
      const F vw(w);
      int c = 0;
      if (s == 0) {
        for (; c + W <= d_c; c += W) (F::load_unaligned(po + c) * vw).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] = po[c] * w;
      } else {
        for (; c + W <= d_c; c += W) xsimd::fma(F::load_unaligned(po + c), vw, F::load_unaligned(o + c)).store_unaligned(o + c);
        for (; c < d_c; ++c) o[c] += po[c] * w;
      }
    }
    const float inv = wsum > 0.f ? 1.f / wsum : 0.f;
    for (int c = 0; c < d_c; ++c) o[c] *= inv;
  }
}

namespace {

// A decode's split (decode_begin), in the scratch at P.off_state; bounds at
// P.off_bounds (split s: tiles [bounds[s], bounds[s + 1])).
struct SplitState {
  int n_cs, n_hs, items;
  std::atomic<int> next;  // the next item taken dynamically, less the slots
};

inline SplitState& split_state(const Plan& P, std::uint8_t* base) {
  return *reinterpret_cast<SplitState*>(base + P.off_state);
}

// Splits the context first; leftover threads split the heads.
inline MlaDecodeSplit begin_split(const Plan& P, std::uint8_t* base, std::int64_t n_ctx) {
  const std::int64_t n_tiles = (n_ctx + P.T - 1) / P.T;
  std::int64_t* bounds = reinterpret_cast<std::int64_t*>(base + P.off_bounds);
  int n_cs = 0;
  bounds[0] = 0;
  if (P.nt == 1) {
    bounds[n_cs = 1] = n_tiles;
  } else if (n_tiles / P.UT < P.nt) {  // short: equal splits
    n_cs = static_cast<int>(imin(P.nt, n_tiles));
    for (int s = 1; s <= n_cs; ++s) bounds[s] = n_tiles * s / n_cs;
  } else {  // guided, see unit_tiles
    const std::int64_t div = 2 * static_cast<std::int64_t>(P.nt);
    for (std::int64_t unit = P.UT;; unit *= 2) {
      n_cs = 0;
      for (std::int64_t t = 0; t < n_tiles && n_cs < P.max_splits;) {
        std::int64_t len = ((n_tiles - t + div - 1) / div + unit - 1) / unit * unit;
        bounds[++n_cs] = t += imin(len, n_tiles - t);
      }
      if (bounds[n_cs] == n_tiles) break;
    }
  }
  int n_hs = P.nt / n_cs;
  if (n_hs > (P.nh + 3) / 4) n_hs = (P.nh + 3) / 4;
  if (n_hs < 1) n_hs = 1;
  SplitState* st = new (base + P.off_state) SplitState{n_cs, n_hs, n_cs * n_hs, {0}};
  MlaDecodeSplit sp;
  sp.items = st->items;
  sp.context_splits = n_cs;
  sp.head_splits = n_hs;
  sp.slots = static_cast<int>(imin(st->items, P.nt));
  return sp;
}

inline std::pair<std::int64_t, std::int64_t> no_next_item() { return {0, 0}; }

}  // namespace

// Item it: context split it / n_hs (tiles [t0, t1)), head split it % n_hs,
// so items come largest first; on `slot`'s part of the scratch.
// next_item() as i8_item's and f_item's.
template <class Arch, class NextItem>
void run_item(const Plan& P, std::uint8_t* base, const LatentLayerView& cache, std::int64_t n_ctx, int it, int slot,
              NextItem&& next_item) {
  const SplitState& st = split_state(P, base);
  const std::int64_t* bounds = reinterpret_cast<const std::int64_t*>(base + P.off_bounds);
  const int cs = it / st.n_hs, hs = it % st.n_hs;
  const std::int64_t t0 = bounds[cs], t1 = bounds[cs + 1];
  const int h0 = P.nh * hs / st.n_hs, h1 = P.nh * (hs + 1) / st.n_hs;
  MlaCtx<Arch> X{P, &cache, n_ctx, base};
  float* part = reinterpret_cast<float*>(base + P.off_part) + cs * P.part_floats;
  float* pm = part + static_cast<std::size_t>(P.nh) * P.d_c;
  float* pl = pm + P.nh;
  std::uint8_t* thr = base + P.off_thr + static_cast<std::size_t>(slot) * P.thr_bytes;
  if (P.q4)
    i8_item<Arch, true>(X, h0, h1, t0, t1, part, pm, pl, thr, next_item);
  else if (P.i8)
    i8_item<Arch, false>(X, h0, h1, t0, t1, part, pm, pl, thr, next_item);
  else
    f_item<Arch>(X, h0, h1, t0, t1, part, pm, pl, thr, next_item);
}

// The items from slot t of a region of ns slots (ns <= items). Items are
// taken dynamically (a thread slowed by another process does not hold the
// others back), the next one already during the current one's last block or
// tile when the item asks (see i8_item, f_item). Each slot's first item is
// its own, though: taken dynamically too, the thread that enters first
// takes item 0 and, asking for the next one as soon as its last (there,
// only) block starts, item 1 as well, so with one block per item (up to ~1K
// tokens with 2 threads) one thread does everything while the other waits at
// the join (docs/performance-log.md, "Figures moved out of code comments").
// Slot ns - 1 - t takes item t: the workers usually enter before the thread
// that opened the region, so the largest chunk goes to one that starts first.
template <class Arch>
void run_items(const Plan& P, std::uint8_t* base, const LatentLayerView& cache, std::int64_t n_ctx, int t, int ns) {
  SplitState& st = split_state(P, base);
  const std::int64_t* bounds = reinterpret_cast<const std::int64_t*>(base + P.off_bounds);
  const int items = st.items;
  int it = ns - 1 - t;
  while (it < items) {
    int ahead = -1;
    run_item<Arch>(P, base, cache, n_ctx, it, t, [&] {
      ahead = ns + st.next.fetch_add(1, std::memory_order_relaxed);
      if (ahead >= items) return no_next_item();
      const int cs = ahead / st.n_hs;
      return std::pair<std::int64_t, std::int64_t>(bounds[cs], bounds[cs + 1]);
    });
    it = ahead >= 0 ? ahead : ns + st.next.fetch_add(1, std::memory_order_relaxed);
  }
}

// One decode over `base` scratch (layout P) on the calling thread.
template <class Arch>
void decode_core(const Plan& P, std::uint8_t* base, const float* q_lat, const float* q_pe, float scale,
                 const LatentLayerView& cache, std::int64_t n_ctx, float* out) {
  const MlaDecodeSplit sp = begin_split(P, base, n_ctx);
  prepare_query<Arch>(P, base, q_lat, q_pe, scale, 0, P.nh);
  run_items<Arch>(P, base, cache, n_ctx, 0, 1);
  merge_heads<Arch>(P, base, sp.context_splits, 0, P.nh, out);
}

template <class Arch>
std::size_t mla_scratch_body(int nh, const LatentTileLayout& L, int threads) {
  return scratch_bytes_impl(nh, L, threads);
}

inline Plan decode_plan(const MlaDecodeArgs& a) {
  return make_plan(a.n_heads, a.cache.layout, resolve_threads(a.threads));
}

template <class Arch>
void mla_decode_body(const MlaDecodeArgs& a) {
  if (a.n_ctx <= 0) {  // nothing to attend to
    std::memset(a.out, 0, sizeof(float) * a.n_heads * a.cache.layout.d_c);
    return;
  }
  decode_core<Arch>(decode_plan(a), aligned_scratch(a.scratch), a.q_lat, a.q_pe, a.scale, a.cache, a.n_ctx, a.out);
}

template <class Arch>
MlaDecodeSplit mla_decode_begin_body(const MlaDecodeArgs& a) {
  return begin_split(decode_plan(a), aligned_scratch(a.scratch), a.n_ctx);
}
template <class Arch>
void mla_decode_query_body(const MlaDecodeArgs& a, int h0, int h1) {
  prepare_query<Arch>(decode_plan(a), aligned_scratch(a.scratch), a.q_lat, a.q_pe, a.scale, h0, h1);
}
template <class Arch>
void mla_decode_items_body(const MlaDecodeArgs& a, int slot, int n_slots) {
  run_items<Arch>(decode_plan(a), aligned_scratch(a.scratch), a.cache, a.n_ctx, slot, n_slots);
}
template <class Arch>
void mla_decode_item_body(const MlaDecodeArgs& a, int item, int slot) {
  run_item<Arch>(decode_plan(a), aligned_scratch(a.scratch), a.cache, a.n_ctx, item, slot, no_next_item);
}
template <class Arch>
void mla_decode_merge_body(const MlaDecodeArgs& a, int h0, int h1) {
  const Plan P = decode_plan(a);
  std::uint8_t* base = aligned_scratch(a.scratch);
  merge_heads<Arch>(P, base, split_state(P, base).n_cs, h0, h1, a.out);
}

// Queries [i0, i1), each as a decode planned for one thread in slot's part.
template <class Arch>
void mla_prefill_queries_body(const MlaPrefillArgs& a, int i0, int i1, int slot) {
  const auto& L = a.cache.layout;
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * L.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * L.d_R;
  const Plan P1 = make_plan(a.n_heads, L, 1);
  std::uint8_t* base = aligned_scratch(a.scratch) + static_cast<std::size_t>(slot) * P1.total;
  for (int i = i0; i < i1; ++i)
    decode_core<Arch>(P1, base, a.q_lat + i * nl, a.q_pe + i * nr, a.scale, a.cache, a.p0 + i + 1, a.out + i * nl);
}

// The whole prefill on the calling thread, as its caller would split it:
// from a.threads queries on (a.threads > 1) each planned for one thread,
// else each planned for a.threads.
template <class Arch>
void mla_prefill_body(const MlaPrefillArgs& a) {
  const int nt = resolve_threads(a.threads);
  if (a.n_q >= nt && nt > 1) {
    mla_prefill_queries_body<Arch>(a, 0, a.n_q, 0);
    return;
  }
  const auto& L = a.cache.layout;
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * L.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * L.d_R;
  const Plan P = make_plan(a.n_heads, L, nt);
  std::uint8_t* base = aligned_scratch(a.scratch);
  for (int i = 0; i < a.n_q; ++i)
    decode_core<Arch>(P, base, a.q_lat + i * nl, a.q_pe + i * nr, a.scale, a.cache, a.p0 + i + 1, a.out + i * nl);
}

}  // inline namespace LATTE_KERNEL_ISA_NS
}  // namespace latte::kernels
