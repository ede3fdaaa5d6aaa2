// The weight multiply: y = x W^T for a model's weights over n tokens, and
// the one place that decides how. The path: Latte's row kernels
// (kernels/matvec, whose packed int8 GEMM takes the chunks and types it
// packs) or, from gemm_min_tokens on, f32 GEMMs (gemm_f32: on F32 weights
// directly, on the other types over panels of dequantized rows). The thread
// split of a product: the kernels' plan (linear: activations quantized once,
// then runs of rows, kernel_regions.h), runs of 16-row tiles (row_run:
// linear_shared, and ffn.cpp's one-token sum) or whole heads
// (linear_heads); product_rows is the one-thread product those regions,
// attention_absorbed.cpp's head chains and moe.cpp's expert scheduler run.
// The kernels open no region. Internal to runtime/session.
//
// Rules (graph_rules.h): every output row's arithmetic is the same for any
// thread split; a region's failures are kept (RegionError, GemmStatus) and
// thrown after it as Error, and the session rolls back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <vector>

#include "kernels/isa.h"
#include "kernels/matvec/matvec.h"
#include "quant/ggml_blocks.h"
#include "runtime/error.h"
#include "runtime/model/model.h"
#include "runtime/session/aligned_buffer.h"

namespace latte {

class WeightMultiply {
 public:
  // gemm_min_tokens: SessionOptions' override; 0: the measured default.
  WeightMultiply(Isa isa, int threads, int gemm_min_tokens);

  int threads() const { return threads_; }
  // Whether a product of type t over n tokens runs as f32 GEMMs.
  bool use_gemm(GgmlType t, int n) const;
  // Whether the packed int8 GEMM takes t's products over many tokens.
  static bool has_packed_gemm(GgmlType t) { return kernels::matvec_has_packed_gemm(t); }
  // Bytes of kernel scratch one thread's product of w over n tokens needs.
  static std::size_t scratch_bytes(const WeightRef& w, int n) {
    return w.x16 ? kernels::matvec_scratch_bytes_x16(w.type, w.cols, n) : kernels::matvec_scratch_bytes(w.type, w.cols, n);
  }

  // Thread t of nt's run [r0, r1) of `rows` rows, in multiples of 16 (the
  // kernels' row tile).
  static void row_run(std::int64_t rows, int t, int nt, std::int64_t& r0, std::int64_t& r1);
  // One kernel scratch per thread, `per` bytes each (rounded up to a cache
  // line, the stride between them); returns the first.
  std::uint8_t* thread_scratch(std::size_t& per);

  // y rows [r0, r1) of y (n, ldy) = x (n, ldx) W^T, on the calling thread
  // with the row kernels (inside a region: the caller's split).
  // (x16 weights: r0 and r1 multiples of 16, as row_run gives.)
  void product_rows(const WeightRef& w, std::int64_t r0, std::int64_t r1, const float* x, std::size_t ldx, int n,
                    float* y, std::size_t ldy, void* scratch) const {
    matmul_of(w)(w.type, w.data + static_cast<std::size_t>(r0) * w.row_bytes, r1 - r0, w.cols, x, ldx, n, y + r0, ldy,
                 scratch);
  }

  // y (n, ldy) = x (n, ldx) W^T for W (rows, cols).
  void linear(const WeightRef& w, const float* x, std::size_t ldx, int n, float* y, std::size_t ldy);

  struct LinearOut {
    const WeightRef* w;
    float* y;  // (n, ldy)
    std::size_t ldy;
  };
  // y_k (n, ldy_k) = x (n, ldx) W_k^T for weights that share their input (q
  // and kv_a; gate and up).
  void linear_shared(std::initializer_list<LinearOut> outs, const float* x, std::size_t ldx, int n);

  // Per head h: y_h (n, ldy) = x_h (n, ldx) W_h^T, with x_h = x + h*x_step and
  // y_h = y + h*y_step.
  void linear_heads(const HeadWeights& w, int heads, const float* x, std::size_t x_step, std::size_t ldx, int n,
                    float* y, std::size_t y_step, std::size_t ldy);

 private:
  // The kernels' matmul for w's layout (x16 or the file's).
  decltype(kernels::MatvecKernels::matmul) matmul_of(const WeightRef& w) const {
    return w.x16 ? mv_->matmul_x16 : mv_->matmul;
  }

  const kernels::MatvecKernels* mv_;
  Isa isa_;
  int threads_;
  int gemm_min_tokens_;
  std::vector<std::uint8_t> mv_scratch_;  // the kernels' scratch: one, or one per thread
  std::vector<std::uint8_t> work_;        // (threads, plan.work_bytes) the kernels' per-thread work memory
  AlignedBuffer gemm_panel_;              // (256, cols) dequantized rows for the f32 GEMM
  std::vector<std::uint8_t> x16_rows_;    // (threads, 16 rows) x16 tiles in the original layout, to dequantize
};

}  // namespace latte
