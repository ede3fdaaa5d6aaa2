// The regions of the kernels' split calls (kernels/matvec/matvec.h's
// MatmulPlan phases, kernels/mla_attn/mla_attn.h's decode phases and
// prefill queries), opened on the calling thread's pool: the kernels open
// none. WeightMultiply and AbsorbedAttention run their products and
// attention through these; the kernel tests and benchmarks do too, so they
// check the splits the runtime runs. Internal to runtime/session.
//
// Rules (graph_rules.h): every output's arithmetic is the same for any split
// (the plans depend on the thread count asked, never on how many threads
// run them); a slot's exception is kept and rethrown after its region.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "kernels/matvec/matvec.h"
#include "kernels/mla_attn/mla_attn.h"
#include "platform/thread_pool.h"
#include "quant/ggml_blocks.h"
#include "runtime/session/parallel_rows.h"

namespace latte {

// y (n, ldy) = x (n, ldx) W^T for the `rows` rows at w, planned as p, over
// up to `threads` slots: the activations quantized into scratch (split by
// tokens where there are several), then runs of rows from multiples of
// p.row_unit, slot t with the work memory at work + t * work_stride.
inline void matmul_regions(const kernels::MatvecKernels& k, const kernels::MatmulPlan& p, const void* w,
                           std::size_t rows, const float* x, std::size_t ldx, float* y, std::size_t ldy,
                           void* scratch, std::uint8_t* work, std::size_t work_stride, int threads) {
  const std::size_t n = p.n_tokens;
  if (p.quantize) {
    if (n <= 1 || threads <= 1)
      k.matmul_quantize(p, x, ldx, 0, n, scratch);
    else
      parallel_slots(static_cast<int>(std::min<std::size_t>(threads, n)),
                     [&](int t, int nt) { k.matmul_quantize(p, x, ldx, n * t / nt, n * (t + 1) / nt, scratch); });
  }
  const std::size_t unit = p.row_unit, units = (rows + unit - 1) / unit, rb = ggml_row_bytes(p.type, p.cols);
  const int team = static_cast<int>(std::min<std::size_t>(std::max(threads, 1), std::max<std::size_t>(units, 1)));
  RegionError err;
  parallel_slots(team, [&](int t, int nt) {
    const std::size_t r0 = std::min(rows, units * t / nt * unit), r1 = std::min(rows, units * (t + 1) / nt * unit);
    if (r1 <= r0) return;
    err.run([&] {
      k.matmul_rows(p, static_cast<const std::uint8_t*>(w) + r0 * rb, r1 - r0, x, ldx, y + r0, ldy, scratch,
                    work + work_stride * static_cast<std::size_t>(t));
    });
  });
  err.rethrow();
}

// A decode (a.n_ctx >= 1) through its phases: the split and the query on
// the calling thread, then the work items and the merge, a region each
// where the split has more than one item.
inline void mla_decode_regions(const kernels::MlaAttnKernels& k, const kernels::MlaDecodeArgs& a) {
  const kernels::MlaDecodeSplit sp = k.decode_begin(a);
  k.decode_query(a, 0, a.n_heads);
  if (sp.slots <= 1) {
    k.decode_items(a, 0, 1);
    k.decode_merge(a, 0, a.n_heads);
    return;
  }
  parallel_slots(sp.slots, [&](int t, int ns) { k.decode_items(a, t, ns); });
  // Every item's part is written: the heads' merge, a second region.
  parallel_slots(sp.slots, [&](int t, int ns) { k.decode_merge(a, a.n_heads * t / ns, a.n_heads * (t + 1) / ns); });
}

// A causal prefill: from a.threads queries on (a.threads > 1) one query per
// thread at a time (no merge, all threads busy), else each query a decode
// over the threads.
inline void mla_prefill_regions(const kernels::MlaAttnKernels& k, const kernels::MlaPrefillArgs& a) {
  if (a.n_q >= a.threads && a.threads > 1) {
    std::atomic<int> next{0};
    parallel_slots(a.threads, [&](int t, int) {
      for (int i = next.fetch_add(1, std::memory_order_relaxed); i < a.n_q; i = next.fetch_add(1, std::memory_order_relaxed))
        k.prefill_queries(a, i, i + 1, t);
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
    mla_decode_regions(k, d);
  }
}

}  // namespace latte
