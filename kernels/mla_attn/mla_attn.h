// Absorbed MLA attention over one layer of the latent cache (mla-spec.md 1):
//   s_h(j) = scale * (q_lat_h . c_KV(j) + q_pe_h . k_pe(j))
//   o_h    = sum_j softmax_j(s_h) c_KV(j)                     (d_c) per head
// decode: one query token against tokens [0, n_ctx).
// prefill: n_q query tokens at positions p0 .. p0+n_q-1, causal: query i sees
// tokens [0, p0 + i + 1) (the cache already holds the chunk's own rows).
//
// Threads: the context is split into contiguous tile ranges, one per thread,
// each running an online softmax, merged by log-sum-exp; short contexts split
// the heads instead. The kernels open no parallel region and read no thread
// setting: the caller plans a decode for `threads` and runs its phases
// (MlaAttnKernels: the query, the work items, the merge) on its own threads.
// The plan depends on `threads` alone, never on how many threads run it, so
// the results do not either. int8 caches: the query is quantized per head (latent and
// rope parts separately) and scores use integer dot products (vpdpbusd,
// vpmaddubsw+vpmaddwd, sdot); the softmax weights, times each token's latent
// scale, are quantized per head per block of ~512 tokens and the value
// product is an integer dot product along tokens as well. int4 caches (a
// scale per latent channel and tile): the latent query is scaled by the
// tile's channel scales and quantized again per tile, and each tile's value
// sums are scaled by them before the next tile's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/dispatch.h"
#include "kernels/isa.h"
#include "quant/latent_formats.h"

namespace latte::kernels {

struct MlaDecodeArgs {
  int n_heads = 0;
  const float* q_lat = nullptr;  // (n_heads, d_c)
  const float* q_pe = nullptr;   // (n_heads, d_R)
  float scale = 1.f;             // softmax scale
  LatentLayerView cache{};
  std::int64_t n_ctx = 0;        // 0 gives a zero output
  float* out = nullptr;          // (n_heads, d_c)
  int threads = 1;               // the plan's (>= 1)
  void* scratch = nullptr;       // table.scratch_bytes(...) bytes, any alignment
};

struct MlaPrefillArgs {
  int n_heads = 0;
  int n_q = 0;
  std::int64_t p0 = 0;
  const float* q_lat = nullptr;  // (n_q, n_heads, d_c)
  const float* q_pe = nullptr;   // (n_q, n_heads, d_R)
  float scale = 1.f;
  LatentLayerView cache{};
  float* out = nullptr;          // (n_q, n_heads, d_c)
  int threads = 1;               // the plan's (>= 1)
  void* scratch = nullptr;       // same size as for decode with these threads
};

// How a decode's plan splits its work (MlaAttnKernels::decode_begin).
struct MlaDecodeSplit {
  int items = 1;           // work items: context splits x head splits
  int context_splits = 1;  // 1: each item is all of the context for a run of heads
  int head_splits = 1;
  int slots = 1;           // the region decode_items is worth: min(items, threads)
};

struct MlaAttnKernels {
  // Scratch a decode or prefill call needs; independent of the context length.
  std::size_t (*scratch_bytes)(int n_heads, const LatentTileLayout& layout, int threads);
  // The whole calls on the calling thread (planned for a.threads).
  void (*decode)(const MlaDecodeArgs& a);
  void (*prefill)(const MlaPrefillArgs& a);
  // A decode split by its caller, in this order (each phase after the last
  // has finished on every thread), over a.scratch:
  //   decode_begin: the context and head splits (on one thread; a.n_ctx >= 1);
  //   decode_query(h0, h1): the query of heads [h0, h1) prepared, for runs
  //     of heads that together cover all;
  //   decode_items(slot, n_slots): the work items, taken dynamically, from
  //     a region of split.slots slots (or fewer, down to one);
  //     decode_item(item, slot) runs one item instead: items i with
  //     context_splits == 1 cover heads [n_heads*i/items, n_heads*(i+1)/items)
  //     over all of the context, which lets a caller run each head's whole
  //     chain on one thread;
  //   decode_merge(h0, h1): the output of heads [h0, h1).
  // Slots are < a.threads.
  MlaDecodeSplit (*decode_begin)(const MlaDecodeArgs& a);
  void (*decode_query)(const MlaDecodeArgs& a, int h0, int h1);
  void (*decode_items)(const MlaDecodeArgs& a, int slot, int n_slots);
  void (*decode_item)(const MlaDecodeArgs& a, int item, int slot);
  void (*decode_merge)(const MlaDecodeArgs& a, int h0, int h1);
  // A prefill's queries [i0, i1), each as a decode planned for one thread,
  // in the part of a.scratch of `slot` (< a.threads): how a caller runs a
  // prefill of at least a.threads queries (a.threads > 1), the queries taken
  // by its threads. Fewer queries: each as a decode split as above.
  void (*prefill_queries)(const MlaPrefillArgs& a, int i0, int i1, int slot);
};

// Naive on purpose (double accumulation over the dequantized cache rows).
void mla_decode_ref(const MlaDecodeArgs& a);
void mla_prefill_ref(const MlaPrefillArgs& a);

// The table for `isa`; throws std::runtime_error if it is not supported.

// Convenience: active_isa()'s table with a per-thread scratch buffer kept
// between calls (a.scratch is ignored).
void mla_decode(const MlaDecodeArgs& a);
void mla_prefill(const MlaPrefillArgs& a);

// Operation count of one decode step over n_ctx tokens (multiply-add = 2).
double mla_decode_ops(int n_heads, int d_c, int d_R, std::int64_t n_ctx);

// The table for `isa` (kernels/dispatch.h): isa must be supported
// (isa_supported), else throws; the per-ISA tables are defined in
// mla_attn__<isa>.cpp.
LATTE_DECLARE_KERNEL_TABLES(mla_attn, MlaAttnKernels);

}  // namespace latte::kernels
