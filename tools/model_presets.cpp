#include "tools/model_presets.h"

namespace latte {

namespace {

constexpr ModelPreset kPresets[] = {
    {"v2-lite", "DeepSeek-V2-Lite attention, dense FFN"},
    {"v2-lite-moe", "DeepSeek-V2-Lite whole: a dense first layer, then 64 experts, 6 used, 2 shared"},
    {"tiny", "a small MLA model: d 256, 8 heads, q_lora 96, kv_lora 64"},
};

}  // namespace

std::span<const ModelPreset> model_presets() { return kPresets; }

std::string model_preset_names() {
  std::string s;
  for (const ModelPreset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

std::optional<RandomModelSpec> model_preset_spec(std::string_view name) {
  RandomModelSpec s;
  if (name == "v2-lite" || name == "v2-lite-moe") {
    // DeepSeek-V2-Lite's attention: d 2048, 16 heads, no q_lora, d_c 512,
    // d_R 64, nope 128, v 128, YaRN as V2; a dense SwiGLU FFN of 1408.
    s.n_layers = 27, s.n_vocab = 102400;
    s.d_model = 2048, s.n_heads = 16, s.q_lora_rank = 0, s.kv_lora_rank = 512;
    s.d_nope = 128, s.d_rope = 64, s.d_v = 128, s.ff = 1408;
    s.context_length = 163840, s.yarn_factor = 40, s.yarn_orig_ctx = 4096, s.yarn_log_multiplier = 0.0707f;
    if (name == "v2-lite-moe") {
      // DeepSeek-V2-Lite whole: a first dense layer (FFN 10944), then MoE
      // layers of 64 routed experts (6 used per token, softmax gating,
      // weights not renormalized) and 2 shared ones, each 1408 wide.
      s.ff = 10944;
      s.n_experts = 64, s.n_experts_used = 6, s.n_experts_shared = 2, s.ff_expert = 1408, s.n_leading_dense = 1;
      s.gating = GatingFunc::softmax, s.expert_weights_norm = false, s.expert_weights_scale = 1.f;
    }
  } else if (name == "tiny") {
    s.d_model = 256, s.n_heads = 8, s.q_lora_rank = 96, s.kv_lora_rank = 64;
    s.d_nope = 32, s.d_rope = 32, s.d_v = 32, s.ff = 512;
  } else {
    return std::nullopt;
  }
  return s;
}

}  // namespace latte
