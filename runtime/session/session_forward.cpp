// The layer loop (Session::forward_step): one step of tokens through the
// model, top to bottom, for one session's chunk or several sessions' at
// once (their rows side by side: every weight read once, each attending
// over its own cache): the form of each one's attention, the RoPE rotations
// of its positions, the embedding, then per layer the attention block (norm, q and
// kv_a, RoPE, the cache write, attention.h, W_O, residual) and the FFN
// block (norm, ffn.h or moe.h, residual), then the output head.
// Rules: graph_rules.h; the cache rows a step writes are the only session
// state it changes besides n_past_, the last form and the logits, and
// Session::prefill and Session::step take them back on an error.
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/isa.h"
#include "quant/ggml_blocks.h"
#include "quant/x16_layout.h"
#include "runtime/mla/cost_model.h"
#include "runtime/mla/rope.h"
#include "runtime/session/gemm_f32.h"
#include "runtime/session/aligned_buffer.h"
#include "runtime/session/finite_checks.h"
#include "runtime/session/parallel_rows.h"
#include "runtime/session/row_ops.h"
#include "runtime/session/session.h"
#include "runtime/session/session_graph.h"

namespace latte {

void Session::forward_chunk(std::span<const std::int32_t> tokens, float* logits_out, bool all_logits) {
  StepPart part;
  part.s = this;
  part.tokens = tokens;
  part.logits_out = all_logits ? logits_out : nullptr;
  forward_step(std::span<StepPart>(&part, 1));
}

void Session::forward_step(std::span<StepPart> parts) {
  Session& lead = *parts[0].s;  // whose graph, threads and weights the step runs on
  const Model& model = *lead.model_;
  const ModelParams& p = model.params();
  const MlaConfig& m = p.mla;
  Graph& g = *lead.graph_;
  const int threads = g.threads();
  const int d = m.d_model, nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope;
  const int dc = m.kv_lora_rank, dv = m.d_v, ql = m.q_lora_rank, V = p.n_vocab;

  // Each part's form: decode is always absorbed (the kernel's job). Rows are
  // laid out absorbed parts first, so one W_UK/W_UV product covers them all.
  for (StepPart& pt : parts) {
    Session& s = *pt.s;
    const int ni = static_cast<int>(pt.tokens.size());
    pt.p0 = s.n_past_;
    pt.form = MlaForm::absorbed;
    if (ni > 1) {
      if (s.opts_.prefill_form) pt.form = *s.opts_.prefill_form;
      else
        pt.form = mla_pick_form(m, ni, pt.p0,
                                mla_absorbed_pair_cost(latent_storage_quantized(s.opts_.cache), active_isa() == Isa::avx512),
                                gemm_f32_is_onednn() ? 1.0 : kOwnGemmCost);
    }
    s.last_form_ = pt.form;
  }
  int n = 0, n_abs = 0;  // rows in all, rows of absorbed parts
  for (int pass = 0; pass < 2; ++pass)
    for (StepPart& pt : parts)
      if ((pt.form == MlaForm::absorbed) == (pass == 0)) {
        pt.off = n;
        n += static_cast<int>(pt.tokens.size());
        if (pass == 0) n_abs = n;
      }

  // RoPE rotations of each part's positions (its context's rope factors),
  // attn_factor included.
  float* rope_cs = g.rope_cs.get(static_cast<std::size_t>(n) * dr);  // (n, cos | sin)
  for (const StepPart& pt : parts) {
    const RopeParams& rp = pt.s->graph_->rope;
    rope_table(rp, static_cast<double>(pt.p0), static_cast<int>(pt.tokens.size()), rp.attn_factor,
               rope_cs + static_cast<std::size_t>(pt.off) * dr);
  }
  auto rope = [&](float* v, int t) {  // v (d_R) of row t
    const float* c = rope_cs + static_cast<std::size_t>(t) * dr;
    rope_rotate(g.rope.style, dr, c, c + dr / 2, v);
  };

  // Embedding.
  float* h = g.h.get(static_cast<std::size_t>(n) * d);  // (n, d) residual stream
  auto add_residual = [&](const float* y) {  // h += y * residual_scale, y (n, d)
    for_row_elements(n, d, threads, [&](std::size_t i) { h[i] += y[i] * p.residual_scale; });
  };
  const WeightRef& emb = model.token_embd();
  // An x16 table (tied to the output head): a row's bytes lie across its
  // tile, which goes back to the file's layout first (rows past the last
  // whole tile lie as the file holds them).
  std::uint8_t* tile =  // (16, row_bytes)
      emb.x16 ? reinterpret_cast<std::uint8_t*>(g.embd_tile.get((16 * emb.row_bytes + 3) / 4)) : nullptr;
  for (const StepPart& pt : parts)
    for (std::size_t i = 0; i < pt.tokens.size(); ++i) {  // serial: dequantize_row_ref may throw (not here: the type was checked at load)
      float* row = h + (static_cast<std::size_t>(pt.off) + i) * d;
      const auto id = static_cast<std::size_t>(pt.tokens[i]);
      const std::uint8_t* src = emb.data + id * emb.row_bytes;
      if (tile && id < static_cast<std::size_t>(emb.rows) / 16 * 16) {
        x16_deinterleave(emb.type, emb.data + id / 16 * 16 * emb.row_bytes, 0,
                         static_cast<std::size_t>(d) / ggml_block_elems(emb.type), tile, emb.row_bytes);
        src = tile + id % 16 * emb.row_bytes;
      }
      dequantize_row_ref(emb.type, src, row, d);
      if (p.embed_scale != 1.f)
        for (int k = 0; k < d; ++k) row[k] *= p.embed_scale;
    }

  float* x = g.x.get(static_cast<std::size_t>(n) * d);             // (n, d)
  float* q = g.q.get(static_cast<std::size_t>(n) * nh * qh);       // (n, n_h, d_nope + d_R)
  float* kv = g.kv.get(static_cast<std::size_t>(n) * (dc + dr));   // (n, d_c + d_R)
  float* c_kv = g.c_kv.get(static_cast<std::size_t>(n) * dc);      // (n, d_c)
  float* k_pe = g.k_pe.get(static_cast<std::size_t>(n) * dr);      // (n, d_R)
  float* o = g.o.get(static_cast<std::size_t>(n) * nh * dv);       // (n, n_h * d_v)
  float* y = g.y.get(static_cast<std::size_t>(n) * d);             // (n, d)
  g.moe.reset_experts_read();
  std::vector<AttnSpan>& spans = g.spans;  // the absorbed parts', per layer
  spans.reserve(parts.size());

  for (int il = 0; il < p.n_layers; ++il) {
    for (const StepPart& pt : parts) pt.s->check_abort();  // any session's callback stops the step
    const LayerWeights& L = model.layer(il);
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
    // Likewise the queries and (in attention) its output: the int8 kernels
    // quantize queries and clamp exponentials, so a NaN, inf or overflowing
    // score there could come out finite but wrong.
    spans.clear();
    for (const StepPart& pt : parts) {
      const int ni = static_cast<int>(pt.tokens.size());
      const std::size_t r = static_cast<std::size_t>(pt.off);
      refuse_non_finite_rows(c_kv + r * dc, ni, dc, il, pt.p0);
      refuse_non_finite_rows(k_pe + r * dr, ni, dr, il, pt.p0);
      refuse_non_finite_rows(q + r * nh * qh, ni, static_cast<std::size_t>(nh) * qh, il, pt.p0, "query");
      pt.s->cache_.write(il, pt.p0, ni, c_kv + r * dc, k_pe + r * dr);
      if (pt.form == MlaForm::absorbed) spans.push_back({pt.off, ni, pt.p0, pt.s->cache_.view(il)});
    }

    // --- attention over each part's cache, W_O, residual
    if (n_abs > 0) g.absorbed.run(m, L, il, q, n_abs, spans, o);
    for (const StepPart& pt : parts)
      if (pt.form != MlaForm::absorbed) {
        const std::size_t r = static_cast<std::size_t>(pt.off);
        g.naive.run(m, L, il, q + r * nh * qh, static_cast<int>(pt.tokens.size()), pt.p0, pt.s->cache_,
                    o + r * nh * dv);
      }
    g.wm.linear(L.wo, o, static_cast<std::size_t>(nh) * dv, n, y, d);
    add_residual(y);

    // --- feed-forward, residual
    rms_norm_rows(h, L.ffn_norm, n, d, m.rms_eps, x, d, d, threads);
    if (!p.is_moe_layer(il)) g.ffn.dense(L.dense, x, n, d, y);
    else g.moe.forward(p, L, x, n, d, y);
    add_residual(y);
  }

  // --- output: each part's logits of every token, or of its last only,
  // normed into consecutive rows of x.
  int nl = 0;
  for (const StepPart& pt : parts) {
    const int ni = static_cast<int>(pt.tokens.size());
    const int first = pt.logits_out ? 0 : ni - 1;
    rms_norm_rows(h + (static_cast<std::size_t>(pt.off) + first) * d, model.output_norm(), ni - first, d, m.rms_eps,
                  x + static_cast<std::size_t>(nl) * d, d, d, threads);
    nl += ni - first;
  }
  if (p.logit_scale != 1.f)
    for (std::size_t i = 0; i < static_cast<std::size_t>(nl) * d; ++i) x[i] *= p.logit_scale;
  // lg (nl, n_vocab): the output head's whole tiles, and its last rows where
  // those lie apart (Model::output_tail), in one region.
  auto output_head = [&](float* lg) {
    const WeightRef &head = model.output(), &tail = model.output_tail();
    if (tail.empty()) return g.wm.linear(head, x, d, nl, lg, V);
    const auto ld = static_cast<std::size_t>(V);
    g.wm.linear_shared({{&head, lg, ld}, {&tail, lg + head.rows, ld}}, x, d, nl);
  };
  if (parts.size() == 1) {  // straight to the session's buffer
    StepPart& pt = parts[0];
    float* lg = pt.logits_out ? pt.logits_out : pt.s->last_logits_.data();  // (nl, n_vocab)
    output_head(lg);
    if (pt.logits_out)
      std::memcpy(pt.s->last_logits_.data(), lg + static_cast<std::size_t>(nl - 1) * V, sizeof(float) * V);
  } else {
    float* lg = g.logits.get(static_cast<std::size_t>(nl) * V);  // (nl, n_vocab)
    output_head(lg);
    std::size_t r = 0;
    for (StepPart& pt : parts) {
      const std::size_t rows = pt.logits_out ? pt.tokens.size() : 1;
      if (pt.logits_out) std::memcpy(pt.logits_out, lg + r * V, sizeof(float) * rows * V);
      std::memcpy(pt.s->last_logits_.data(), lg + (r + rows - 1) * V, sizeof(float) * V);
      r += rows;
    }
  }
  for (StepPart& pt : parts) pt.s->n_past_ += static_cast<std::int64_t>(pt.tokens.size());
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
