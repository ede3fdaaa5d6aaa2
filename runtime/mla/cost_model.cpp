#include "runtime/mla/cost_model.h"

#include "runtime/error.h"

namespace latte {

MlaCost mla_attention_cost(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached) {
  if (n_query < 0 || n_cached < 0)
    throw Error(Status::invalid_argument, "MLA cost: token counts must be >= 0");
  const std::int64_t nh = cfg.n_heads, dc = cfg.kv_lora_rank;
  const std::int64_t dn = cfg.d_nope, dr = cfg.d_rope, dv = cfg.d_v;
  const std::int64_t pairs = n_query * n_cached + n_query * (n_query + 1) / 2;
  MlaCost c;
  c.absorbed = n_query * nh * (dn + dv) * dc + pairs * nh * (2 * dc + dr);
  c.naive = (n_cached + n_query) * nh * (dn + dv) * dc + pairs * nh * (dn + dr + dv);
  return c;
}

MlaForm mla_pick_form(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached,
                      double absorbed_pair_cost) {
  if (n_query < 0 || n_cached < 0)
    throw Error(Status::invalid_argument, "MLA cost: token counts must be >= 0");
  // mla_attention_cost's counts in double: in int64 they wrap for DeepSeek
  // shapes from ~6.6e13 query-key pairs (65,536 queries behind 2^31 cached
  // tokens), and the wrapped counts picked the form backwards. Integers
  // below 2^53 stay exact, so shorter chunks pick as before.
  const double nq = static_cast<double>(n_query), nc = static_cast<double>(n_cached);
  const double nh = cfg.n_heads, dc = cfg.kv_lora_rank, dn = cfg.d_nope, dr = cfg.d_rope, dv = cfg.d_v;
  const double pairs = nq * nc + nq * (nq + 1) / 2;
  // The absorbed count split into its per-query projections (f32) and its
  // per-pair work (the attention kernel), the latter weighted.
  const double projections = nq * nh * (dn + dv) * dc;
  const double absorbed = projections + pairs * nh * (2 * dc + dr) * absorbed_pair_cost;
  const double naive = (nc + nq) * nh * (dn + dv) * dc + pairs * nh * (dn + dr + dv);
  return naive < absorbed ? MlaForm::naive : MlaForm::absorbed;
}

double mla_absorbed_pair_cost(bool int8_cache, bool has_vnni512) {
  if (!int8_cache) return 1.0;
  return has_vnni512 ? 0.3 : 0.6;
}

}  // namespace latte
