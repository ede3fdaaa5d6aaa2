// The whole model in plain C++: every weight dequantized to f32, the MLA
// layer of runtime/mla/mla_reference.*, feed-forward and MoE routing in double.
// Slow on purpose; the ground truth for the optimized path and the check of
// Latte's reading of GGUF files against llama.cpp's logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "reference/mla_reference.h"
#include "runtime/model/model_params.h"

namespace latte {

class GgufFile;
class LatentCache;

class ModelReference {
 public:
  // n_ctx: the context a session would have (0: the model's), which picks
  // minicpm3's long or short rope factors.
  explicit ModelReference(const GgufFile& file, std::int64_t n_ctx = 0);

  const ModelParams& params() const { return params_; }
  // Feeds tokens at the next positions (n_past, n_past+1, ...) through the
  // model and returns their logits (n_tokens, n_vocab).
  std::vector<float> forward(std::span<const std::int32_t> tokens, MlaForm form);
  std::int64_t n_past() const { return n_past_; }
  void reset();
  // Replaces the reference's cache with another cache's rows, read back as
  // f32 (dequantized): the reference then runs over exactly what that cache
  // holds (a shifted one, say). Its shapes must be the model's.
  void load_cache(const LatentCache& cache);

 private:
  struct Ffn {  // PyTorch layout [out, in]
    std::vector<float> gate, up, down;  // (ff, d), (ff, d), (d, ff); gate empty for relu2
  };
  struct Layer {
    std::vector<float> attn_norm, ffn_norm;  // (d)
    MlaLayerWeights mla;
    Ffn dense;                     // dense layers
    std::vector<float> gate_inp;   // (n_exp, d)             MoE layers
    std::vector<float> exp_bias;   // (n_exp) selection bias, may be empty
    std::vector<Ffn> experts;      // n_exp x (ff_exp ...)
    Ffn shared;                    // (ff_exp * n_shared ...), may be empty
  };

  void ffn(const Ffn& f, const double* x, double* out) const;  // out += ffn(x)
  void moe(const Layer& l, const double* x, double* out) const;

  ModelParams params_;
  std::vector<float> token_embd_;  // (n_vocab, d)
  std::vector<float> output_norm_; // (d)
  std::vector<float> output_;      // (n_vocab, d)
  std::vector<Layer> layers_;
  std::vector<MlaReferenceCache> caches_;
  std::int64_t n_past_ = 0;
};

}  // namespace latte
