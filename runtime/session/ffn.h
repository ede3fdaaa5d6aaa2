// The feed-forward block's products: one FFN over a chunk's tokens
// (down(act(gate x, up x)), through the weight multiply), and the weighted
// sum of FFNs one token takes (a dense FFN, or an MoE layer's shared and
// routed experts) in one parallel region. The activation: SwiGLU's
// silu(gate) * up, or relu(up)^2 (plm). Internal to runtime/session.
//
// Rules (graph_rules.h): bit-identical across thread splits (each output
// row's arithmetic is the one the separate products give); nothing thrown
// inside a region; failures throw Error, the session rolls back.
#pragma once

#include <cstddef>

#include "kernels/isa.h"
#include "kernels/swiglu_f32/swiglu_f32.h"
#include "runtime/session/aligned_buffer.h"
#include "runtime/model/model.h"
#include "runtime/session/weight_multiply.h"

namespace latte {

// One FFN of a one-token sum: weight * down(act(gate x, up x)).
struct FfnTerm {
  const WeightRef* gate;  // empty for relu^2
  const WeightRef* up;
  const WeightRef* down;
  float weight;
};

class FeedForward {
 public:
  FeedForward(WeightMultiply& wm, Isa isa, bool swiglu)
      : wm_(wm), glu_(&kernels::swiglu_f32_kernels(isa)), swiglu_(swiglu) {}

  bool swiglu() const { return swiglu_; }
  // a[i] = act(gate a[i], up b[i]) for i < n: SwiGLU's silu(a) * b, or
  // relu(b)^2 (a's gate product unused).
  void activation(float* a, const float* b, std::size_t n) const;
  // The bytes of kernel scratch an FFN's products over n tokens need.
  static std::size_t scratch_bytes(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n);
  // Whether any of an FFN's products over n tokens goes to the f32 GEMM.
  bool uses_gemm(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n) const;

  // out (nt, d) = down(act(gate xin, up xin)) for xin (nt, d).
  void run(const FfnWeights& w, const float* xin, int nt, int d, float* out);

  // Whether one_token takes these terms: one token, below the GEMM size.
  bool one_token_fits(const FfnTerm* terms, int n_terms) const;
  // y (d) = sum_k weight_k * FFN_k(x (d)) for one token.
  void one_token(const FfnTerm* terms, int n_terms, const float* x, int d, float* y);

  // A dense layer's FFN: y (n, d) = FFN(x (n, d)).
  void dense(const FfnWeights& w, const float* x, int n, int d, float* y);

 private:
  WeightMultiply& wm_;
  const kernels::SwigluF32Kernels* glu_;
  bool swiglu_;
  AlignedBuffer a_;      // (nt, ff) the gate product, then the activation; one_token: (sum of ff)
  AlignedBuffer b_;      // (nt, ff) the up product; one_token: (sum of ff)
  AlignedBuffer t_out_;  // (d) one_token: one term's output
};

}  // namespace latte
