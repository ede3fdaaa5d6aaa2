// Random-weight model files of every architecture and layout Latte runs,
// written with the GGUF writer exactly as llama.cpp lays them out. Tests use
// them to compare the optimized path with the reference; `latte make-model`
// makes benchmark models (scripts/bench.sh model).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/ggml_types.h"
#include "runtime/model/model_params.h"
#include "runtime/tokenizer/tokenizer.h"

namespace latte {

class GgufWriter;

// What RandomModelSpec::on_progress counts: the weights' elements as they
// are made, then the file's bytes as they are written.
enum class RandomModelStage { weights, writing };

struct RandomModelSpec {
  ModelArch arch = ModelArch::deepseek2;
  KvLayout layout = KvLayout::split;
  int n_layers = 2;
  int d_model = 64;
  int n_heads = 4;
  int q_lora_rank = 0;  // 0: attn_q
  int kv_lora_rank = 32;
  int d_nope = 16, d_rope = 8, d_v = 16;
  int ff = 96;          // dense feed-forward
  int n_vocab = 300;    // >= 258: 256 byte tokens + BOS + EOS
  std::int64_t context_length = 4096;
  // MoE (n_experts 0: all dense)
  int n_experts = 0, n_experts_used = 0, n_experts_shared = 0, ff_expert = 0, n_leading_dense = 1;
  GatingFunc gating = GatingFunc::softmax;
  bool expert_weights_norm = false;
  float expert_weights_scale = 1.f;
  int n_expert_groups = 0, n_expert_groups_used = 0;
  bool expert_bias = false;  // exp_probs_b.bias
  // RoPE
  float rope_freq_base = 10000.f;
  bool yarn = true;
  float yarn_factor = 4.f;
  int yarn_orig_ctx = 128;
  float yarn_log_multiplier = 0.0707f;
  float rms_eps = 1e-6f;
  std::uint32_t alignment = 0;  // general.alignment written when nonzero (else GGUF's default 32, unwritten)
  bool rope_factors = false;             // minicpm3: rope_factors_long / _short tensors
  // Their values, d_rope / 2 each (a real model's); empty: made at random.
  std::vector<float> rope_factors_long, rope_factors_short;
  GgmlType weight_type = GgmlType::F32;  // matrices (see row_type_for); norms stay F32
  bool tied_output = false;              // no `output` tensor
  // token_embd's elements: uniform in [-embd_range, embd_range]. With tied
  // output the logits are these rows against the normed state: rows of
  // unit-size elements give the token just fed a logit near 0.58 d (over
  // 1000 at d 2048) on a shallow model; 1/sqrt(d), as trained rows are
  // sized, keeps logits of a few units.
  float embd_range = 1.f;
  bool tokenizer = true;                 // false: no tokenizer.ggml.* keys (a file run on token ids alone)
  // A real vocabulary written instead of the byte-level one (n_vocab must be
  // its size); not owned.
  const VocabSpec* vocab = nullptr;
  // Control tokens in the place of the first fillers after the byte tokens
  // (chat markers such as "<|im_start|>").
  std::vector<std::string> control_tokens;
  std::uint64_t seed = 1;
  // Called on the metadata before the tensors are added: tests drop or add
  // keys as other converters write them.
  std::function<void(GgufWriter&)> edit_metadata;
  // Called with (stage, done, total) after each matrix made and each step
  // written; may throw to abandon the work (a file being written is then
  // left as it was).
  std::function<void(RandomModelStage, std::uint64_t, std::uint64_t)> on_progress;
};

// The type a matrix with rows of `cols` elements is written in: `want`, or
// where its block does not divide the row, llama.cpp's quantizer fallback
// (Q2_K, Q3_K -> Q4_0, Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, IQ4_XS ->
// IQ4_NL), or F16.
GgmlType row_type_for(GgmlType want, std::uint64_t cols);

std::vector<std::uint8_t> random_model_bytes(const RandomModelSpec& spec);
void write_random_model(const RandomModelSpec& spec, const std::string& path);

}  // namespace latte
