#include "runtime/mla/cost_model.h"

#include <algorithm>
#include <string>

#include "runtime/error.h"

namespace latte {

namespace {

// The header's counts in T, the absorbed form's split into its per-query
// projections and its per-pair work.
template <class T>
struct Counts {
  T naive, projections, absorbed_pairs;
};

template <class T>
Counts<T> counts(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached) {
  if (n_query < 0 || n_cached < 0)
    throw Error(Status::invalid_argument, "MLA cost: token counts must be >= 0");
  const T nq = static_cast<T>(n_query), nc = static_cast<T>(n_cached);
  const T nh = cfg.n_heads, dc = cfg.kv_lora_rank, dn = cfg.d_nope, dr = cfg.d_rope, dv = cfg.d_v;
  const T pairs = nq * nc + nq * (nq + 1) / 2;
  Counts<T> c;
  c.projections = nq * nh * (dn + dv) * dc;
  c.absorbed_pairs = pairs * nh * (2 * dc + dr);
  c.naive = (nc + nq) * nh * (dn + dv) * dc + pairs * nh * (dn + dr + dv);
  return c;
}

}  // namespace

MlaCost mla_attention_cost(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached) {
  // Checked in double first: past int64 the counts would wrap (V3 shapes
  // from ~6.6e13 query-key pairs) and be reported as garbage.
  const Counts<double> d = counts<double>(cfg, n_query, n_cached);
  if (std::max(d.naive, d.projections + d.absorbed_pairs) >= 9.2e18)
    throw Error(Status::invalid_argument, "MLA cost: " + std::to_string(n_query) + " query tokens over " +
                                              std::to_string(n_cached) +
                                              " cached count more multiply-adds than int64 holds");
  const Counts<std::int64_t> c = counts<std::int64_t>(cfg, n_query, n_cached);
  MlaCost m;
  m.absorbed = c.projections + c.absorbed_pairs;
  m.naive = c.naive;
  return m;
}

MlaForm mla_pick_form(const MlaConfig& cfg, std::int64_t n_query, std::int64_t n_cached,
                      double absorbed_pair_cost, double naive_gemm_cost) {
  // The counts in double: in int64 they wrap for DeepSeek shapes from ~6.6e13
  // query-key pairs (65,536 queries behind 2^31 cached tokens), and the
  // wrapped counts picked the form backwards. Integers below 2^53 stay
  // exact, so shorter chunks pick as before. The per-pair work (the
  // attention kernel) is weighted, the f32 projections are not.
  const Counts<double> c = counts<double>(cfg, n_query, n_cached);
  return c.naive * naive_gemm_cost < c.projections + c.absorbed_pairs * absorbed_pair_cost ? MlaForm::naive
                                                                                           : MlaForm::absorbed;
}

double mla_absorbed_pair_cost(bool int8_cache, bool has_vnni512) {
  if (!int8_cache) return 1.0;
  return has_vnni512 ? 0.3 : 0.6;
}

}  // namespace latte
