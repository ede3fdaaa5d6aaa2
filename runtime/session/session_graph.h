// Session::Graph: what one session's forward pass runs with, beside the
// cache: the thread count, the RoPE parameters of its context, the engines
// of the graph's rooms (weight multiply, FFN, MoE, both attention forms)
// and the buffers of one chunk, reused from chunk to chunk. Internal to
// runtime/session (session.cpp builds it, session_forward.cpp runs it).
// Rules: graph_rules.h.
#pragma once

#include <vector>

#include "kernels/isa.h"
#include "runtime/mla/latent_cache.h"
#include "runtime/mla/rope.h"
#include "runtime/session/attention.h"
#include "runtime/session/ffn.h"
#include "runtime/session/aligned_buffer.h"
#include "runtime/model/model_params.h"
#include "runtime/session/moe.h"
#include "runtime/session/session.h"
#include "runtime/session/weight_multiply.h"

namespace latte {

struct Session::Graph {
  Graph(const ModelParams& p, Isa isa, int threads, int gemm_min_tokens, const LatentTileLayout& layout)
      : wm(isa, threads, gemm_min_tokens),
        ffn(wm, isa, p.ffn_kind == FfnKind::swiglu),
        moe(wm, ffn),
        absorbed(wm, isa, p.mla.n_heads, layout),
        naive(isa, threads) {}
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  int threads() const { return wm.threads(); }

  // The chunk buffers below sized for chunks of n tokens and their pages
  // touched, at session creation: the first prefill's page faults paid
  // there (Error(out_of_memory) where they cannot be had).
  void reserve_chunk(const ModelParams& p, int n);

  RopeParams rope;  // the model's, with this context's rope factors
  WeightMultiply wm;
  FeedForward ffn;
  Moe moe;
  AbsorbedAttention absorbed;
  NaiveAttention naive;

  // One chunk of n tokens.
  AlignedBuffer h;        // (n, d) the residual stream
  AlignedBuffer x;        // (n, d) a block's normed input; the output head's
  AlignedBuffer q;        // (n, n_h, d_nope + d_R) queries
  AlignedBuffer cq;       // (n, q_lora) the compressed query
  AlignedBuffer kv;       // (n, d_c + d_R) kv_a: latent | k_pe
  AlignedBuffer c_kv;     // (n, d_c) the latent after its norm
  AlignedBuffer k_pe;     // (n, d_R) the shared RoPE key
  AlignedBuffer o;        // (n, n_h * d_v) attention output
  AlignedBuffer y;        // (n, d) a block's output, added to h
  AlignedBuffer rope_cs;  // (n, d_R) the chunk's rotations: cos | sin
  AlignedBuffer logits;   // (parts, n_vocab) a step's logits, before they go to each session
  AlignedBuffer embd_tile;  // (16, row_bytes) bytes: an x16 embedding table's tile in the file's layout
  std::vector<AttnSpan> spans;  // a step's absorbed parts (Session::forward_step)
};

// One session's rows in Session::forward_step.
struct Session::StepPart {
  Session* s = nullptr;
  std::span<const std::int32_t> tokens;
  float* logits_out = nullptr;  // (n, n_vocab) every token's logits, or null: the last token's to last_logits_
  // Set by forward_step:
  int off = 0;                     // first row in the step's buffers
  std::int64_t p0 = 0;             // the session's n_past_ before the step
  MlaForm form = MlaForm::absorbed;
};

}  // namespace latte
