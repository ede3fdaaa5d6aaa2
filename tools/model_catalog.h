// The public MLA models of mla-spec.md section 2 (Hugging Face configs), for
// cache accounting: latent versus the per-head K/V an MHA runtime would keep.
#pragma once

#include <cstdint>
#include <span>

namespace latte {

struct KnownMlaModel {
  const char* name;
  int d_model, n_layers, n_heads;
  int q_lora_rank;   // 0: none
  int kv_lora_rank;  // d_c
  int d_nope, d_rope, d_v;
  std::int64_t max_context;  // 0 where section 2 does not state it

  // Elements cached per token per layer.
  std::int64_t latent_elems() const { return kv_lora_rank + d_rope; }            // [c_KV ; k_pe]
  std::int64_t mha_elems() const { return std::int64_t(n_heads) * (d_nope + d_rope + d_v); }  // K and V
};

std::span<const KnownMlaModel> known_mla_models();

}  // namespace latte
