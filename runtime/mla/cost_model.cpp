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
  const MlaCost c = mla_attention_cost(cfg, n_query, n_cached);
  // Split the absorbed count into its per-query projections (f32) and its
  // per-pair work (the attention kernel), and weight the latter.
  const std::int64_t nh = cfg.n_heads, dc = cfg.kv_lora_rank;
  const double projections = static_cast<double>(n_query) * nh * (cfg.d_nope + cfg.d_v) * dc;
  const double absorbed = projections + (static_cast<double>(c.absorbed) - projections) * absorbed_pair_cost;
  return static_cast<double>(c.naive) < absorbed ? MlaForm::naive : MlaForm::absorbed;
}

double mla_absorbed_pair_cost(bool int8_cache, bool has_vnni512) {
  if (!int8_cache) return 1.0;
  return has_vnni512 ? 0.3 : 0.6;
}

}  // namespace latte
