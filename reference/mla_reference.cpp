#include "reference/mla_reference.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <string>

#include "runtime/error.h"

namespace latte {

namespace {

void need_size(const std::vector<float>& v, std::size_t n, const char* name) {
  if (v.size() != n)
    throw Error(Status::invalid_argument, std::string("MLA weights: ") + name + " has " +
                                              std::to_string(v.size()) + " elements, expected " +
                                              std::to_string(n));
}

// y (rows) = W (rows, cols) x (cols), double accumulation.
void matvec(const float* W, int rows, int cols, const double* x, double* y) {
  for (int r = 0; r < rows; ++r) {
    double acc = 0;
    const float* w = W + static_cast<std::size_t>(r) * cols;
    for (int c = 0; c < cols; ++c) acc += w[c] * x[c];
    y[r] = acc;
  }
}

void rms_norm_d(double* x, const float* weight, int n, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double inv = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) x[i] = x[i] * inv * (weight ? weight[i] : 1.0);
}

void fill_uniform(std::vector<float>& v, std::size_t n, double scale, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  v.resize(n);
  for (auto& x : v) x = static_cast<float>(dist(rng) * scale);
}

void fill_norm(std::vector<float>& v, std::size_t n, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> dist(-0.1, 0.1);
  v.resize(n);
  for (auto& x : v) x = static_cast<float>(1.0 + dist(rng));
}

}  // namespace

void rms_norm_ref(const float* x, const float* weight, int n, double eps, float* y) {
  std::vector<double> t(x, x + n);
  rms_norm_d(t.data(), weight, n, eps);
  for (int i = 0; i < n; ++i) y[i] = static_cast<float>(t[i]);
}

MlaLayerWeights MlaLayerWeights::random(const MlaConfig& cfg, std::uint64_t seed) {
  cfg.validate();
  std::mt19937_64 rng(seed);
  const std::size_t d = cfg.d_model, nh = cfg.n_heads, qh = cfg.q_head_dim();
  const std::size_t dc = cfg.kv_lora_rank, dr = cfg.d_rope, ql = cfg.q_lora_rank;
  MlaLayerWeights w;
  if (ql == 0) {
    fill_uniform(w.wq, nh * qh * d, 1.0 / std::sqrt(double(d)), rng);
  } else {
    fill_uniform(w.wq_a, ql * d, 1.0 / std::sqrt(double(d)), rng);
    fill_norm(w.q_a_norm, ql, rng);
    fill_uniform(w.wq_b, nh * qh * ql, 1.0 / std::sqrt(double(ql)), rng);
  }
  fill_uniform(w.wkv_a, (dc + dr) * d, 1.0 / std::sqrt(double(d)), rng);
  fill_norm(w.kv_a_norm, dc, rng);
  fill_uniform(w.wk_b, nh * cfg.d_nope * dc, 1.0 / std::sqrt(double(dc)), rng);
  fill_uniform(w.wv_b, nh * cfg.d_v * dc, 1.0 / std::sqrt(double(dc)), rng);
  fill_uniform(w.wo, d * nh * cfg.d_v, 1.0 / std::sqrt(double(nh * cfg.d_v)), rng);
  return w;
}

void MlaLayerWeights::validate(const MlaConfig& cfg) const {
  const std::size_t d = cfg.d_model, nh = cfg.n_heads, qh = cfg.q_head_dim();
  const std::size_t dc = cfg.kv_lora_rank, dr = cfg.d_rope, ql = cfg.q_lora_rank;
  if (ql == 0) {
    need_size(wq, nh * qh * d, "wq");
  } else {
    need_size(wq_a, ql * d, "wq_a");
    if (cfg.latent_norm) need_size(q_a_norm, ql, "q_a_norm");
    need_size(wq_b, nh * qh * ql, "wq_b");
  }
  need_size(wkv_a, (dc + dr) * d, "wkv_a");
  if (cfg.latent_norm) need_size(kv_a_norm, dc, "kv_a_norm");
  need_size(wk_b, nh * cfg.d_nope * dc, "wk_b");
  need_size(wv_b, nh * cfg.d_v * dc, "wv_b");
  need_size(wo, d * nh * cfg.d_v, "wo");
}

MlaProjection mla_reference_project(const MlaConfig& cfg, const MlaLayerWeights& w, const float* x,
                                    std::int64_t position) {
  const int d = cfg.d_model, nh = cfg.n_heads, qh = cfg.q_head_dim();
  const int dn = cfg.d_nope, dc = cfg.kv_lora_rank, ql = cfg.q_lora_rank;
  const int row = cfg.cache_row();
  std::vector<double> xt(x, x + d);
  MlaProjection p;
  p.q.resize(static_cast<std::size_t>(nh) * qh);
  if (ql == 0) {
    matvec(w.wq.data(), nh * qh, d, xt.data(), p.q.data());
  } else {
    p.c_q_raw.resize(ql);
    matvec(w.wq_a.data(), ql, d, xt.data(), p.c_q_raw.data());
    std::vector<double> cq = p.c_q_raw;  // (q_lora)
    if (cfg.latent_norm) rms_norm_d(cq.data(), w.q_a_norm.data(), ql, cfg.rms_eps);
    matvec(w.wq_b.data(), nh * qh, ql, cq.data(), p.q.data());
  }
  p.kv_raw.resize(row);
  matvec(w.wkv_a.data(), row, d, xt.data(), p.kv_raw.data());
  p.kv = p.kv_raw;
  if (cfg.latent_norm) rms_norm_d(p.kv.data(), w.kv_a_norm.data(), dc, cfg.rms_eps);  // latent only

  // RoPE on q_pe of every head and on the shared k_pe.
  const double pos = static_cast<double>(position);
  for (int h = 0; h < nh; ++h) rope_apply_ref(cfg.rope, pos, p.q.data() + static_cast<std::size_t>(h) * qh + dn);
  rope_apply_ref(cfg.rope, pos, p.kv.data() + dc);
  return p;
}

void mla_reference_decompress(const MlaConfig& cfg, const MlaLayerWeights& w, const double* c_kv,
                              double* k_nope, double* v) {
  const int nh = cfg.n_heads, dn = cfg.d_nope, dv = cfg.d_v, dc = cfg.kv_lora_rank;
  for (int h = 0; h < nh; ++h) {
    matvec(w.wk_b.data() + static_cast<std::size_t>(h) * dn * dc, dn, dc, c_kv,
           k_nope + static_cast<std::size_t>(h) * dn);
    matvec(w.wv_b.data() + static_cast<std::size_t>(h) * dv * dc, dv, dc, c_kv,
           v + static_cast<std::size_t>(h) * dv);
  }
}

void mla_reference_forward(const MlaConfig& cfg, const MlaLayerWeights& w, MlaForm form,
                           const float* x, int n_tokens, const std::int64_t* positions,
                           MlaReferenceCache& cache, float* out) {
  cfg.validate();
  w.validate(cfg);
  if (n_tokens <= 0) throw Error(Status::invalid_argument, "MLA forward: n_tokens must be > 0");
  if (cache.row == 0) cache.row = cfg.cache_row();
  if (cache.row != cfg.cache_row())
    throw Error(Status::invalid_argument, "MLA forward: cache row width does not match the config");

  const int d = cfg.d_model, nh = cfg.n_heads, qh = cfg.q_head_dim();
  const int dn = cfg.d_nope, dr = cfg.d_rope, dv = cfg.d_v, dc = cfg.kv_lora_rank;
  const int row = cfg.cache_row();
  const double scale = cfg.kq_scale();
  const std::int64_t base = cache.n_tokens();

  // 1. Queries and the new cache rows.
  std::vector<double> q(static_cast<std::size_t>(n_tokens) * nh * qh);  // (n_tokens, n_h, d_nope+d_R)
  for (int t = 0; t < n_tokens; ++t) {
    MlaProjection p = mla_reference_project(cfg, w, x + static_cast<std::size_t>(t) * d, positions[t]);
    std::copy(p.q.begin(), p.q.end(), q.begin() + static_cast<std::ptrdiff_t>(t) * nh * qh);
    for (int i = 0; i < row; ++i) cache.rows.push_back(static_cast<float>(p.kv[i]));
  }

  // 2. Attention. Token t sees cache rows [0, base + t].
  const std::int64_t n_rows = cache.n_tokens();
  const float* C = cache.rows.data();  // (n_rows, d_c + d_R)
  std::vector<double> heads(static_cast<std::size_t>(nh) * dv);  // (n_h, d_v) per token

  // Naive form: decompress every row once for the whole chunk.
  std::vector<double> k_nope, vals;  // (n_rows, n_h, d_nope), (n_rows, n_h, d_v)
  if (form == MlaForm::naive) {
    k_nope.resize(static_cast<std::size_t>(n_rows) * nh * dn);
    vals.resize(static_cast<std::size_t>(n_rows) * nh * dv);
    std::vector<double> c(dc);
    for (std::int64_t j = 0; j < n_rows; ++j) {
      for (int i = 0; i < dc; ++i) c[i] = C[j * row + i];
      mla_reference_decompress(cfg, w, c.data(), k_nope.data() + static_cast<std::size_t>(j) * nh * dn,
                               vals.data() + static_cast<std::size_t>(j) * nh * dv);
    }
  }

  std::vector<double> scores(n_rows), q_lat(dc), o_lat(dc);
  for (int t = 0; t < n_tokens; ++t) {
    const std::int64_t n_seen = base + t + 1;
    for (int h = 0; h < nh; ++h) {
      const double* qn = q.data() + (static_cast<std::size_t>(t) * nh + h) * qh;  // (d_nope)
      const double* qp = qn + dn;                                                  // (d_R)
      const float* wk = w.wk_b.data() + static_cast<std::size_t>(h) * dn * dc;      // (d_nope, d_c)
      if (form == MlaForm::absorbed) {
        // q_lat = W_UK_h^T q_nope  (d_c)
        std::fill(q_lat.begin(), q_lat.end(), 0.0);
        for (int n = 0; n < dn; ++n)
          for (int i = 0; i < dc; ++i) q_lat[i] += wk[static_cast<std::size_t>(n) * dc + i] * qn[n];
      }
      double mx = -INFINITY;
      for (std::int64_t j = 0; j < n_seen; ++j) {
        const float* cj = C + j * row;
        double s = 0;
        if (form == MlaForm::absorbed) {
          for (int i = 0; i < dc; ++i) s += q_lat[i] * cj[i];
        } else {
          const double* kn = k_nope.data() + (static_cast<std::size_t>(j) * nh + h) * dn;
          for (int n = 0; n < dn; ++n) s += qn[n] * kn[n];
        }
        for (int i = 0; i < dr; ++i) s += qp[i] * cj[dc + i];
        scores[j] = s * scale;
        mx = std::max(mx, scores[j]);
      }
      double sum = 0;
      for (std::int64_t j = 0; j < n_seen; ++j) sum += (scores[j] = std::exp(scores[j] - mx));
      double* oh = heads.data() + static_cast<std::size_t>(h) * dv;  // (d_v)
      if (form == MlaForm::absorbed) {
        // o_lat = sum_j p_j c_j, then o_h = W_UV_h o_lat
        std::fill(o_lat.begin(), o_lat.end(), 0.0);
        for (std::int64_t j = 0; j < n_seen; ++j) {
          const double p = scores[j] / sum;
          for (int i = 0; i < dc; ++i) o_lat[i] += p * C[j * row + i];
        }
        matvec(w.wv_b.data() + static_cast<std::size_t>(h) * dv * dc, dv, dc, o_lat.data(), oh);
      } else {
        std::fill(oh, oh + dv, 0.0);
        for (std::int64_t j = 0; j < n_seen; ++j) {
          const double p = scores[j] / sum;
          const double* vj = vals.data() + (static_cast<std::size_t>(j) * nh + h) * dv;
          for (int i = 0; i < dv; ++i) oh[i] += p * vj[i];
        }
      }
    }
    std::vector<double> u(d);
    matvec(w.wo.data(), d, nh * dv, heads.data(), u.data());
    for (int i = 0; i < d; ++i) out[static_cast<std::size_t>(t) * d + i] = static_cast<float>(u[i]);
  }
}

}  // namespace latte
