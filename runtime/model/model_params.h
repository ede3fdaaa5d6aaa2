// Hyperparameters of an MLA model, read from GGUF metadata (mla-spec.md
// section 3) for the architectures Latte runs: deepseek2, minicpm3, plm.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/mla/mla_config.h"

namespace latte {

class GgufFile;

enum class ModelArch { deepseek2, minicpm3, plm };
const char* model_arch_name(ModelArch a);

enum class KvLayout {
  split,   // attn_k_b {d_nope, d_c, n_h} + attn_v_b {d_c, d_v, n_h} (new deepseek2 files)
  legacy,  // attn_kv_b {d_c, n_h*(d_nope+d_v)}, per head nope rows then v rows
};

enum class FfnKind { swiglu, relu2 };
enum class GatingFunc { softmax = 1, sigmoid = 2 };

struct ModelParams {
  ModelArch arch = ModelArch::deepseek2;
  std::string name;
  int n_layers = 0;
  int n_vocab = 0;
  std::int64_t context_length = 0;  // the model's trained maximum
  std::int64_t rope_orig_ctx = 0;   // rope.scaling.original_context_length (0: absent)
  // minicpm3's rope_factors_long apply to a context longer than this (the
  // original context length, else the trained one, as llama.cpp decides);
  // rope_factors_short to others.
  std::int64_t rope_factor_switch() const { return rope_orig_ctx > 0 ? rope_orig_ctx : context_length; }
  bool rope_long_factors(std::int64_t n_ctx) const { return n_ctx > rope_factor_switch(); }
  // The context a session gets for n_ctx <= 0: the trained one, or 4096
  // where the file gives none (sessions and the reference agree on it, and
  // so on the RoPE factors above).
  std::int64_t resolve_n_ctx(std::int64_t n_ctx) const {
    return n_ctx > 0 ? n_ctx : context_length > 0 ? context_length : 4096;
  }
  MlaConfig mla;                   // d_model, heads, ranks, dims, eps, rope, kq_scale
  KvLayout kv_layout = KvLayout::split;

  // Feed-forward.
  FfnKind ffn_kind = FfnKind::swiglu;
  int ff_dense = 0;             // feed_forward_length
  int n_leading_dense = 0;      // leading_dense_block_count (all layers dense when no experts)
  int n_experts = 0;            // expert_count (0: no MoE)
  int n_experts_used = 0;
  int n_experts_shared = 0;
  int ff_expert = 0;            // expert_feed_forward_length
  float expert_weights_scale = 0.f;  // 0: no scaling
  bool expert_weights_norm = false;
  GatingFunc gating = GatingFunc::softmax;
  int n_expert_groups = 0;      // 0 or 1: no group limit
  int n_expert_groups_used = 0;

  // minicpm3's muP-style scales (1 elsewhere).
  float embed_scale = 1.f;      // x12
  float residual_scale = 1.f;   // 1.4 / sqrt(n_layers)
  float logit_scale = 1.f;      // 256 / d before `output`

  bool is_moe_layer(int layer) const { return n_experts > 0 && layer >= n_leading_dense; }
  // Reads and checks everything; latte::Error naming the key on failure
  // (bad_file for missing/inconsistent keys, unsupported for an architecture
  // or rope scaling Latte does not run).
  static ModelParams from_gguf(const GgufFile& f);
};

}  // namespace latte
