// An MoE layer's feed-forward: the router (softmax or sigmoid gating, the
// selection bias, group-limited top-k, the weights' norm and scale), then
// the shared experts and the routed experts, scheduled by the chunk: one
// token as one fused sum (ffn.h), a prefill chunk's experts spread over the
// threads whole (or in equal parts, for the packed int8 GEMM), or each
// expert through the weight multiply's own split (GEMM sizes, one thread).
// Internal to runtime/session.
//
// Rules (graph_rules.h): bit-identical across thread splits (each expert's
// output lands in its own slot and the slots are added in expert order);
// nothing thrown inside a region; failures throw Error, the session rolls
// back.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/session/ffn.h"
#include "runtime/session/aligned_buffer.h"
#include "runtime/model/model.h"
#include "runtime/model/model_params.h"
#include "runtime/session/weight_multiply.h"

namespace latte {

// Per expert, the tokens routed to it and their weights, tokens ascending.
using ExpertTokens = std::vector<std::vector<std::pair<int, float>>>;

// Routes n tokens by their router logits (n, n_exp): each token's top-k
// experts and weights, appended to by_expert (n_exp lists).
void moe_route(const ModelParams& p, const LayerWeights& L, const float* logits, int n, ExpertTokens& by_expert);

class Moe {
 public:
  Moe(WeightMultiply& wm, FeedForward& ffn) : wm_(wm), ffn_(ffn) {}

  // y (n, d) = the shared experts' FFN + the routed experts' weighted FFNs
  // of x (n, d).
  void forward(const ModelParams& p, const LayerWeights& L, const float* x, int n, int d, float* y);
  // Routed experts that got tokens, summed over forward() calls since the
  // last reset: the experts a step reads (benchmarks' memory bound).
  std::int64_t experts_read() const { return experts_read_; }
  void reset_experts_read() { experts_read_ = 0; }

 private:
  // Whether experts_parallel takes a chunk whose largest expert has max_nt
  // tokens: with more than one thread, below the GEMM size.
  bool experts_parallel_fits(const LayerWeights& L, int max_nt) const;
  // y (n, d) += the routed experts' weighted outputs, each thread taking
  // whole experts (or parts) with one-thread products.
  void experts_parallel(const LayerWeights& L, const ExpertTokens& by_expert, const float* x, int d, float* y);
  // y (n, d) += the same, each expert once over its tokens through the
  // weight multiply's own split.
  void experts_serial(const LayerWeights& L, const ExpertTokens& by_expert, const float* x, int n, int d, float* y);

  WeightMultiply& wm_;
  FeedForward& ffn_;
  AlignedBuffer router_;  // (n, n_exp) router logits
  AlignedBuffer xe_;      // (tokens of expert e, d) experts_serial's input rows
  AlignedBuffer ye_;      // (tokens of expert e, d) experts_serial's output rows
  // Per-thread buffers of experts_parallel: (tokens, d) input rows, (tokens,
  // ff) gate and up products, the kernels' scratch.
  struct ExpertBuffers {
    AlignedBuffer xe, a, b;
    std::vector<std::uint8_t> scratch;
  };
  std::unique_ptr<ExpertBuffers[]> expert_bufs_;  // (threads)
  AlignedBuffer expert_out_;                      // (routed pairs, d)
  std::int64_t experts_read_ = 0;
};

}  // namespace latte
