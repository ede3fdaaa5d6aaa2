// Multiply-add counts of the two MLA forms (mla-spec.md section 1, seeds
// 002/003), used to pick the form for a chunk of query tokens.
//
// Counted: the work that differs between the forms. Projections both forms
// share (W_Q / W_DQ / W_UQ, W_DKV, W_O) are left out.
//   pairs    = n_query*n_cached + n_query*(n_query+1)/2   (causal query x key pairs)
//   absorbed = n_query * n_h*(d_nope + d_v)*d_c             (W_UK^T q, W_UV o_lat)
//            + pairs   * n_h*(2*d_c + d_R)                  (scores + latent values)
//   naive    = (n_cached + n_query) * n_h*(d_nope + d_v)*d_c (decompress K, V once per chunk)
//            + pairs   * n_h*(d_nope + d_R + d_v)
#pragma once

#include <cstdint>

#include "runtime/mla/mla_config.h"
#include "runtime/mla/mla_form.h"

namespace latte {

struct MlaCost {
  std::int64_t naive = 0;     // multiply-adds
  std::int64_t absorbed = 0;  // multiply-adds
};

MlaCost mla_attention_cost(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached);

// The cheaper form for a chunk (absorbed on ties: it reads less memory).
// `absorbed_pair_cost` is the time of one multiply-add of the absorbed form's
// per-pair work relative to one of the naive form's f32 GEMMs: 1 when both run
// on f32 FMAs, less when the absorbed kernel uses integer dot products over an
// int8 cache (see mla_absorbed_pair_cost). `naive_gemm_cost` is the time of
// the naive form's f32 GEMM multiply-adds relative to oneDNN's: 1 with
// oneDNN, kOwnGemmCost on Latte's own GEMM (a build without oneDNN).
MlaForm mla_pick_form(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached,
                      double absorbed_pair_cost = 1.0, double naive_gemm_cost = 1.0);

// Latte's own f32 GEMM (runtime/session/gemm_f32) against oneDNN's sgemm on
// the naive form's shapes, in time per multiply-add (docs/performance.md,
// "Without oneDNN").
inline constexpr double kOwnGemmCost = 5.0;

// Measured relative cost for a cache storage type on an ISA: 0.3 for the
// int8 kernel on AVX-512 VNNI (several times oneDNN's f32 GEMM rate behind a
// long context, less over short ones), 0.6 for AVX2's and NEON's int8 (about
// half that gain), 1 for f16 and f32 caches, which run on FMAs like the GEMMs
// (docs/performance-log.md, "Figures moved out of runtime comments").
double mla_absorbed_pair_cost(bool int8_cache, bool has_vnni512);

}  // namespace latte
