// Random-weight model specs covering every architecture and layout Latte
// runs, shared by the tests that sweep them (optimized path against the
// reference; hostile metadata and weights). nmse_bound: the optimized path's
// logits against the reference's (F32 weights: f32 accumulation; Q8_0: the
// kernels quantize activations to int8 blocks).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "runtime/gguf/gguf_file.h"
#include "tools/random_model.h"

namespace latte::test {

struct ArchCase {
  const char* name;
  RandomModelSpec spec;
  double nmse_bound;
};

inline RandomModelSpec base() {
  RandomModelSpec s;
  s.n_layers = 3;
  return s;
}

inline std::vector<ArchCase> architecture_cases() {
  std::vector<ArchCase> v;
  {  // DeepSeek-V2 style: split layout, q_lora, dense then MoE (softmax), YaRN.
    RandomModelSpec s = base();
    s.q_lora_rank = 24;
    s.n_experts = 8, s.n_experts_used = 2, s.n_experts_shared = 1, s.ff_expert = 32, s.n_leading_dense = 1;
    v.push_back({"deepseek2_split_qlora_moe", s, 1e-9});
  }
  {  // Older deepseek2 files: legacy attn_kv_b, attn_q, all dense.
    RandomModelSpec s = base();
    s.layout = KvLayout::legacy;
    v.push_back({"deepseek2_legacy_dense", s, 1e-9});
  }
  {  // DeepSeek-V3 style routing: sigmoid, selection bias, groups, norm, scale.
    RandomModelSpec s = base();
    s.q_lora_rank = 24;
    s.n_experts = 16, s.n_experts_used = 4, s.n_experts_shared = 1, s.ff_expert = 16, s.n_leading_dense = 1;
    s.gating = GatingFunc::sigmoid;
    s.expert_bias = true;
    s.n_expert_groups = 4, s.n_expert_groups_used = 2;
    s.expert_weights_norm = true;
    s.expert_weights_scale = 2.5f;
    s.yarn_log_multiplier = 0.1f;
    v.push_back({"deepseek2_v3_routing", s, 1e-9});
  }
  {  // MiniCPM3: legacy layout, q_lora, half-split RoPE, muP scales, the
     // short rope factors (the tests' contexts are below context_length).
    RandomModelSpec s = base();
    s.arch = ModelArch::minicpm3;
    s.layout = KvLayout::legacy;
    s.q_lora_rank = 24;
    s.yarn = false;
    s.rope_factors = true;
    v.push_back({"minicpm3", s, 1e-9});
    // ... and the long ones: a trained context below the tests' 64 tokens.
    s.context_length = 48;
    v.push_back({"minicpm3_long_rope_factors", s, 1e-9});
  }
  {  // PLM: legacy layout, attn_q, relu^2 FFN, tied output.
    RandomModelSpec s = base();
    s.arch = ModelArch::plm;
    s.layout = KvLayout::legacy;
    s.yarn = false;
    s.tied_output = true;
    v.push_back({"plm", s, 1e-9});
  }
  {  // Quantized weights (every ne[0] a multiple of 32).
    RandomModelSpec s = base();
    s.weight_type = GgmlType::Q8_0;
    s.d_nope = 32, s.d_v = 32, s.d_rope = 16, s.q_lora_rank = 32;
    s.n_experts = 4, s.n_experts_used = 2, s.n_experts_shared = 1, s.ff_expert = 32;
    v.push_back({"deepseek2_q8_0", s, 1e-4});
  }
  {  // Legacy layout with quantized weights: W_UK^T is packed to F16 at load.
    RandomModelSpec s = base();
    s.layout = KvLayout::legacy;
    s.weight_type = GgmlType::Q8_0;
    s.d_nope = 32, s.d_v = 32, s.d_rope = 16;
    v.push_back({"deepseek2_legacy_q8_0", s, 1e-4});
  }
  return v;
}

// A random model's file with a NaN in token `bad_token`'s embedding row
// (element 3 of an F32 row; the first block's f16 scale of a Q8_0 one): a
// model whose numbers overflow, for the tests of how that is refused.
inline std::vector<std::uint8_t> model_with_nan_embedding(const RandomModelSpec& spec, int bad_token) {
  std::vector<std::uint8_t> bytes = random_model_bytes(spec);
  const GgufFile f = GgufFile::from_memory(bytes.data(), bytes.size());
  const GgufTensor* t = f.find_tensor("token_embd.weight");
  if (t == nullptr) throw std::logic_error("model_with_nan_embedding: no token_embd.weight");
  std::uint8_t* row = bytes.data() + (t->data - bytes.data()) + bad_token * t->row_bytes;
  if (t->type == GgmlType::F32) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    std::memcpy(row + 4 * 3, &nan, sizeof(nan));
  } else if (t->type == GgmlType::Q8_0) {
    const std::uint16_t nan16 = 0x7e00;
    std::memcpy(row, &nan16, sizeof(nan16));
  } else {
    throw std::logic_error("model_with_nan_embedding: token_embd.weight is neither F32 nor Q8_0");
  }
  return bytes;
}

}  // namespace latte::test
