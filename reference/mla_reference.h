// The MLA attention layer in plain C++: the ground truth every optimized path
// is tested against. Double accumulation, no SIMD, written for clarity.
//
// Two forms of the same function, from the same weights (mla-spec.md 1):
//   naive    - decompress k_nope_h = W_UK_h c_KV and v_h = W_UV_h c_KV for every
//              cached row, then ordinary multi-head attention (training form);
//   absorbed - fold W_UK into the query and W_UV into the output and attend
//              over the latent directly (multi-query form with head dim d_c+d_R).
// Both read and append the same cache of [c_KV ; k_pe] rows.
#pragma once

#include <cstdint>
#include <vector>

#include "runtime/mla/mla_config.h"
#include "runtime/mla/mla_form.h"

namespace latte {

// Weights in PyTorch layout: a matrix [out, in] row-major, y = W x.
struct MlaLayerWeights {
  std::vector<float> wq;         // (n_h*(d_nope+d_R), d)         when q_lora_rank == 0
  std::vector<float> wq_a;       // (q_lora, d)                    when q_lora_rank > 0
  std::vector<float> q_a_norm;   // (q_lora)
  std::vector<float> wq_b;       // (n_h*(d_nope+d_R), q_lora)
  std::vector<float> wkv_a;      // (d_c + d_R, d): latent rows, then k_pe rows
  std::vector<float> kv_a_norm;  // (d_c)
  std::vector<float> wk_b;       // (n_h, d_nope, d_c): W_UK per head
  std::vector<float> wv_b;       // (n_h, d_v, d_c):    W_UV per head
  std::vector<float> wo;         // (d, n_h*d_v)

  // Random weights of the right shapes (uniform, scaled by 1/sqrt(fan_in)),
  // norms near 1. Deterministic in `seed`.
  static MlaLayerWeights random(const MlaConfig& cfg, std::uint64_t seed);
  // Throws latte::Error naming the first tensor whose size does not fit cfg.
  void validate(const MlaConfig& cfg) const;
};

// The latent cache of the reference: one [c_KV ; k_pe] row per token.
struct MlaReferenceCache {
  int row = 0;                 // d_c + d_R
  std::vector<float> rows;     // (n_tokens, d_c + d_R)
  std::int64_t n_tokens() const { return row == 0 ? 0 : static_cast<std::int64_t>(rows.size()) / row; }
};

// The per-token projections of section 1, before attention.
struct MlaProjection {
  std::vector<double> c_q_raw;  // (q_lora) W_DQ x, before its RMSNorm (empty without q_lora)
  std::vector<double> kv_raw;   // (d_c + d_R) W_DKV x: c_raw | k_pe, before norm and RoPE
  std::vector<double> q;        // (n_h, d_nope + d_R) per head q_nope | q_pe, q_pe rotated
  std::vector<double> kv;       // (d_c + d_R) c_KV (normalized) | k_pe (rotated): the cache row
};
MlaProjection mla_reference_project(const MlaConfig& cfg, const MlaLayerWeights& w, const float* x,
                                    std::int64_t position);

// Decompression of one latent (naive form): k_nope (n_h, d_nope) = W_UK_h c,
// v (n_h, d_v) = W_UV_h c.
void mla_reference_decompress(const MlaConfig& cfg, const MlaLayerWeights& w, const double* c_kv,
                              double* k_nope, double* v);

// Runs the layer on n_tokens input rows x (n_tokens, d) at RoPE positions
// positions[0..n_tokens). Appends their cache rows, then each token attends
// causally to every earlier cached row and itself. out: (n_tokens, d).
// Prefill = several tokens at once; decode = one token per call.
void mla_reference_forward(const MlaConfig& cfg, const MlaLayerWeights& w, MlaForm form,
                           const float* x, int n_tokens, const std::int64_t* positions,
                           MlaReferenceCache& cache, float* out);

// RMSNorm in double: y = x / sqrt(mean(x^2) + eps) * weight (weight may be null).
void rms_norm_ref(const float* x, const float* weight, int n, double eps, float* y);

}  // namespace latte
