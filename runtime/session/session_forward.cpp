// The layer loop (Session::forward_chunk): one chunk of tokens through the
// model, top to bottom: the form of its attention, the RoPE rotations of its
// positions, the embedding, then per layer the attention block (norm, q and
// kv_a, RoPE, the cache write, attention.h, W_O, residual) and the FFN
// block (norm, ffn.h or moe.h, residual), then the output head.
// Rules: graph_common.h; the cache rows this chunk writes are the only
// session state it changes besides n_past_ and the logits, and
// Session::prefill takes them back on an error.
#include <cstdint>
#include <cstring>

#include "kernels/isa.h"
#include "quant/ggml_blocks.h"
#include "runtime/mla/cost_model.h"
#include "runtime/mla/rope.h"
#include "runtime/session/gemm_f32.h"
#include "runtime/session/graph_common.h"
#include "runtime/session/session.h"
#include "runtime/session/session_graph.h"

namespace latte {

void Session::forward_chunk(std::span<const std::int32_t> tokens, float* logits_out, bool all_logits) {
  const ModelParams& p = model_->params();
  const MlaConfig& m = p.mla;
  Graph& g = *graph_;
  const int threads = g.threads();
  const int n = static_cast<int>(tokens.size());
  const int d = m.d_model, nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope;
  const int dc = m.kv_lora_rank, dv = m.d_v, ql = m.q_lora_rank, V = p.n_vocab;
  const std::int64_t p0 = n_past_;

  // Form for this chunk: decode is always absorbed (the kernel's job).
  MlaForm form = MlaForm::absorbed;
  if (n > 1) {
    if (opts_.prefill_form) form = *opts_.prefill_form;
    else
      form = mla_pick_form(m, n, p0,
                           mla_absorbed_pair_cost(opts_.cache == LatentStorage::int8, active_isa() == Isa::avx512),
                           gemm_f32_is_onednn() ? 1.0 : kOwnGemmCost);
  }
  last_form_ = form;

  // RoPE rotations of this chunk's positions, attn_factor included.
  float* rope_cs = g.rope_cs.get(static_cast<std::size_t>(n) * dr);  // (n, cos | sin)
  rope_table(g.rope, static_cast<double>(p0), n, g.rope.attn_factor, rope_cs);
  auto rope = [&](float* v, int t) {  // v (d_R) of token t
    const float* c = rope_cs + t * dr;
    rope_rotate(g.rope.style, dr, c, c + dr / 2, v);
  };

  // Embedding.
  float* h = g.h.get(static_cast<std::size_t>(n) * d);  // (n, d) residual stream
  auto add_residual = [&](const float* y) {  // h += y * residual_scale, y (n, d)
    for_row_elements(n, d, threads, [&](std::size_t i) { h[i] += y[i] * p.residual_scale; });
  };
  const WeightRef& emb = model_->token_embd();
  for (int t = 0; t < n; ++t) {  // serial: dequantize_row_ref may throw (not here: the type was checked at load)
    dequantize_row_ref(emb.type, emb.data + static_cast<std::size_t>(tokens[t]) * emb.row_bytes,
                       h + static_cast<std::size_t>(t) * d, d);
    if (p.embed_scale != 1.f)
      for (int i = 0; i < d; ++i) h[static_cast<std::size_t>(t) * d + i] *= p.embed_scale;
  }

  float* x = g.x.get(static_cast<std::size_t>(n) * d);             // (n, d)
  float* q = g.q.get(static_cast<std::size_t>(n) * nh * qh);       // (n, n_h, d_nope + d_R)
  float* kv = g.kv.get(static_cast<std::size_t>(n) * (dc + dr));   // (n, d_c + d_R)
  float* c_kv = g.c_kv.get(static_cast<std::size_t>(n) * dc);      // (n, d_c)
  float* k_pe = g.k_pe.get(static_cast<std::size_t>(n) * dr);      // (n, d_R)
  float* o = g.o.get(static_cast<std::size_t>(n) * nh * dv);       // (n, n_h * d_v)
  float* y = g.y.get(static_cast<std::size_t>(n) * d);             // (n, d)

  for (int il = 0; il < p.n_layers; ++il) {
    check_abort();
    const LayerWeights& L = model_->layer(il);
    // --- attention: q and kv_a from the normed stream
    rms_norm_rows(h, L.attn_norm, n, d, m.rms_eps, x, d, d, threads);
    if (!L.wq_a.empty()) {
      float* cq = g.cq.get(static_cast<std::size_t>(n) * ql);  // (n, q_lora)
      g.wm.linear_shared({{&L.wq_a, cq, static_cast<std::size_t>(ql)}, {&L.wkv_a, kv, static_cast<std::size_t>(dc + dr)}},
                         x, d, n);
      rms_norm_rows(cq, L.q_a_norm, n, ql, m.rms_eps, cq, ql, ql, threads);
      g.wm.linear(L.wq_b, cq, ql, n, q, static_cast<std::size_t>(nh) * qh);
    } else {
      g.wm.linear_shared({{&L.wq, q, static_cast<std::size_t>(nh) * qh}, {&L.wkv_a, kv, static_cast<std::size_t>(dc + dr)}},
                         x, d, n);
    }
    // kv_a split: the normed latent c_KV and the rotated k_pe; q_pe rotated.
    for_rows(n, threads, [&](int t) {
      float* kvt = kv + static_cast<std::size_t>(t) * (dc + dr);
      rms_norm_rows(kvt, L.kv_a_norm, 1, dc, m.rms_eps, c_kv + static_cast<std::size_t>(t) * dc, dc, dc, 1);
      rope(kvt + dc, t);
      std::memcpy(k_pe + static_cast<std::size_t>(t) * dr, kvt + dc, sizeof(float) * dr);
      for (int hd = 0; hd < nh; ++hd) rope(q + (static_cast<std::size_t>(t) * nh + hd) * qh + dn, t);
    });
    // A NaN or inf row must not enter the cache: later positions would read
    // it (the int8 kernel's clamped exponentials could even hide it from
    // the logits), and a saved session holding it is refused at load.
    refuse_non_finite_rows(c_kv, n, dc, il, p0);
    refuse_non_finite_rows(k_pe, n, dr, il, p0);
    // Likewise the queries and (in attention) its output: the int8 kernels
    // quantize queries and clamp exponentials, so a NaN, inf or overflowing
    // score there could come out finite but wrong.
    refuse_non_finite_rows(q, n, static_cast<std::size_t>(nh) * qh, il, p0, "query");
    cache_.write(il, p0, n, c_kv, k_pe);

    // --- attention over the cache, W_O, residual
    if (form == MlaForm::absorbed) g.absorbed.run(m, L, il, q, n, p0, cache_.view(il), o);
    else g.naive.run(m, L, il, q, n, p0, cache_, o);
    g.wm.linear(L.wo, o, static_cast<std::size_t>(nh) * dv, n, y, d);
    add_residual(y);

    // --- feed-forward, residual
    rms_norm_rows(h, L.ffn_norm, n, d, m.rms_eps, x, d, d, threads);
    if (!p.is_moe_layer(il)) g.ffn.dense(L.dense, x, n, d, y);
    else g.moe.forward(p, L, x, n, d, y);
    add_residual(y);
  }

  // --- output: logits of every token, or of the last only.
  const int first = all_logits ? 0 : n - 1;
  const int nl = n - first;
  rms_norm_rows(h + static_cast<std::size_t>(first) * d, model_->output_norm(), nl, d, m.rms_eps, x, d, d, threads);
  if (p.logit_scale != 1.f)
    for (std::size_t i = 0; i < static_cast<std::size_t>(nl) * d; ++i) x[i] *= p.logit_scale;
  float* lg = all_logits ? logits_out : last_logits_.data();  // (nl, n_vocab)
  g.wm.linear(model_->output(), x, d, nl, lg, V);
  if (all_logits) std::memcpy(last_logits_.data(), lg + static_cast<std::size_t>(nl - 1) * V, sizeof(float) * V);
  n_past_ += n;
}

void Session::Graph::reserve_chunk(const ModelParams& p, int n) {
  const MlaConfig& m = p.mla;
  const std::size_t t = static_cast<std::size_t>(n), d = m.d_model, nh = m.n_heads;
  auto touch = [](AlignedBuffer& b, std::size_t floats) { std::memset(b.get(floats), 0, floats * sizeof(float)); };
  // The sizes forward_chunk asks for.
  touch(rope_cs, t * m.d_rope);
  touch(h, t * d);
  touch(x, t * d);
  touch(q, t * nh * m.q_head_dim());
  touch(kv, t * (m.kv_lora_rank + m.d_rope));
  touch(c_kv, t * m.kv_lora_rank);
  touch(k_pe, t * m.d_rope);
  touch(o, t * nh * m.d_v);
  touch(y, t * d);
  if (m.q_lora_rank > 0) touch(cq, t * m.q_lora_rank);
}

}  // namespace latte
