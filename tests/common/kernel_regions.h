// The kernels' products and attention run on the calling thread's pool
// (platform/thread_pool.h), for the kernel tests and benchmarks: the
// kernels open no region, so a caller runs their phases (matvec.h's
// MatmulPlan, mla_attn.h's decode phases) on its threads, as
// runtime/session does. threads <= 1: the whole call on the calling thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <vector>

#include "kernels/matvec/matvec.h"
#include "kernels/mla_attn/mla_attn.h"
#include "platform/thread_pool.h"
#include "quant/ggml_blocks.h"

namespace latte::test {

// k.matmul (x16: k.matmul_x16) over `threads` slots: the activations
// quantized split by tokens, then runs of rows. scratch: as the kernel's.
inline void matmul_on_threads(const kernels::MatvecKernels& k, GgmlType t, const void* w, std::size_t rows,
                              std::size_t cols, const float* x, std::size_t ldx, std::size_t n, float* y,
                              std::size_t ldy, void* scratch, int threads, bool x16 = false) {
  if (threads <= 1) {
    (x16 ? k.matmul_x16 : k.matmul)(t, w, rows, cols, x, ldx, n, y, ldy, scratch);
    return;
  }
  if (x16) kernels::matvec_x16_check_args(t, rows, cols);
  if (rows == 0 || n == 0) return;
  const kernels::MatmulPlan p = k.matmul_plan(t, cols, n, x16);
  if (p.quantize)
    parallel_slots(static_cast<int>(std::min<std::size_t>(threads, n)),
                   [&](int s, int ns) { k.matmul_quantize(p, x, ldx, n * s / ns, n * (s + 1) / ns, scratch); });
  const std::size_t units = (rows + p.row_unit - 1) / p.row_unit, rb = ggml_row_bytes(t, cols);
  const int team = static_cast<int>(std::min<std::size_t>(threads, units));
  std::vector<unsigned char> work(p.work_bytes * team + 1);  // (team, work_bytes)
  parallel_slots(team, [&](int s, int ns) {
    const std::size_t r0 = std::min(rows, units * s / ns * p.row_unit);
    const std::size_t r1 = std::min(rows, units * (s + 1) / ns * p.row_unit);
    if (r1 > r0)
      k.matmul_rows(p, static_cast<const unsigned char*>(w) + r0 * rb, r1 - r0, x, ldx, y + r0, ldy, scratch,
                    work.data() + p.work_bytes * static_cast<std::size_t>(s));
  });
}

// k.decode over a.threads slots, phase by phase.
inline void decode_on_threads(const kernels::MlaAttnKernels& k, const kernels::MlaDecodeArgs& a) {
  if (a.threads <= 1 || a.n_ctx <= 0) {
    k.decode(a);
    return;
  }
  const kernels::MlaDecodeSplit sp = k.decode_begin(a);
  k.decode_query(a, 0, a.n_heads);
  parallel_slots(sp.slots, [&](int s, int ns) { k.decode_items(a, s, ns); });
  parallel_slots(sp.slots, [&](int s, int ns) { k.decode_merge(a, a.n_heads * s / ns, a.n_heads * (s + 1) / ns); });
}

// k.prefill over a.threads slots: the queries taken by the threads, or
// (fewer queries than threads) each a decode over them.
inline void prefill_on_threads(const kernels::MlaAttnKernels& k, const kernels::MlaPrefillArgs& a) {
  if (a.threads <= 1) {
    k.prefill(a);
    return;
  }
  if (a.n_q >= a.threads) {
    std::atomic<int> next{0};
    parallel_slots(a.threads, [&](int s, int) {
      for (int i = next.fetch_add(1); i < a.n_q; i = next.fetch_add(1)) k.prefill_queries(a, i, i + 1, s);
    });
    return;
  }
  const std::size_t nl = static_cast<std::size_t>(a.n_heads) * a.cache.layout.d_c;
  const std::size_t nr = static_cast<std::size_t>(a.n_heads) * a.cache.layout.d_R;
  for (int i = 0; i < a.n_q; ++i) {
    kernels::MlaDecodeArgs d;
    d.n_heads = a.n_heads;
    d.q_lat = a.q_lat + i * nl;
    d.q_pe = a.q_pe + i * nr;
    d.scale = a.scale;
    d.cache = a.cache;
    d.n_ctx = a.p0 + i + 1;
    d.out = a.out + i * nl;
    d.threads = a.threads;
    d.scratch = a.scratch;
    decode_on_threads(k, d);
  }
}

// matvec_x16_interleave of a whole matrix on the calling thread.
inline void x16_interleave(GgmlType t, void* w, std::size_t rows, std::size_t cols) {
  kernels::matvec_x16_check_args(t, rows, cols);
  std::vector<unsigned char> tmp(16 * ggml_row_bytes(t, cols));  // (16 rows)
  kernels::matvec_x16_interleave(t, w, rows, cols, tmp.data());
}

}  // namespace latte::test
