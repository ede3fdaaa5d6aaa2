// `latte make-model`: a random-weight model file with real model shapes, for
// benchmarks (scripts/bench.sh model) and for trying Latte without a download.
#include <cstdio>
#include <string>

#include "quant/ggml_types.h"
#include "tools/cli/commands.h"
#include "runtime/error.h"
#include "tools/random_model.h"

namespace latte::cli {

int run_make_model(const MakeModelOptions& o) {
  RandomModelSpec s;
  if (o.preset == "v2-lite" || o.preset == "v2-lite-moe") {
    // DeepSeek-V2-Lite's attention: d 2048, 16 heads, no q_lora, d_c 512,
    // d_R 64, nope 128, v 128, YaRN as V2; a dense SwiGLU FFN of 1408.
    s.d_model = 2048, s.n_heads = 16, s.q_lora_rank = 0, s.kv_lora_rank = 512;
    s.d_nope = 128, s.d_rope = 64, s.d_v = 128, s.ff = 1408;
    s.context_length = 163840, s.yarn_factor = 40, s.yarn_orig_ctx = 4096, s.yarn_log_multiplier = 0.0707f;
    if (o.preset == "v2-lite-moe") {
      // DeepSeek-V2-Lite whole: a first dense layer (FFN 10944), then MoE
      // layers of 64 routed experts (6 used per token, softmax gating,
      // weights not renormalized) and 2 shared ones, each 1408 wide.
      s.ff = 10944;
      s.n_experts = 64, s.n_experts_used = 6, s.n_experts_shared = 2, s.ff_expert = 1408, s.n_leading_dense = 1;
      s.gating = GatingFunc::softmax, s.expert_weights_norm = false, s.expert_weights_scale = 1.f;
    }
  } else if (o.preset == "tiny") {
    s.d_model = 256, s.n_heads = 8, s.q_lora_rank = 96, s.kv_lora_rank = 64;
    s.d_nope = 32, s.d_rope = 32, s.d_v = 32, s.ff = 512;
  } else {
    throw Error(Status::invalid_argument, "make-model: unknown preset '" + o.preset + "' (v2-lite, v2-lite-moe, tiny)");
  }
  s.n_layers = o.layers;
  s.n_vocab = o.vocab;
  s.seed = o.seed;
  bool found = false;
  for (std::uint32_t id = 0; id < 64 && !found; ++id) {
    auto info = ggml_type_info(id);
    if (info && o.type == info->name) {
      s.weight_type = info->type;
      found = true;
    }
  }
  if (!found) throw Error(Status::invalid_argument, "make-model: unknown weight type '" + o.type + "'");
  write_random_model(s, o.out);
  std::fprintf(stderr, "wrote %s: %s preset, %d layers, vocab %d, %s weights\n", o.out.c_str(), o.preset.c_str(),
               o.layers, o.vocab, o.type.c_str());
  if (ggml_type_info(static_cast<std::uint32_t>(s.weight_type))->block_elems > 32)
    std::fprintf(stderr, "(matrices whose rows a %s block does not divide are written as llama.cpp's quantizer "
                         "writes them: Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, else F16)\n", o.type.c_str());
  return 0;
}

}  // namespace latte::cli
