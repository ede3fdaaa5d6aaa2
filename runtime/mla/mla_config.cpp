// MlaConfig's derived constants and its validation (mla_config.h).
#include "runtime/mla/mla_config.h"

#include <cmath>
#include <string>

#include "runtime/error.h"

namespace latte {

double MlaConfig::kq_scale() const {
  if (kq_scale_override > 0) return kq_scale_override;
  const double m = yarn_mscale(rope) * rope.attn_factor;
  return m * m / std::sqrt(static_cast<double>(d_nope + d_rope));
}

void MlaConfig::validate() const {
  auto need = [](bool ok, const char* what) {
    if (!ok) throw Error(Status::invalid_argument, std::string("MLA config: ") + what);
  };
  need(d_model > 0, "d_model must be > 0");
  need(n_heads > 0, "n_heads must be > 0");
  need(q_lora_rank >= 0, "q_lora_rank must be >= 0");
  need(kv_lora_rank > 0, "kv_lora_rank (d_c) must be > 0");
  need(d_nope >= 0, "d_nope must be >= 0");
  need(d_rope > 0 && d_rope % 2 == 0, "d_rope must be even and > 0 (RoPE rotates pairs)");
  need(d_v > 0, "d_v must be > 0");
  need(rope.dim == d_rope, "rope.dim must equal d_rope");
  need(rms_eps > 0, "rms_eps must be > 0");
}

}  // namespace latte
