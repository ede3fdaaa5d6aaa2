// A layer's attention in MLA's two forms (mla-spec.md; docs/design.md, "The
// data path", step 4), over the queries of a chunk and the layer's latent
// cache, whose rows at the chunk's positions are already written:
//  - absorbed (attention_absorbed.cpp): W_UK folded into the queries, the
//    mla_attn kernel over the latent rows, W_UV applied after; decode and
//    prefill;
//  - naive (attention_naive.cpp): K and V decompressed from the latent rows
//    a block at a time by f32 GEMMs, an online softmax per head; prefill.
// Both write o (n, n_h * d_v), refused if it holds a NaN or inf. Internal
// to runtime/session.
//
// Rules (graph_rules.h): bit-identical across thread splits (the heads are
// split, never a head's arithmetic); nothing thrown inside a region;
// failures throw Error, the session rolls back (and truncates the cache).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/isa.h"
#include "kernels/mla_attn/mla_attn.h"
#include "kernels/softmax_f32/softmax_f32.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/mla/mla_config.h"
#include "runtime/session/aligned_buffer.h"
#include "runtime/model/model.h"
#include "runtime/session/weight_multiply.h"

namespace latte {

// Rows [off, off + n) of a step's queries: one sequence's tokens at its
// positions p0.., attending over rows [0, p0 + n) of its layer's cache.
struct AttnSpan {
  int off = 0;
  int n = 0;
  std::int64_t p0 = 0;
  LatentLayerView view{};
};

class AbsorbedAttention {
 public:
  // Sizes the kernel's scratch for the cache's tiles and the threads.
  AbsorbedAttention(WeightMultiply& wm, Isa isa, int n_heads, const LatentTileLayout& layout);
  // o (n, n_h * d_v) for queries q (n, n_h, d_nope + d_R) (RoPE applied):
  // each span's rows over its own cache (spans cover [0, n) in order). W_UK
  // and W_UV are applied to all n rows at once (read once per step), the
  // kernel runs span by span; one token of one sequence runs head by head
  // (attention_absorbed.cpp).
  void run(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, int n,
           std::span<const AttnSpan> spans, float* o);

 private:
  void reserve_scratch(const LatentTileLayout& layout);
  // The kernel's arguments for span sp's one token (n_ctx = sp.p0 + 1), over
  // the reserved scratch.
  kernels::MlaDecodeArgs decode_args(const MlaConfig& m, const AttnSpan& sp, const float* q_lat, const float* q_pe,
                                     float* o_lat);
  // run() for one token of one sequence: each head's chain in few regions.
  void decode_chain(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, const AttnSpan& sp, float* o);

  WeightMultiply& wm_;
  const kernels::MlaAttnKernels* attn_;
  int n_heads_;
  std::vector<std::uint8_t> attn_scratch_;  // the kernel's, for all threads (grown for a span's layout)
  AlignedBuffer q_lat_, q_pe_, o_lat_;       // (n, n_h, d_c), (n, n_h, d_R), (n, n_h, d_c)
};

class NaiveAttention {
 public:
  NaiveAttention(Isa isa, int threads) : smx_(&kernels::softmax_f32_kernels(isa)), threads_(threads) {}
  // As AbsorbedAttention::run, reading the layer's rows from the cache.
  void run(const MlaConfig& m, const LayerWeights& L, int layer, const float* q, int n, std::int64_t p0,
           const LatentCache& cache, float* o);

 private:
  const kernels::SoftmaxF32Kernels* smx_;  // the exponentials
  int threads_;
  // One block of B cached rows (B = kNaiveKeyBlock) and the chunk's online
  // softmax state; shapes at their get() in attention_naive.cpp.
  AlignedBuffer blk_c_, blk_kpe_, blk_k_, blk_v_, acc_, stat_, scores_;
};

}  // namespace latte
