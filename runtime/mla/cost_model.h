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
#include "runtime/mla/mla_reference.h"

namespace latte {

struct MlaCost {
  std::int64_t naive = 0;     // multiply-adds
  std::int64_t absorbed = 0;  // multiply-adds
};

MlaCost mla_attention_cost(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached);

// The cheaper form for a chunk (absorbed on ties: it reads less memory).
MlaForm mla_pick_form(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached);

}  // namespace latte
