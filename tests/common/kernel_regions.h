// The kernels' split calls for the kernel tests and benchmarks, on the
// calling thread's pool through the runtime's own regions
// (runtime/session/kernel_regions.h), so the tests check the splits the
// runtime runs. threads <= 1: the whole call on the calling thread.
#pragma once

#include <cstddef>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "kernels/mla_attn/mla_attn.h"
#include "quant/ggml_blocks.h"
#include "runtime/session/kernel_regions.h"

namespace latte::test {

// k.matmul (x16: k.matmul_x16) over `threads` slots. scratch: as the kernel's.
inline void matmul_on_threads(const kernels::MatvecKernels& k, GgmlType t, const void* w, std::size_t rows,
                              std::size_t cols, const float* x, std::size_t ldx, std::size_t n, float* y,
                              std::size_t ldy, void* scratch, int threads, bool x16 = false) {
  if (threads <= 1) {
    (x16 ? k.matmul_x16 : k.matmul)(t, w, rows, cols, x, ldx, n, y, ldy, scratch);
    return;
  }
  if (x16) kernels::matvec_x16_check_args(t, rows, cols);
  const kernels::MatmulPlan p = k.matmul_plan(t, cols, n, x16);
  std::vector<std::uint8_t> work(p.work_bytes * static_cast<std::size_t>(threads) + 1);  // (threads, work_bytes)
  matmul_regions(k, p, w, rows, x, ldx, y, ldy, scratch, work.data(), p.work_bytes, threads);
}

// k.decode and k.prefill over a.threads slots.
inline void decode_on_threads(const kernels::MlaAttnKernels& k, const kernels::MlaDecodeArgs& a) {
  if (a.threads <= 1 || a.n_ctx <= 0) k.decode(a);
  else mla_decode_regions(k, a);
}
inline void prefill_on_threads(const kernels::MlaAttnKernels& k, const kernels::MlaPrefillArgs& a) {
  if (a.threads <= 1) k.prefill(a);
  else mla_prefill_regions(k, a);
}

// matvec_x16_interleave of a whole matrix on the calling thread.
inline void x16_interleave(GgmlType t, void* w, std::size_t rows, std::size_t cols) {
  kernels::matvec_x16_check_args(t, rows, cols);
  std::vector<std::uint8_t> tmp(16 * ggml_row_bytes(t, cols));  // (16 rows)
  kernels::matvec_x16_interleave(t, w, rows, cols, tmp.data());
}

}  // namespace latte::test
