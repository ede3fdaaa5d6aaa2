// `latte make-model`: a random-weight model file with real model shapes, for
// benchmarks (scripts/bench.sh model) and for trying Latte without a download.
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>

#include "platform/console.h"
#include "platform/paths.h"
#include "quant/ggml_types.h"
#include "tools/cli/commands.h"
#include "tools/cli/progress.h"
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
    throw UsageError("unknown preset '" + o.preset + "' (v2-lite, v2-lite-moe, tiny)");
  }
  s.n_layers = o.layers;
  s.n_vocab = o.vocab;
  s.seed = o.seed;
  std::string type;
  if (const std::string problem = weight_type_problem(o.type, &type); !problem.empty()) throw UsageError(problem);
  for (std::uint32_t id = 0; id < 64; ++id)
    if (const auto info = ggml_type_info(id); info && type == info->name) s.weight_type = info->type;
  // Ctrl-C (or a termination request) abandons the work: nothing is left
  // behind, not even the temporary of the file being written.
  const CtrlCScope ctrl_c;
  struct Abandoned {};
  ProgressLine progress;
  const std::string name = file_name_of(o.out);
  s.on_progress = [&](RandomModelStage stage, std::uint64_t done, std::uint64_t total) {
    if (ctrl_c_pending() || termination_pending()) throw Abandoned{};
    char line[160];
    if (stage == RandomModelStage::weights)
      std::snprintf(line, sizeof line, "make-model %s: weights %.1f / %.1f M (%.0f%%)", name.c_str(), done / 1e6,
                    total / 1e6, total ? 100.0 * done / total : 100.0);
    else
      std::snprintf(line, sizeof line, "make-model %s: writing %s", name.c_str(), binary_bytes_of(done, total).c_str());
    progress.show(line);
  };
  const auto t0 = std::chrono::steady_clock::now();
  try {
    write_random_model(s, o.out);
  } catch (const Abandoned&) {
    progress.clear();
    const bool terminated = termination_pending();
    std::fprintf(stderr, "make-model: %s: nothing written\n",
                 terminated ? (std::string("stopped by ") + termination_signal_name()).c_str() : "interrupted");
    return terminated ? termination_exit_status() : 130;
  }
  progress.clear();
  std::fprintf(stderr, "wrote %s: %s preset, %s, vocab %d, %s weights (%s in %.1f s)\n", o.out.c_str(),
               o.preset.c_str(), count_of(o.layers, "layer").c_str(), o.vocab, type.c_str(),
               binary_bytes(static_cast<double>(std::filesystem::file_size(path_from_utf8(o.out)))).c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (ggml_type_info(static_cast<std::uint32_t>(s.weight_type))->block_elems > 32)
    std::fprintf(stderr, "(matrices whose rows a %s block does not divide are written as llama.cpp's quantizer "
                         "writes them: Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS -> IQ4_NL, else F16)\n", type.c_str());
  return 0;
}

}  // namespace latte::cli
