// Shapes and constants of one MLA attention layer (mla-spec.md sections 1, 3).
#pragma once

#include <cstdint>

#include "runtime/mla/rope.h"

namespace latte {

struct MlaConfig {
  int d_model = 0;       // d
  int n_heads = 0;       // n_h
  int q_lora_rank = 0;   // d_c' (0: no query compression, q = W_Q x)
  int kv_lora_rank = 0;  // d_c, the cached latent
  int d_nope = 0;        // per-head content dim (q_nope, k_nope)
  int d_rope = 0;        // d_R, the decoupled RoPE dim (one shared k_pe head)
  int d_v = 0;           // per-head value dim
  double rms_eps = 1e-6;
  // RMSNorm on c_Q and c_KV, as in every real model. Off only to reproduce the
  // seeds' worked examples, which leave the norms out.
  bool latent_norm = true;
  RopeParams rope;       // rope.dim must equal d_rope
  // Softmax scale; 0 means the default: attn_factor^2 * mscale^2 / sqrt(d_nope + d_R).
  double kq_scale_override = 0.0;

  int q_head_dim() const { return d_nope + d_rope; }   // 192 for DeepSeek
  int cache_row() const { return kv_lora_rank + d_rope; }  // [c_KV ; k_pe]
  double kq_scale() const;
  // Throws latte::Error(invalid_argument) naming the first bad field.
  void validate() const;
};

}  // namespace latte
