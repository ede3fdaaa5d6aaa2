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

MlaForm mla_pick_form(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached) {
  const MlaCost c = mla_attention_cost(cfg, n_query, n_cached);
  return c.naive < c.absorbed ? MlaForm::naive : MlaForm::absorbed;
}

}  // namespace latte
