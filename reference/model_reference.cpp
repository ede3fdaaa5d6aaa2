#include "reference/model_reference.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "quant/ggml_blocks.h"
#include "runtime/error.h"
#include "runtime/gguf/gguf_file.h"
#include "runtime/mla/latent_cache.h"

namespace latte {

namespace {

std::vector<float> dequantize(const GgufTensor& t) {
  std::vector<float> out(t.n_elements);
  const std::uint64_t rows = t.n_elements / t.ne[0];
  for (std::uint64_t r = 0; r < rows; ++r)
    dequantize_row_ref(t.type, t.data + r * t.row_bytes, out.data() + r * t.ne[0], t.ne[0]);
  return out;
}

std::string blk(int i, const char* name) { return "blk." + std::to_string(i) + "." + name + ".weight"; }

// y (rows) = W (rows, cols) x (cols)
void matvec(const std::vector<float>& W, std::size_t rows, std::size_t cols, const double* x, double* y) {
  for (std::size_t r = 0; r < rows; ++r) {
    double acc = 0;
    for (std::size_t c = 0; c < cols; ++c) acc += W[r * cols + c] * x[c];
    y[r] = acc;
  }
}

void rms_norm(const double* x, const std::vector<float>& w, int n, double eps, double* y) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) y[i] = x[i] * inv * w[i];
}

}  // namespace

ModelReference::ModelReference(const GgufFile& f, std::int64_t n_ctx) : params_(ModelParams::from_gguf(f)) {
  const ModelParams& p = params_;
  const MlaConfig& m = p.mla;
  const std::uint64_t d = m.d_model, nh = m.n_heads, dc = m.kv_lora_rank, dr = m.d_rope;
  const std::uint64_t dn = m.d_nope, dv = m.d_v, qh = m.q_head_dim(), V = p.n_vocab;

  if (p.arch == ModelArch::minicpm3) {
    const char* name =
        p.rope_long_factors(p.resolve_n_ctx(n_ctx)) ? "rope_factors_long.weight" : "rope_factors_short.weight";
    if (f.find_tensor(name)) params_.mla.rope.freq_factors = dequantize(f.require_tensor(name, {dr / 2}));
  }

  token_embd_ = dequantize(f.require_tensor("token_embd.weight", {d, V}));
  output_norm_ = dequantize(f.require_tensor("output_norm.weight", {d}));
  if (f.find_tensor("output.weight")) output_ = dequantize(f.require_tensor("output.weight", {d, V}));
  else output_ = token_embd_;  // tied

  layers_.resize(p.n_layers);
  for (int i = 0; i < p.n_layers; ++i) {
    Layer& l = layers_[i];
    MlaLayerWeights& w = l.mla;
    l.attn_norm = dequantize(f.require_tensor(blk(i, "attn_norm"), {d}));
    l.ffn_norm = dequantize(f.require_tensor(blk(i, "ffn_norm"), {d}));
    if (f.find_tensor(blk(i, "attn_q_a"))) {
      if (m.q_lora_rank == 0) throw Error(Status::bad_file, blk(i, "attn_q_a") + " present but q_lora_rank is 0");
      const std::uint64_t ql = m.q_lora_rank;
      w.wq_a = dequantize(f.require_tensor(blk(i, "attn_q_a"), {d, ql}));
      w.q_a_norm = dequantize(f.require_tensor(blk(i, "attn_q_a_norm"), {ql}));
      w.wq_b = dequantize(f.require_tensor(blk(i, "attn_q_b"), {ql, nh * qh}));
    } else {
      params_.mla.q_lora_rank = 0;  // q_lora_rank may be stored although attn_q is used
      w.wq = dequantize(f.require_tensor(blk(i, "attn_q"), {d, nh * qh}));
    }
    w.wkv_a = dequantize(f.require_tensor(blk(i, "attn_kv_a_mqa"), {d, dc + dr}));
    w.kv_a_norm = dequantize(f.require_tensor(blk(i, "attn_kv_a_norm"), {dc}));
    w.wk_b.resize(nh * dn * dc);  // (n_h, d_nope, d_c)
    w.wv_b.resize(nh * dv * dc);  // (n_h, d_v, d_c)
    if (p.kv_layout == KvLayout::split) {
      // attn_k_b {d_nope, d_c, n_h}: per head [d_c][d_nope], the transpose of W_UK_h.
      const auto kb = dequantize(f.require_tensor(blk(i, "attn_k_b"), {dn, dc, nh}));
      for (std::uint64_t h = 0; h < nh; ++h)
        for (std::uint64_t c = 0; c < dc; ++c)
          for (std::uint64_t n = 0; n < dn; ++n) w.wk_b[(h * dn + n) * dc + c] = kb[(h * dc + c) * dn + n];
      // attn_v_b {d_c, d_v, n_h}: per head [d_v][d_c] = W_UV_h.
      w.wv_b = dequantize(f.require_tensor(blk(i, "attn_v_b"), {dc, dv, nh}));
    } else {
      // attn_kv_b {d_c, n_h*(d_nope+d_v)}: per head d_nope rows of W_UK_h, then d_v rows of W_UV_h.
      const auto kvb = dequantize(f.require_tensor(blk(i, "attn_kv_b"), {dc, nh * (dn + dv)}));
      for (std::uint64_t h = 0; h < nh; ++h) {
        const float* head = kvb.data() + h * (dn + dv) * dc;
        std::copy(head, head + dn * dc, w.wk_b.begin() + h * dn * dc);
        std::copy(head + dn * dc, head + (dn + dv) * dc, w.wv_b.begin() + h * dv * dc);
      }
    }
    w.wo = dequantize(f.require_tensor(blk(i, "attn_output"), {nh * dv, d}));

    auto load_ffn = [&](Ffn& out, const char* gate, const char* up, const char* down, std::uint64_t ff) {
      if (p.ffn_kind == FfnKind::swiglu) out.gate = dequantize(f.require_tensor(blk(i, gate), {d, ff}));
      out.up = dequantize(f.require_tensor(blk(i, up), {d, ff}));
      out.down = dequantize(f.require_tensor(blk(i, down), {ff, d}));
    };
    if (!p.is_moe_layer(i)) {
      load_ffn(l.dense, "ffn_gate", "ffn_up", "ffn_down", p.ff_dense);
    } else {
      const std::uint64_t ne = p.n_experts, ff = p.ff_expert;
      l.gate_inp = dequantize(f.require_tensor(blk(i, "ffn_gate_inp"), {d, ne}));
      const std::string bias = "blk." + std::to_string(i) + ".exp_probs_b.bias";
      if (f.find_tensor(bias)) l.exp_bias = dequantize(f.require_tensor(bias, {ne}));
      const auto g = dequantize(f.require_tensor(blk(i, "ffn_gate_exps"), {d, ff, ne}));
      const auto u = dequantize(f.require_tensor(blk(i, "ffn_up_exps"), {d, ff, ne}));
      const auto dn_ = dequantize(f.require_tensor(blk(i, "ffn_down_exps"), {ff, d, ne}));
      l.experts.resize(ne);
      for (std::uint64_t e = 0; e < ne; ++e) {
        l.experts[e].gate.assign(g.begin() + e * ff * d, g.begin() + (e + 1) * ff * d);
        l.experts[e].up.assign(u.begin() + e * ff * d, u.begin() + (e + 1) * ff * d);
        l.experts[e].down.assign(dn_.begin() + e * ff * d, dn_.begin() + (e + 1) * ff * d);
      }
      if (p.n_experts_shared > 0)
        load_ffn(l.shared, "ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp", ff * p.n_experts_shared);
    }
  }
  caches_.resize(p.n_layers);
}

void ModelReference::reset() {
  for (auto& c : caches_) c = MlaReferenceCache{};
  n_past_ = 0;
}

void ModelReference::load_cache(const LatentCache& cache) {
  const LatentCacheConfig& cc = cache.config();
  const MlaConfig& m = params_.mla;
  if (cc.n_layers != params_.n_layers || cc.d_c != m.kv_lora_rank || cc.d_R != m.d_rope)
    throw Error(Status::invalid_argument, "reference: load_cache of a cache of other shapes");
  const int row = cc.d_c + cc.d_R;
  std::int64_t n = cc.n_layers > 0 ? cache.size(0) : 0;
  for (int l = 0; l < cc.n_layers; ++l) {
    if (cache.size(l) != n) throw Error(Status::invalid_argument, "reference: load_cache of layers of unequal sizes");
    MlaReferenceCache& c = caches_[l];
    c.row = row;
    c.rows.assign(static_cast<std::size_t>(n) * row, 0.f);
    for (std::int64_t t = 0; t < n; ++t) {
      float* r = c.rows.data() + static_cast<std::size_t>(t) * row;
      cache.read_row(l, t, r, r + cc.d_c);
    }
  }
  n_past_ = n;
}

void ModelReference::ffn(const Ffn& f, const double* x, double* out) const {
  const std::size_t d = params_.mla.d_model, ff = f.up.size() / d;
  std::vector<double> a(ff), b(ff), y(d);
  matvec(f.up, ff, d, x, b.data());
  if (params_.ffn_kind == FfnKind::swiglu) {
    matvec(f.gate, ff, d, x, a.data());
    for (std::size_t i = 0; i < ff; ++i) a[i] = a[i] / (1.0 + std::exp(-a[i])) * b[i];  // silu(g) * u
  } else {
    for (std::size_t i = 0; i < ff; ++i) a[i] = b[i] > 0 ? b[i] * b[i] : 0.0;  // relu(u)^2
  }
  matvec(f.down, d, ff, a.data(), y.data());
  for (std::size_t i = 0; i < d; ++i) out[i] += y[i];
}

void ModelReference::moe(const Layer& l, const double* x, double* out) const {
  const ModelParams& p = params_;
  const int ne = p.n_experts, d = p.mla.d_model;
  std::vector<double> logits(ne), prob(ne), sel(ne);
  matvec(l.gate_inp, ne, d, x, logits.data());
  if (p.gating == GatingFunc::softmax) {
    const double mx = *std::max_element(logits.begin(), logits.end());
    double sum = 0;
    for (int e = 0; e < ne; ++e) sum += (prob[e] = std::exp(logits[e] - mx));
    for (auto& v : prob) v /= sum;
  } else {
    for (int e = 0; e < ne; ++e) prob[e] = 1.0 / (1.0 + std::exp(-logits[e]));
  }
  for (int e = 0; e < ne; ++e) sel[e] = prob[e] + (l.exp_bias.empty() ? 0.0 : l.exp_bias[e]);
  if (p.n_expert_groups > 1) {
    // Keep the groups whose top-2 selection scores sum highest.
    const int ng = p.n_expert_groups, per = ne / ng;
    std::vector<double> gscore(ng);
    for (int g = 0; g < ng; ++g) {
      std::vector<double> s(sel.begin() + g * per, sel.begin() + (g + 1) * per);
      std::sort(s.rbegin(), s.rend());
      gscore[g] = s[0] + (per > 1 ? s[1] : 0.0);
    }
    std::vector<int> order(ng);
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gscore[a] > gscore[b]; });
    for (int r = p.n_expert_groups_used; r < ng; ++r)
      for (int e = order[r] * per; e < (order[r] + 1) * per; ++e) sel[e] = -INFINITY;
  }
  std::vector<int> idx(ne);
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return sel[a] > sel[b]; });
  const int k = p.n_experts_used;
  std::vector<double> wts(k);
  double wsum = 0;
  for (int j = 0; j < k; ++j) wsum += (wts[j] = prob[idx[j]]);  // unbiased probabilities
  for (int j = 0; j < k; ++j) {
    if (p.expert_weights_norm) wts[j] /= std::max(wsum, 6.103515625e-5);
    if (p.expert_weights_scale != 0.f && p.expert_weights_scale != 1.f) wts[j] *= p.expert_weights_scale;
  }
  std::vector<double> y(d);
  for (int j = 0; j < k; ++j) {
    std::fill(y.begin(), y.end(), 0.0);
    ffn(l.experts[idx[j]], x, y.data());
    for (int i = 0; i < d; ++i) out[i] += wts[j] * y[i];
  }
  if (!l.shared.up.empty()) ffn(l.shared, x, out);
}

std::vector<float> ModelReference::forward(std::span<const std::int32_t> tokens, MlaForm form) {
  const ModelParams& p = params_;
  const int n = static_cast<int>(tokens.size()), d = p.mla.d_model, V = p.n_vocab;
  if (n == 0) throw Error(Status::invalid_argument, "forward: no tokens");
  for (auto t : tokens)
    if (t < 0 || t >= V)
      throw Error(Status::invalid_argument, "token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                                std::to_string(V) + ")");
  std::vector<double> h(static_cast<std::size_t>(n) * d);  // (n, d) residual stream
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < d; ++i)
      h[static_cast<std::size_t>(t) * d + i] = double(token_embd_[static_cast<std::size_t>(tokens[t]) * d + i]) * p.embed_scale;
  std::vector<std::int64_t> pos(n);
  for (int t = 0; t < n; ++t) pos[t] = n_past_ + t;

  std::vector<float> xf(static_cast<std::size_t>(n) * d), att(static_cast<std::size_t>(n) * d);
  std::vector<double> x(d), f(d);
  for (int il = 0; il < p.n_layers; ++il) {
    const Layer& l = layers_[il];
    for (int t = 0; t < n; ++t) {
      rms_norm(&h[static_cast<std::size_t>(t) * d], l.attn_norm, d, p.mla.rms_eps, x.data());
      for (int i = 0; i < d; ++i) xf[static_cast<std::size_t>(t) * d + i] = static_cast<float>(x[i]);
    }
    mla_reference_forward(p.mla, l.mla, form, xf.data(), n, pos.data(), caches_[il], att.data());
    for (int t = 0; t < n; ++t) {
      double* ht = &h[static_cast<std::size_t>(t) * d];
      for (int i = 0; i < d; ++i) ht[i] += double(att[static_cast<std::size_t>(t) * d + i]) * p.residual_scale;
      rms_norm(ht, l.ffn_norm, d, p.mla.rms_eps, x.data());
      std::fill(f.begin(), f.end(), 0.0);
      if (p.is_moe_layer(il)) moe(l, x.data(), f.data());
      else ffn(l.dense, x.data(), f.data());
      for (int i = 0; i < d; ++i) ht[i] += f[i] * p.residual_scale;
    }
  }
  std::vector<float> logits(static_cast<std::size_t>(n) * V);
  std::vector<double> lg(V);
  for (int t = 0; t < n; ++t) {
    rms_norm(&h[static_cast<std::size_t>(t) * d], output_norm_, d, p.mla.rms_eps, x.data());
    for (auto& v : x) v *= p.logit_scale;
    matvec(output_, V, d, x.data(), lg.data());
    for (int i = 0; i < V; ++i) logits[static_cast<std::size_t>(t) * V + i] = static_cast<float>(lg[i]);
  }
  n_past_ += n;
  return logits;
}

}  // namespace latte
