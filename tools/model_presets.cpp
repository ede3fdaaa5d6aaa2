#include "tools/model_presets.h"

#include <cmath>

namespace latte {

namespace {

constexpr ModelPreset kPresets[] = {
    {"v2-lite", "DeepSeek-V2-Lite attention, dense FFN; real size 27 layers, vocab 102400"},
    {"v2-lite-moe", "DeepSeek-V2-Lite whole: a dense first layer, then 64 experts, 6 used, 2 shared"},
    {"minicpm3-4b", "MiniCPM3-4B: d 2560, 40 heads, q_lora 768, kv_lora 256, SwiGLU 6400, LongRoPE, muP scales, "
                    "tied embeddings; real size 62 layers, vocab 73448"},
    {"plm-1.8b", "PLM-1.8B: d 2048, 16 heads, no q_lora, kv_lora 512, squared-ReLU FFN 8192, tied embeddings; "
                 "real size 32 layers, vocab 151936"},
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
  } else if (name == "minicpm3-4b") {
    // openbmb/MiniCPM3-4B's config.json: 62 layers, vocab 73448, d 2560, 40
    // heads, q_lora 768, kv_lora 256, nope 64, rope 32, v 64 (its default,
    // qk_nope_head_dim), SwiGLU 6400, 32768 positions, rms eps 1e-5, theta
    // 10000, embeddings tied (no lm_head). Laid out as llama.cpp's converter
    // writes it: attn_kv_b, the LongRoPE factors as tensors (its long and
    // short lists are the same, over an original context of 32768 = the
    // trained one); the muP scales (12, 1.4, 256) are the architecture's.
    s.arch = ModelArch::minicpm3, s.layout = KvLayout::legacy;
    s.n_layers = 62, s.n_vocab = 73448;
    s.d_model = 2560, s.n_heads = 40, s.q_lora_rank = 768, s.kv_lora_rank = 256;
    s.d_nope = 64, s.d_rope = 32, s.d_v = 64, s.ff = 6400;
    s.context_length = 32768, s.rms_eps = 1e-5f, s.yarn = false, s.tied_output = true;
    s.rope_factors = true;
    s.rope_factors_long = {1.0591234137867171f, 1.1241891283591912f, 1.2596935748670968f, 1.5380380402321725f,
                           2.093982484148734f,  3.1446935121267696f, 4.937952647693647f,  7.524541999994549f,
                           10.475458000005451f, 13.062047352306353f, 14.85530648787323f,  15.906017515851266f,
                           16.461961959767827f, 16.740306425132907f, 16.87581087164081f,  16.940876586213285f};
    s.rope_factors_short = s.rope_factors_long;
    s.embd_range = 1 / std::sqrt(2560.f);  // tied (random_model.h)
  } else if (name == "plm-1.8b") {
    // PLM-Team/PLM-1.8B-Base (transformers' PLMConfig defaults, which are
    // its config): 32 layers, vocab 151936, d 2048, 16 heads, no q_lora
    // (attn_q), kv_lora 512, nope 128, rope 64, v 128, a squared-ReLU FFN
    // of 8192 (ffn_up and ffn_down only), 4096 positions, theta 100000, rms
    // eps 1e-6, no RoPE scaling; llama.cpp's files carry no `output`
    // (tied) and attn_kv_b.
    s.arch = ModelArch::plm, s.layout = KvLayout::legacy;
    s.n_layers = 32, s.n_vocab = 151936;
    s.d_model = 2048, s.n_heads = 16, s.q_lora_rank = 0, s.kv_lora_rank = 512;
    s.d_nope = 128, s.d_rope = 64, s.d_v = 128, s.ff = 8192;
    s.context_length = 4096, s.rope_freq_base = 100000.f, s.rms_eps = 1e-6f, s.yarn = false;
    s.tied_output = true, s.embd_range = 1 / std::sqrt(2048.f);
  } else if (name == "tiny") {
    s.d_model = 256, s.n_heads = 8, s.q_lora_rank = 96, s.kv_lora_rank = 64;
    s.d_nope = 32, s.d_rope = 32, s.d_v = 32, s.ff = 512;
  } else {
    return std::nullopt;
  }
  return s;
}

}  // namespace latte
