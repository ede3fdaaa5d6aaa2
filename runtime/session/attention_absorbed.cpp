// The absorbed form of attention (attention.h): q_lat_h = W_UK_h^T q_nope_h,
// the mla_attn kernel over the latent cache (decode, or causal prefill),
// o_h = W_UV_h o_lat_h. The regions are opened here, over the kernel's
// phases (mla_attn.h). A one-token decode runs each head's chain (W_UK^T,
// its query, its attention, W_UV) in one region where the kernel's plan
// splits only the heads (a short context), and in three where it splits
// the context (W_UK^T with the query; the work items; the merge with W_UV):
// the thread split never changes a head's arithmetic. Rules: graph_rules.h.
#include "runtime/session/attention.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <string>

#include "platform/thread_pool.h"
#include "runtime/error.h"
#include "runtime/session/finite_checks.h"
#include "runtime/session/kernel_regions.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

AbsorbedAttention::AbsorbedAttention(WeightMultiply& wm, Isa isa, int n_heads, const LatentTileLayout& layout)
    : wm_(wm), attn_(&kernels::mla_attn_kernels(isa)), n_heads_(n_heads) {
  attn_scratch_.resize(attn_->scratch_bytes(n_heads, layout, wm.threads()));
}

void AbsorbedAttention::reserve_scratch(const LatentTileLayout& layout) {
  // Sessions of one step may keep their caches in different types.
  const std::size_t need = attn_->scratch_bytes(n_heads_, layout, wm_.threads());
  if (attn_scratch_.size() < need) {
    try {
      attn_scratch_.resize(need);
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, "attention scratch: cannot allocate " + std::to_string(need) + " bytes");
    }
  }
}

kernels::MlaDecodeArgs AbsorbedAttention::decode_args(const MlaConfig& m, const AttnSpan& sp, const float* q_lat,
                                                      const float* q_pe, float* o_lat) {
  kernels::MlaDecodeArgs a;
  a.n_heads = m.n_heads;
  a.q_lat = q_lat;
  a.q_pe = q_pe;
  a.scale = static_cast<float>(m.kq_scale());
  a.cache = sp.view;
  a.n_ctx = sp.p0 + 1;
  a.out = o_lat;
  a.threads = wm_.threads();
  a.scratch = attn_scratch_.data();
  return a;
}

void AbsorbedAttention::run(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, int n,
                            std::span<const AttnSpan> spans, float* o) {
  const int nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope, dc = m.kv_lora_rank, dv = m.d_v;
  const float scale = static_cast<float>(m.kq_scale());
  float* q_lat = q_lat_.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
  float* q_pe = q_pe_.get(static_cast<std::size_t>(n) * nh * dr);    // (n, n_h, d_R)
  float* o_lat = o_lat_.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
  const bool chain = n == 1 && spans.size() == 1 && !wm_.use_gemm(L.wuk_t.head.type, 1) &&
                     !wm_.use_gemm(L.wuv.head.type, 1);
  if (chain) {
    decode_chain(m, L, layer, q, spans[0], o);
    return;
  }
  // q_lat_h = W_UK_h^T q_nope_h
  wm_.linear_heads(L.wuk_t, nh, q, qh, static_cast<std::size_t>(nh) * qh, n, q_lat, dc,
                   static_cast<std::size_t>(nh) * dc);
  for (const AttnSpan& sp : spans)
    refuse_non_finite_rows(q_lat + static_cast<std::size_t>(sp.off) * nh * dc, sp.n,
                           static_cast<std::size_t>(nh) * dc, layer, sp.p0, "latent query");
  for (int t = 0; t < n; ++t)
    for (int hd = 0; hd < nh; ++hd)
      std::memcpy(q_pe + (static_cast<std::size_t>(t) * nh + hd) * dr,
                  q + (static_cast<std::size_t>(t) * nh + hd) * qh + dn, sizeof(float) * dr);
  for (const AttnSpan& sp : spans) {
    reserve_scratch(sp.view.layout);
    const float* sq_lat = q_lat + static_cast<std::size_t>(sp.off) * nh * dc;
    const float* sq_pe = q_pe + static_cast<std::size_t>(sp.off) * nh * dr;
    float* so_lat = o_lat + static_cast<std::size_t>(sp.off) * nh * dc;
    if (sp.n == 1) {
      mla_decode_regions(*attn_, decode_args(m, sp, sq_lat, sq_pe, so_lat));
    } else {
      kernels::MlaPrefillArgs a;
      a.n_heads = nh;
      a.n_q = sp.n;
      a.p0 = sp.p0;
      a.q_lat = sq_lat;
      a.q_pe = sq_pe;
      a.scale = scale;
      a.cache = sp.view;
      a.out = so_lat;
      a.threads = wm_.threads();
      a.scratch = attn_scratch_.data();
      mla_prefill_regions(*attn_, a);
    }
    refuse_non_finite_rows(so_lat, sp.n, static_cast<std::size_t>(nh) * dc, layer, sp.p0, "attention output");
  }
  // o_h = W_UV_h o_lat_h
  wm_.linear_heads(L.wuv, nh, o_lat, dc, static_cast<std::size_t>(nh) * dc, n, o, dv,
                   static_cast<std::size_t>(nh) * dv);
}

// One token of one sequence: the same products, kernel phases and checks as
// run()'s general path, per head, in fewer regions.
void AbsorbedAttention::decode_chain(const MlaConfig& m, const LayerWeights& L, int layer, const float* q,
                                     const AttnSpan& sp, float* o) {
  const int nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope, dc = m.kv_lora_rank, dv = m.d_v;
  float* q_lat = q_lat_.get(static_cast<std::size_t>(nh) * dc);  // (n_h, d_c)
  float* q_pe = q_pe_.get(static_cast<std::size_t>(nh) * dr);    // (n_h, d_R)
  float* o_lat = o_lat_.get(static_cast<std::size_t>(nh) * dc);  // (n_h, d_c)
  reserve_scratch(sp.view.layout);
  const kernels::MlaDecodeArgs a = decode_args(m, sp, q_lat, q_pe, o_lat);
  const kernels::MlaDecodeSplit split = attn_->decode_begin(a);
  std::size_t per = std::max(WeightMultiply::scratch_bytes(L.wuk_t.head, 1), WeightMultiply::scratch_bytes(L.wuv.head, 1));
  std::uint8_t* base = wm_.thread_scratch(per);
  std::atomic<bool> bad_query{false};
  // Heads [h0, h1): q_lat_h = W_UK_h^T q_nope_h, and their query prepared;
  // false where a latent query is not finite (refused after the region).
  auto query = [&](int h0, int h1, void* scratch) {
    for (int h = h0; h < h1; ++h) {
      const WeightRef w = L.wuk_t[h];
      wm_.product_rows(w, 0, w.rows, q + static_cast<std::size_t>(h) * qh, qh, 1, q_lat + static_cast<std::size_t>(h) * dc,
                       dc, scratch);
      std::memcpy(q_pe + static_cast<std::size_t>(h) * dr, q + static_cast<std::size_t>(h) * qh + dn, sizeof(float) * dr);
    }
    const std::size_t count = static_cast<std::size_t>(h1 - h0) * dc;
    if (first_non_finite(q_lat + static_cast<std::size_t>(h0) * dc, count) < count) {
      bad_query.store(true, std::memory_order_relaxed);
      return false;
    }
    attn_->decode_query(a, h0, h1);
    return true;
  };
  // Heads [h0, h1): their merge, then o_h = W_UV_h o_lat_h.
  auto output = [&](int h0, int h1, void* scratch) {
    attn_->decode_merge(a, h0, h1);
    for (int h = h0; h < h1; ++h) {
      const WeightRef w = L.wuv[h];
      wm_.product_rows(w, 0, w.rows, o_lat + static_cast<std::size_t>(h) * dc, dc, 1, o + static_cast<std::size_t>(h) * dv,
                       dv, scratch);
    }
  };
  RegionError err;
  if (split.context_splits == 1) {
    // Each item is a run of heads over the whole context: its chain on one
    // thread, one region for the layer's attention.
    parallel_slots(split.items, [&](int t, int ns) {
      void* scratch = base + per * static_cast<std::size_t>(t);
      for (int it = split.items * t / ns; it < split.items * (t + 1) / ns; ++it) {
        const int h0 = nh * it / split.items, h1 = nh * (it + 1) / split.items;
        err.run([&] {
          if (!query(h0, h1, scratch)) return;
          attn_->decode_item(a, it, t);
          output(h0, h1, scratch);
        });
      }
    });
  } else {
    const int team = std::min(wm_.threads(), nh);
    parallel_slots(team, [&](int t, int ns) {
      err.run([&] { query(nh * t / ns, nh * (t + 1) / ns, base + per * static_cast<std::size_t>(t)); });
    });
    err.rethrow();
    if (!bad_query.load()) {
      parallel_slots(split.slots, [&](int t, int ns) { attn_->decode_items(a, t, ns); });
      parallel_slots(team, [&](int t, int ns) {
        err.run([&] { output(nh * t / ns, nh * (t + 1) / ns, base + per * static_cast<std::size_t>(t)); });
      });
    }
  }
  err.rethrow();
  refuse_non_finite_rows(q_lat, 1, static_cast<std::size_t>(nh) * dc, layer, sp.p0, "latent query");
  refuse_non_finite_rows(o_lat, 1, static_cast<std::size_t>(nh) * dc, layer, sp.p0, "attention output");
}

}  // namespace latte
