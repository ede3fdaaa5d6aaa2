// The absorbed form of attention (attention.h): q_lat_h = W_UK_h^T q_nope_h,
// the mla_attn kernel over the latent cache (decode, or causal prefill),
// o_h = W_UV_h o_lat_h. Rules: graph_rules.h.
#include "runtime/session/attention.h"

#include <cstring>
#include <new>
#include <string>

#include "runtime/error.h"
#include "runtime/session/finite_checks.h"

namespace latte {

AbsorbedAttention::AbsorbedAttention(WeightMultiply& wm, Isa isa, int n_heads, const LatentTileLayout& layout)
    : wm_(wm), attn_(&kernels::mla_attn_kernels(isa)), n_heads_(n_heads) {
  attn_scratch_.resize(attn_->scratch_bytes(n_heads, layout, wm.threads()));
}

void AbsorbedAttention::run(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, int n,
                            std::span<const AttnSpan> spans, float* o) {
  const int nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope, dc = m.kv_lora_rank, dv = m.d_v;
  const float scale = static_cast<float>(m.kq_scale());
  float* q_lat = q_lat_.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
  float* q_pe = q_pe_.get(static_cast<std::size_t>(n) * nh * dr);    // (n, n_h, d_R)
  float* o_lat = o_lat_.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
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
    // Sessions of one step may keep their caches in different types.
    const std::size_t need = attn_->scratch_bytes(n_heads_, sp.view.layout, wm_.threads());
    if (attn_scratch_.size() < need) {
      try {
        attn_scratch_.resize(need);
      } catch (const std::bad_alloc&) {
        throw Error(Status::out_of_memory, "attention scratch: cannot allocate " + std::to_string(need) + " bytes");
      }
    }
    const float* sq_lat = q_lat + static_cast<std::size_t>(sp.off) * nh * dc;
    const float* sq_pe = q_pe + static_cast<std::size_t>(sp.off) * nh * dr;
    float* so_lat = o_lat + static_cast<std::size_t>(sp.off) * nh * dc;
    if (sp.n == 1) {
      kernels::MlaDecodeArgs a;
      a.n_heads = nh;
      a.q_lat = sq_lat;
      a.q_pe = sq_pe;
      a.scale = scale;
      a.cache = sp.view;
      a.n_ctx = sp.p0 + 1;
      a.out = so_lat;
      a.threads = wm_.threads();
      a.scratch = attn_scratch_.data();
      attn_->decode(a);
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
      attn_->prefill(a);
    }
    refuse_non_finite_rows(so_lat, sp.n, static_cast<std::size_t>(nh) * dc, layer, sp.p0, "attention output");
  }
  // o_h = W_UV_h o_lat_h
  wm_.linear_heads(L.wuv, nh, o_lat, dc, static_cast<std::size_t>(nh) * dc, n, o, dv,
                   static_cast<std::size_t>(nh) * dv);
}

}  // namespace latte
