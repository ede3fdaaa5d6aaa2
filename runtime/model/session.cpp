#include "runtime/model/session.h"

#include <omp.h>

#include <algorithm>
#include <functional>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <initializer_list>
#include <limits>
#include <new>
#include <numeric>
#include <string>

#include "kernels/isa.h"
#include "kernels/matvec/matvec.h"
#include "kernels/mla_attn/mla_attn.h"
#include "kernels/softmax_f32/softmax_f32.h"
#include "kernels/swiglu_f32/swiglu_f32.h"
#include "quant/ggml_blocks.h"
#include "platform/alloc_hook.h"
#include "platform/memory.h"
#include "platform/process.h"
#include "runtime/error.h"
#include "runtime/mla/cost_model.h"
#include "runtime/model/expert_parts.h"
#include "runtime/model/gemm_f32.h"

namespace latte {

namespace {

// From this many tokens on, a weight product runs as f32 GEMMs (oneDNN):
// directly on F32 weights, over panels of dequantized rows for the others.
// Below, Latte's kernels, which stream the weights once from memory. The
// thresholds are the measured crossovers of prefill speed (docs/performance.md,
// "Prefill GEMMs"; the runs: docs/performance-log.md): F32 from 160 tokens,
// F16 and BF16 from 320. Never for Q8_0 with SIMD kernels, nor for the other
// packed-GEMM types with AVX-512 VNNI: their packed int8 GEMM beat the f32
// GEMM over dequantized panels at every chunk size (64 int8 products an
// instruction against 16 f32 FMAs). With AVX2 (as many products as FMAs)
// those types switch at 320 like F16; NEON, not timed on hardware, too.
int default_gemm_min_tokens(GgmlType t, Isa isa) {
  // Without oneDNN the row kernels and the packed GEMM are Latte's fastest.
  if (!gemm_f32_is_onednn()) return std::numeric_limits<int>::max();
  if (t == GgmlType::Q8_0 && isa != Isa::ref) return std::numeric_limits<int>::max();
  if (kernels::matvec_has_packed_gemm(t) && isa == Isa::avx512) return std::numeric_limits<int>::max();
  return t == GgmlType::F32 ? 160 : 320;
}
constexpr std::int64_t kGemmPanelRows = 256;

// Index of the first NaN or inf in x[0, n), or n. Exponent bits, OR-reduced
// over blocks so the loop vectorizes: small beside the output product that
// made those logits (docs/performance-log.md, "Figures moved out of runtime comments").
std::size_t first_non_finite(const float* x, std::size_t n) {
  constexpr std::uint32_t kExp = 0x7f800000u;
  constexpr std::size_t kBlock = 1024;
  for (std::size_t b = 0; b < n; b += kBlock) {
    const std::size_t e = std::min(n, b + kBlock);
    std::uint32_t bad = 0;
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, x + i, sizeof(u));
      bad |= (u & kExp) == kExp;
    }
    if (bad)
      for (std::size_t i = b; i < e; ++i)
        if (!std::isfinite(x[i])) return i;
  }
  return n;
}

// Refuses rows (n, width) of one layer, positions p0.., holding a NaN or
// inf, naming the first; `what` names the rows ("latent row", "query").
void refuse_non_finite_rows(const float* rows, int n, std::size_t width, int layer, std::int64_t p0,
                            const char* what = "latent row") {
  const std::size_t count = static_cast<std::size_t>(n) * width;
  if (const std::size_t i = first_non_finite(rows, count); i < count)
    throw Error(Status::bad_file, std::string("the ") + what + " of layer " + std::to_string(layer) + " at position " +
                                      std::to_string(p0 + static_cast<std::int64_t>(i / width)) + " is " +
                                      std::to_string(rows[i]) +
                                      ": the model's weights or hyperparameters overflow float32");
}

// Cached rows per block in the naive form: the decompressed K and V of one
// block stay small (256 x n_h x 256 floats = 4 MiB at 16 heads).
constexpr int kNaiveKeyBlock = 256;

struct AlignedBuffer {
  float* p = nullptr;
  std::size_t n = 0;  // floats
  ~AlignedBuffer() { aligned_free(p); }
  float* get(std::size_t want) {
    if (want > n) {
      // The old buffer stays until the new one exists: a failed
      // allocation leaves a buffer that matches n, and the session usable.
      const std::size_t m = std::max<std::size_t>(want, 16);
      float* q = m > (SIZE_MAX - 63) / sizeof(float) || alloc_should_fail(m * sizeof(float))
                     ? nullptr
                     : static_cast<float*>(aligned_alloc_bytes(64, m * sizeof(float)));
      if (!q) throw Error(Status::out_of_memory, "session scratch: cannot allocate " + std::to_string(m) + " floats");
      aligned_free(p);
      p = q;
      n = m;
    }
    return p;
  }
};

// An exception cannot leave an OpenMP region (the process would terminate):
// each thread runs its part through run(), which keeps the first exception,
// and the caller rethrows it after the region. A kernel compiled for the ref
// ISA allocates, and oneDNN's GEMM can throw std::bad_alloc.
class RegionError {
 public:
  template <class F>
  void run(F&& f) noexcept {
    try {
      f();
    } catch (...) {
      bool expected = false;
      if (failed_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
    }
  }
  bool failed() const { return failed_.load(std::memory_order_relaxed); }
  void rethrow() const {
    if (failed_.load()) std::rethrow_exception(error_);
  }

 private:
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;
};

// f(t) for the rows t in [0, n) of a per-token step, split over the
// threads where there are enough rows to pay for a parallel region (prefill
// chunks; a decode step's one row stays on the calling thread). Each row's
// arithmetic is the same however the rows are split, so results do not
// change. Run serially, these steps (norms, RoPE, SwiGLU, residual adds)
// left the other threads spinning during a prefill chunk. f must not throw
// (an exception cannot leave an OpenMP region).
template <class F>
void for_rows(int n, int threads, F&& f) {
  if (n < 8 || threads <= 1) {
    for (int t = 0; t < n; ++t) f(t);
    return;
  }
#pragma omp parallel for num_threads(threads) schedule(static)
  for (int t = 0; t < n; ++t) f(t);
}

// f(i) for every element i of n rows of `width` floats, split by rows as
// for_rows does.
template <class F>
void for_row_elements(int n, std::size_t width, int threads, F&& f) {
  for_rows(n, threads, [&](int t) {
    for (std::size_t i = static_cast<std::size_t>(t) * width; i < static_cast<std::size_t>(t + 1) * width; ++i) f(i);
  });
}

void rms_norm_rows(const float* x, const float* w, int n, int d, double eps, float* y, std::size_t ld_in,
                   std::size_t ld_out, int threads) {
  for_rows(n, threads, [&](int t) {
    const float* xi = x + t * ld_in;
    double ss = 0;
    for (int i = 0; i < d; ++i) ss += double(xi[i]) * xi[i];
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / d + eps));
    float* yi = y + t * ld_out;
    for (int i = 0; i < d; ++i) yi[i] = xi[i] * inv * w[i];
  });
}

// gemm_f32, a failure thrown (outside OpenMP regions only).
void sgemm(char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A, std::int64_t lda,
           const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (const Status st = gemm_f32(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc); st != Status::ok)
    throw gemm_f32_error(st);
}

// Sets the calling thread's OpenMP team size (which oneDNN's GEMMs follow
// too) for one call and gives the caller's settings back after it. Dynamic
// teams are off meanwhile: oneDNN splits a GEMM for the team size it asks
// for and left the share of threads the runtime did not give unwritten
// (OMP_DYNAMIC=true: wrong logits, no error).
class OmpThreadsScope {
 public:
  explicit OmpThreadsScope(int n) : saved_(omp_get_max_threads()), saved_dynamic_(omp_get_dynamic()) {
    omp_set_dynamic(0);
    omp_set_num_threads(n);
  }
  ~OmpThreadsScope() {
    omp_set_num_threads(saved_);
    omp_set_dynamic(saved_dynamic_);
  }
  OmpThreadsScope(const OmpThreadsScope&) = delete;
  OmpThreadsScope& operator=(const OmpThreadsScope&) = delete;

 private:
  int saved_, saved_dynamic_;
};

}  // namespace

struct Session::Scratch {
  const kernels::MatvecKernels* mv = nullptr;
  const kernels::MlaAttnKernels* attn = nullptr;
  const kernels::SwigluF32Kernels* glu = nullptr;  // SwiGLU gating
  const kernels::SoftmaxF32Kernels* smx = nullptr;  // the naive form's exponentials
  int threads = 1;
  Isa isa = Isa::ref;
  int gemm_min_tokens = 0;  // SessionOptions' override; 0: default_gemm_min_tokens
  bool use_gemm(GgmlType t, int n) const {
    return n >= (gemm_min_tokens > 0 ? gemm_min_tokens : default_gemm_min_tokens(t, isa));
  }
  RopeParams rope;  // the model's, with this context's rope factors

  std::vector<std::uint8_t> mv_scratch;

  // One kernel scratch per thread in mv_scratch, `per` bytes each (rounded
  // up to a cache line, the stride between them); returns the first.
  std::uint8_t* thread_scratch(std::size_t& per) {
    per = (per + 63) / 64 * 64;
    if (mv_scratch.size() < per * threads) mv_scratch.resize(per * threads);
    return mv_scratch.data();
  }

  // Thread t of nt's run [r0, r1) of `rows` rows, in multiples of 16 (the
  // kernels' row tile).
  static void row_run(std::int64_t rows, int t, int nt, std::int64_t& r0, std::int64_t& r1) {
    const std::int64_t tiles = (rows + 15) / 16;
    r0 = std::min(rows, tiles * t / nt * 16);
    r1 = std::min(rows, tiles * (t + 1) / nt * 16);
  }

  // The bytes of kernel scratch an FFN's products over n tokens need.
  static std::size_t ffn_scratch_bytes(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n) {
    std::size_t b = std::max(kernels::matvec_scratch_bytes(up.type, up.cols, n),
                             kernels::matvec_scratch_bytes(down.type, down.cols, n));
    if (!gate.empty()) b = std::max(b, kernels::matvec_scratch_bytes(gate.type, gate.cols, n));
    return b;
  }

  // Whether any of an FFN's products over n tokens goes to oneDNN's GEMM.
  bool ffn_uses_gemm(const WeightRef& gate, const WeightRef& up, const WeightRef& down, int n) const {
    return use_gemm(up.type, n) || use_gemm(down.type, n) || (!gate.empty() && use_gemm(gate.type, n));
  }

  // a[i] = act(gate a[i], up b[i]) for i < n: SwiGLU's silu(a) * b, or
  // relu(b)^2 (a's gate product unused).
  void ffn_activation(bool swiglu, float* a, const float* b, std::size_t n) const {
    if (swiglu) glu->silu_mul(a, b, n);
    else
      for (std::size_t i = 0; i < n; ++i) a[i] = b[i] > 0 ? b[i] * b[i] : 0.f;
  }
  AlignedBuffer h, x, q, cq, kv, c_kv, k_pe, q_lat, q_pe, o_lat, o, rope_cs, ff_a, ff_b, ff_y, router, xe, ye;
  AlignedBuffer blk_c, blk_kpe, blk_k, blk_v, acc, stat, scores, gemm_panel;
  std::vector<std::uint8_t> attn_scratch;

  // Per head h: y_h (n, ldy) = x_h (n, ldx) W_h^T, with x_h = x + h*x_step and
  // y_h = y + h*y_step. Below the GEMM size, one parallel region over the
  // heads (small matrices: a region per head would cost more in fork/join
  // than the product); from it, each head through linear()'s GEMM path.
  void linear_heads(const HeadWeights& w, int heads, const float* x, std::size_t x_step, std::size_t ldx, int n,
                    float* y, std::size_t y_step, std::size_t ldy) {
    if (use_gemm(w.head.type, n)) {
      for (int h = 0; h < heads; ++h) linear(w[h], x + h * x_step, ldx, n, y + h * y_step, ldy);
      return;
    }
    std::size_t per = kernels::matvec_scratch_bytes(w.head.type, w.head.cols, n);
    std::uint8_t* base = thread_scratch(per);
    RegionError err;
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int h = 0; h < heads; ++h) {
      const WeightRef wh = w[h];
      void* scratch = base + per * static_cast<std::size_t>(omp_get_thread_num());
      err.run([&] {
        mv->matmul(wh.type, wh.data, wh.rows, wh.cols, x + h * x_step, ldx, n, y + h * y_step, ldy, scratch, 1);
      });
    }
    err.rethrow();
  }

  struct LinearOut {
    const WeightRef* w;
    float* y;          // (n, ldy)
    std::size_t ldy;
  };

  // y_k (n, ldy_k) = x (n, ldx) W_k^T for weights that share their input (q
  // and kv_a; gate and up), below the GEMM size: one parallel region for all
  // of them, each thread a contiguous run of every matrix's rows. Decode is
  // bound by weight bandwidth and runs ~30 regions per token, so each join
  // saved is measurable, with passive OpenMP waiting most of all.
  void linear_shared(std::initializer_list<LinearOut> outs, const float* x, std::size_t ldx, int n) {
    bool gemm = false;  // any of them: each then takes its own path in linear()
    for (const LinearOut& o : outs) gemm = gemm || use_gemm(o.w->type, n);
    if (gemm || threads <= 1) {
      for (const LinearOut& o : outs) linear(*o.w, x, ldx, n, o.y, o.ldy);
      return;
    }
    std::size_t per = 0;
    for (const LinearOut& o : outs) per = std::max(per, kernels::matvec_scratch_bytes(o.w->type, o.w->cols, n));
    std::uint8_t* base = thread_scratch(per);
    const LinearOut* list = outs.begin();
    const int n_out = static_cast<int>(outs.size());
    RegionError err;
#pragma omp parallel num_threads(threads)
    err.run([&] {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      void* scratch = base + per * static_cast<std::size_t>(t);
      for (int k = 0; k < n_out; ++k) {
        const WeightRef& w = *list[k].w;
        std::int64_t r0, r1;
        row_run(w.rows, t, nt, r0, r1);
        if (r1 <= r0) continue;
        mv->matmul(w.type, w.data + static_cast<std::size_t>(r0) * w.row_bytes, r1 - r0, w.cols, x, ldx, n,
                   list[k].y + r0, list[k].ldy, scratch, 1);
      }
    });
    err.rethrow();
  }

  // One FFN of a decode step's sum: weight * down(act(gate x, up x)).
  struct FfnTerm {
    const WeightRef* gate;  // empty for relu^2
    const WeightRef* up;
    const WeightRef* down;
    float weight;
  };

  // Whether ffn_one_token takes these terms: one token, below the GEMM size.
  bool ffn_one_token_fits(const FfnTerm* terms, int n_terms) const {
    for (int k = 0; k < n_terms; ++k)
      if (ffn_uses_gemm(*terms[k].gate, *terms[k].up, *terms[k].down, 1)) return false;
    return true;
  }

  // y (d) = sum_k weight_k * FFN_k(x (d)) for one token (a dense FFN, or the
  // shared and routed experts of an MoE layer), in one parallel region with
  // one barrier: each thread takes a run of every term's ff rows (gate, up
  // and the activation between them: no barrier there), then a run of every
  // term's output rows. Called as separate products, an MoE layer took ~21
  // regions (3 per expert), and each join waits for the slower thread.
  // Each output row's arithmetic is the same as the products' (same kernels
  // per row, terms added in order), so results are unchanged.
  void ffn_one_token(const FfnTerm* terms, int n_terms, bool swiglu, const float* x, int d, float* y) {
    std::size_t ff_total = 0, per = 0;
    for (int k = 0; k < n_terms; ++k) {
      const FfnTerm& f = terms[k];
      ff_total += static_cast<std::size_t>(f.up->rows);
      per = std::max(per, ffn_scratch_bytes(*f.gate, *f.up, *f.down, 1));
    }
    std::uint8_t* base = thread_scratch(per);
    float* a = ff_a.get(ff_total);  // (sum of ff) each term's activation
    float* b = ff_b.get(ff_total);  // (sum of ff) each term's up product
    float* t_out = ye.get(d);       // (d) one term's output (not ff_y: the caller's y)
    RegionError err;  // each phase in its own run(): every thread must reach the barrier
#pragma omp parallel num_threads(threads) if (threads > 1)
    {
      const int t = omp_get_thread_num(), nt = omp_get_num_threads();
      void* scratch = base + per * static_cast<std::size_t>(t);
      err.run([&] {
        std::size_t off = 0;
        for (int k = 0; k < n_terms; ++k) {
          const FfnTerm& f = terms[k];
          std::int64_t r0, r1;
          row_run(f.up->rows, t, nt, r0, r1);
          float* ak = a + off;
          float* bk = b + off;
          off += static_cast<std::size_t>(f.up->rows);
          if (r1 <= r0) continue;
          const std::size_t nr = static_cast<std::size_t>(r1 - r0);
          mv->matmul(f.up->type, f.up->data + static_cast<std::size_t>(r0) * f.up->row_bytes, nr, f.up->cols, x,
                     f.up->cols, 1, bk + r0, nr, scratch, 1);
          if (swiglu)
            mv->matmul(f.gate->type, f.gate->data + static_cast<std::size_t>(r0) * f.gate->row_bytes, nr,
                       f.gate->cols, x, f.gate->cols, 1, ak + r0, nr, scratch, 1);
          ffn_activation(swiglu, ak + r0, bk + r0, nr);
        }
      });
#pragma omp barrier
      std::int64_t r0, r1;
      row_run(d, t, nt, r0, r1);
      if (r1 > r0 && !err.failed()) err.run([&] {
        const std::size_t nr = static_cast<std::size_t>(r1 - r0);
        std::size_t off = 0;
        for (int k = 0; k < n_terms; ++k) {
          const FfnTerm& f = terms[k];
          mv->matmul(f.down->type, f.down->data + static_cast<std::size_t>(r0) * f.down->row_bytes, nr,
                     f.down->cols, a + off, f.down->cols, 1, t_out + r0, nr, scratch, 1);
          off += static_cast<std::size_t>(f.up->rows);
          const float w = f.weight;
          if (k == 0)
            for (std::int64_t i = r0; i < r1; ++i) y[i] = w * t_out[i];
          else
            for (std::int64_t i = r0; i < r1; ++i) y[i] += w * t_out[i];
        }
      });
    }
    err.rethrow();
  }

  // Per-thread buffers of moe_experts: (tokens, d) input rows, (tokens, ff)
  // gate and up products, the kernels' scratch.
  struct ExpertBuffers {
    AlignedBuffer xe, a, b;
    std::vector<std::uint8_t> scratch;
  };
  std::unique_ptr<ExpertBuffers[]> expert_bufs;  // (threads)
  AlignedBuffer expert_out;                      // (routed pairs, d)

  // Whether moe_experts takes a chunk whose largest expert has max_nt
  // tokens: with more than one thread, below the GEMM size (oneDNN's path
  // shares one panel buffer and runs its own regions).
  bool moe_experts_fits(const LayerWeights& L, int max_nt) const {
    return threads > 1 && !ffn_uses_gemm(L.exp_gate.head, L.exp_up.head, L.exp_down.head, max_nt);
  }

  // y (n, d) += the routed experts' weighted outputs for a chunk of n > 1
  // tokens, each thread taking whole experts (largest first, dynamically)
  // with one-thread products: split by rows, each small expert cost several
  // parallel regions and their joins, where the threads spun (docs/performance-log.md, "Figures moved out of runtime comments").
  // Where the experts'
  // weights take the packed int8 GEMM, an expert with more than
  // kExpertItemTokens tokens goes in equal parts (each >= 64 tokens, so the
  // GEMM takes every part as it takes the whole, with the same bits; the
  // float row kernels' results move with the token count): the threads
  // share it, and their buffers stay bounded. Each
  // expert writes its tokens' rows to their own slots; the slots are then
  // added to y in the serial order (experts ascending), so the sums keep
  // their bits.
  static constexpr int kExpertItemTokens = 128;
  static_assert(kExpertItemTokens / 2 >= static_cast<int>(kernels::kPackedGemmAllTokens));
  void moe_experts(const LayerWeights& L, const std::vector<std::vector<std::pair<int, float>>>& by_expert,
                   bool swiglu, const float* x, int d, float* y) {
    const int ne = static_cast<int>(by_expert.size());
    const int ff = static_cast<int>(L.exp_up.head.rows);
    std::vector<std::size_t> base(static_cast<std::size_t>(ne) + 1, 0);  // first slot of each expert
    struct Item {
      int e, j0, j1;  // expert e's tokens [j0, j1)
    };
    std::vector<Item> items;  // largest first
    int max_nt = 0;           // tokens of the largest item
    const bool split = kernels::matvec_has_packed_gemm(L.exp_up.head.type) &&
                       kernels::matvec_has_packed_gemm(L.exp_down.head.type) &&
                       (L.exp_gate.head.empty() || kernels::matvec_has_packed_gemm(L.exp_gate.head.type));
    for (int e = 0; e < ne; ++e) {
      const int nt = static_cast<int>(by_expert[e].size());
      base[e + 1] = base[e] + static_cast<std::size_t>(nt);
      const int parts = split ? (nt + kExpertItemTokens - 1) / kExpertItemTokens : std::min(nt, 1);
      for (int q = 0; q < parts; ++q) {
        items.push_back({e, expert_part_begin(nt, q, parts), expert_part_begin(nt, q + 1, parts)});
        max_nt = std::max(max_nt, items.back().j1 - items.back().j0);
      }
    }
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.j1 - a.j0 > b.j1 - b.j0; });
    // Everything that can throw (allocation, argument checks) before the region.
    const std::size_t per = ffn_scratch_bytes(L.exp_gate.head, L.exp_up.head, L.exp_down.head, max_nt);
    if (!expert_bufs) expert_bufs = std::make_unique<ExpertBuffers[]>(static_cast<std::size_t>(threads));
    for (int t = 0; t < threads; ++t) {
      ExpertBuffers& eb = expert_bufs[t];
      eb.xe.get(static_cast<std::size_t>(max_nt) * d);
      eb.a.get(static_cast<std::size_t>(max_nt) * ff);
      eb.b.get(static_cast<std::size_t>(max_nt) * ff);
      if (eb.scratch.size() < per) eb.scratch.resize(per);
    }
    float* out = expert_out.get(base[ne] * static_cast<std::size_t>(d));  // (routed pairs, d)
    std::atomic<int> next{0};
    RegionError err;
#pragma omp parallel num_threads(threads)
    err.run([&] {
      ExpertBuffers& eb = expert_bufs[omp_get_thread_num()];
      void* scratch = eb.scratch.data();
      for (int i = next.fetch_add(1); i < static_cast<int>(items.size()) && !err.failed(); i = next.fetch_add(1)) {
        const Item it = items[static_cast<std::size_t>(i)];
        const int e = it.e, nt = it.j1 - it.j0;
        const auto& list = by_expert[e];
        float* xe = eb.xe.p;  // (nt, d)
        float* a = eb.a.p;    // (nt, ff)
        float* b = eb.b.p;    // (nt, ff)
        for (int j = 0; j < nt; ++j)
          std::memcpy(xe + static_cast<std::size_t>(j) * d,
                      x + static_cast<std::size_t>(list[static_cast<std::size_t>(it.j0 + j)].first) * d,
                      sizeof(float) * d);
        const WeightRef up = L.exp_up[e], down = L.exp_down[e];
        mv->matmul(up.type, up.data, up.rows, up.cols, xe, d, nt, b, ff, scratch, 1);
        if (swiglu) {
          const WeightRef gate = L.exp_gate[e];
          mv->matmul(gate.type, gate.data, gate.rows, gate.cols, xe, d, nt, a, ff, scratch, 1);
        }
        ffn_activation(swiglu, a, b, static_cast<std::size_t>(nt) * ff);
        mv->matmul(down.type, down.data, down.rows, down.cols, a, ff, nt,
                   out + (base[e] + static_cast<std::size_t>(it.j0)) * static_cast<std::size_t>(d), d, scratch, 1);
      }
    });
    err.rethrow();
    // The serial order, each thread a run of the columns.
#pragma omp parallel for num_threads(threads) schedule(static)
    for (int c0 = 0; c0 < d; c0 += 64) {
      const int c1 = std::min(d, c0 + 64);
      for (int e = 0; e < ne; ++e) {
        const auto& list = by_expert[e];
        for (std::size_t j = 0; j < list.size(); ++j) {
          float* yt = y + static_cast<std::size_t>(list[j].first) * d;
          const float* src = out + (base[e] + j) * static_cast<std::size_t>(d);
          const float w = list[j].second;
          for (int c = c0; c < c1; ++c) yt[c] += w * src[c];
        }
      }
    }
  }

  // y (n, ldy) = x (n, ldx) W^T for W (rows, cols).
  void linear(const WeightRef& w, const float* x, std::size_t ldx, int n, float* y, std::size_t ldy) {
    if (use_gemm(w.type, n)) {
      if (w.type == GgmlType::F32 && w.row_bytes == static_cast<std::size_t>(w.cols) * 4) {
        sgemm('T', n, w.rows, w.cols, 1.f, x, static_cast<std::int64_t>(ldx), reinterpret_cast<const float*>(w.data),
              w.cols, 0.f, y, static_cast<std::int64_t>(ldy));
        return;
      }
      float* panel = gemm_panel.get(static_cast<std::size_t>(kGemmPanelRows) * w.cols);  // (rows, cols)
      for (std::int64_t r0 = 0; r0 < w.rows; r0 += kGemmPanelRows) {
        const std::int64_t nr = std::min(kGemmPanelRows, w.rows - r0);
        // Each thread dequantizes a run of the panel's rows: on one thread
        // the others spun meanwhile (docs/performance-log.md, "Figures moved out of runtime comments"). An exception cannot leave the region: carried out of it.
        std::exception_ptr failed;
#pragma omp parallel for num_threads(threads) schedule(static)
        for (int t = 0; t < threads; ++t) {
          const std::int64_t a = nr * t / threads, b = nr * (t + 1) / threads;
          try {
            if (b > a)
              mv->dequantize(w.type, w.data + static_cast<std::size_t>(r0 + a) * w.row_bytes,
                             panel + static_cast<std::size_t>(a) * w.cols, static_cast<std::size_t>(b - a) * w.cols);
          } catch (...) {
#pragma omp critical(latte_dequantize_failed)
            failed = std::current_exception();
          }
        }
        if (failed) std::rethrow_exception(failed);
        sgemm('T', n, nr, w.cols, 1.f, x, static_cast<std::int64_t>(ldx), panel, w.cols, 0.f, y + r0,
              static_cast<std::int64_t>(ldy));
      }
      return;
    }
    const std::size_t need = kernels::matvec_scratch_bytes(w.type, w.cols, n);
    if (mv_scratch.size() < need) mv_scratch.resize(need);
    mv->matmul(w.type, w.data, w.rows, w.cols, x, ldx, n, y, ldy, mv_scratch.data(), threads);
  }
};

int Session::threads() const { return s_->threads; }

Session::Session(std::shared_ptr<const Model> model, const SessionOptions& opts)
    : model_(std::move(model)),
      opts_(opts),
      cache_([&] {
        const ModelParams& p = model_->params();
        opts_.n_ctx = p.resolve_n_ctx(opts_.n_ctx);
        if (opts_.prefill_chunk <= 0)
          throw Error(Status::invalid_argument, "prefill_chunk must be > 0");
        if (opts_.threads < 0 || opts_.threads > kMaxThreads)
          throw Error(Status::invalid_argument, "threads " + std::to_string(opts_.threads) + " is outside [0, " +
                                                    std::to_string(kMaxThreads) + "]");
        if (opts_.gemm_min_tokens < 0) throw Error(Status::invalid_argument, "gemm_min_tokens must be >= 0");
        if (opts_.n_ctx > kMaxContextTokens)
          throw Error(Status::invalid_argument, "n_ctx " + std::to_string(opts_.n_ctx) + " is above the limit of " +
                                                    std::to_string(kMaxContextTokens) + " tokens");
        LatentCacheConfig c;
        c.n_layers = p.n_layers;
        c.d_c = p.mla.kv_lora_rank;
        c.d_R = p.mla.d_rope;
        c.max_tokens = opts_.n_ctx;
        c.storage = opts_.cache;
        return c;
      }()),
      s_(std::make_unique<Scratch>()) {
  const ModelParams& p = model_->params();
  const Isa isa = active_isa();
  s_->isa = isa;
  s_->mv = &kernels::matvec_kernels(isa);
  s_->attn = &kernels::mla_attn_kernels(isa);
  s_->glu = &kernels::swiglu_f32_kernels(isa);
  s_->smx = &kernels::softmax_f32_kernels(isa);
  // At most what OpenMP will give (OMP_THREAD_LIMIT: a larger team comes
  // out smaller, and oneDNN's GEMMs would skip the missing threads' share)
  // and kMaxThreads (OMP_NUM_THREADS may say more).
  s_->threads = std::min({opts_.threads > 0 ? opts_.threads : omp_get_max_threads(), omp_get_thread_limit(), kMaxThreads});
  s_->gemm_min_tokens = opts_.gemm_min_tokens;
  // oneDNN builds its GEMM kernels on its first call, inside its own
  // parallel region, where a failed allocation would end the process: built
  // here once, on one thread, where it is an error like any other.
  preload_unwinder();
  static std::atomic<bool> gemm_built{false};
  if (gemm_f32_is_onednn() && !gemm_built.load()) {
    constexpr std::size_t kGemmBuildBytes = std::size_t{32} << 20;
    // oneDNN's kernel generator crashes (SIGSEGV) where it cannot map the
    // memory it needs: refused first where a generous share is not there.
    if (!address_space_available(kGemmBuildBytes))
      throw Error(Status::out_of_memory, "oneDNN sgemm: cannot reserve " + std::to_string(kGemmBuildBytes >> 20) +
                                             " MiB to build its kernels in");
    const OmpThreadsScope one(1);
    std::vector<float> m(3 * 32 * 32, 0.f);
    try {
      sgemm('T', 32, 32, 32, 1.f, m.data(), 32, m.data() + 1024, 32, 0.f, m.data() + 2048, 32);
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, "oneDNN sgemm: out of memory building its kernels");
    }
    gemm_built = true;
  }
  s_->attn_scratch.resize(s_->attn->scratch_bytes(p.mla.n_heads, cache_.layout(), s_->threads));
  s_->rope = p.mla.rope;
  s_->rope.freq_factors = model_->rope_factors(p.rope_long_factors(opts_.n_ctx));
  last_logits_.assign(p.n_vocab, 0.f);
  prev_logits_.assign(p.n_vocab, 0.f);
}

Session::~Session() = default;

void Session::reset() {
  cache_.truncate(0);
  n_past_ = 0;
  unshifted_limit_ = kMaxContextTokens;
  tokens_.clear();
  has_logits_ = false;
  std::fill(last_logits_.begin(), last_logits_.end(), 0.f);
}

void Session::truncate(std::int64_t n_tokens) {
  if (n_tokens < 0 || n_tokens > n_past_)
    throw Error(Status::invalid_argument, "truncate: " + std::to_string(n_tokens) + " is outside [0, " +
                                              std::to_string(n_past_) + "]");
  cache_.truncate(n_tokens);
  if (n_tokens < n_past_) has_logits_ = false;
  n_past_ = n_tokens;
  tokens_.resize(static_cast<std::size_t>(n_tokens));
  // Rows written from here on see only rows a fresh prefill gives.
  if (n_tokens <= unshifted_limit_) unshifted_limit_ = kMaxContextTokens;
}

void Session::shift(std::int64_t n_keep, std::int64_t n_discard) {
  if (n_keep < 0 || n_discard < 0 || n_keep > n_past_ - n_discard)
    throw Error(Status::invalid_argument, "shift: keeping " + std::to_string(n_keep) + " and dropping " +
                                              std::to_string(n_discard) + " tokens: both must be >= 0 and their sum " +
                                              "at most the " + std::to_string(n_past_) + " tokens held");
  if (n_discard == 0) return;
  if (n_keep + n_discard == n_past_) return truncate(n_keep);  // nothing moves
  // Every RoPE angle is linear in the position: turning a row by
  // -n_discard positions is what rotating it at its new position gives.
  const RopeTurn turn = rope_turn(s_->rope, -static_cast<double>(n_discard));
  const OmpThreadsScope team(s_->threads);
  cache_.shift(n_keep, n_discard, turn, s_->threads);
  tokens_.erase(tokens_.begin() + n_keep, tokens_.begin() + n_keep + n_discard);
  n_past_ -= n_discard;
  unshifted_limit_ = std::min(unshifted_limit_, n_keep);
}

std::int64_t Session::make_room(std::int64_t n_new, std::int64_t n_keep) {
  const std::int64_t need = n_past_ + n_new - opts_.n_ctx;
  if (need <= 0) return 0;
  const std::int64_t keep = std::clamp<std::int64_t>(n_keep, 0, n_past_);
  const std::int64_t left = n_past_ - keep;
  if (need > left)
    throw Error(Status::context_overflow,
                std::to_string(n_new) + " new tokens do not fit the context of " + std::to_string(opts_.n_ctx) +
                    " even with only the first " + std::to_string(keep) + " of the " + std::to_string(n_past_) +
                    " tokens in the cache kept");
  const std::int64_t drop = std::max(left / 2, need);
  shift(keep, drop);
  return drop;
}

void Session::decode(std::int32_t token) { prefill(std::span<const std::int32_t>(&token, 1)); }

void Session::prefill(std::span<const std::int32_t> tokens, std::vector<float>* all_logits) {
  const ModelParams& p = model_->params();
  if (tokens.empty()) throw Error(Status::invalid_argument, "no tokens to evaluate");
  // The session's own tokens() (say, to compute them again elsewhere): its
  // storage may move when it grows below, so read a copy.
  const std::less<const std::int32_t*> before;  // a total order, unlike < on unrelated pointers
  if (!tokens_.empty() && !before(tokens.data(), tokens_.data()) && before(tokens.data(), tokens_.data() + tokens_.size())) {
    const std::vector<std::int32_t> copy(tokens.begin(), tokens.end());
    return prefill(copy, all_logits);
  }
  for (std::size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= p.n_vocab)
      throw Error(Status::invalid_argument, "tokens[" + std::to_string(i) + "] = " + std::to_string(tokens[i]) +
                                                " is outside the vocabulary [0, " + std::to_string(p.n_vocab) + ")");
  const std::int64_t n_new = static_cast<std::int64_t>(tokens.size());
  const bool shift_first = opts_.context_shift && n_past_ + n_new > opts_.n_ctx &&
                           n_new <= opts_.n_ctx - std::clamp<std::int64_t>(opts_.shift_keep, 0, n_past_);
  if (n_past_ + n_new > opts_.n_ctx && !shift_first)
    throw Error(Status::context_overflow,
                std::to_string(n_past_) + " tokens in the cache + " + std::to_string(tokens.size()) +
                    " new would exceed the context of " + std::to_string(opts_.n_ctx));
  if (all_logits) {
    const std::size_t count = tokens.size() * static_cast<std::size_t>(p.n_vocab);
    try {
      all_logits->resize(count);
    } catch (const std::bad_alloc&) {
      throw Error(Status::out_of_memory, "the logits of " + std::to_string(tokens.size()) +
                                             " tokens: cannot allocate " + std::to_string(count * sizeof(float)) +
                                             " bytes");
    }
  }
  // The shift is the last step that can refuse the call; it stays if the
  // evaluation below then fails (out of memory, a non-finite logit).
  if (shift_first) make_room(n_new, opts_.shift_keep);
  const std::int64_t p0 = n_past_;
  // Room first, so the append after the forward pass cannot throw; grown
  // geometrically, or a decode step would copy the whole history.
  if (const std::size_t need = static_cast<std::size_t>(p0) + tokens.size(); tokens_.capacity() < need)
    tokens_.reserve(std::max(need, 2 * tokens_.capacity()));
  const OmpThreadsScope team(s_->threads);
  // The new logits go to the other buffer, so that on any error (below, or
  // out of memory in a later chunk) the session is back where it was,
  // logits included.
  last_logits_.swap(prev_logits_);
  try {
    for (std::size_t at = 0; at < tokens.size(); at += opts_.prefill_chunk) {
      const std::size_t n = std::min<std::size_t>(opts_.prefill_chunk, tokens.size() - at);
      float* out = all_logits ? all_logits->data() + at * p.n_vocab : nullptr;
      forward_chunk(tokens.subspan(at, n), out, all_logits != nullptr);
      // A NaN or inf anywhere upstream (a weight in the file, an overflow)
      // reaches the logits: refuse them rather than hand garbage to a sampler.
      const float* lg = all_logits ? out : last_logits_.data();
      const std::size_t count = all_logits ? n * p.n_vocab : p.n_vocab;
      if (const std::size_t i = first_non_finite(lg, count); i < count) {
        const std::int64_t pos = n_past_ - static_cast<std::int64_t>(all_logits ? n - i / p.n_vocab : 1);
        throw Error(Status::bad_file, "logit " + std::to_string(i % p.n_vocab) + " at position " +
                                          std::to_string(pos) + " is " + std::to_string(lg[i]) +
                                          ": the model's weights or hyperparameters overflow float32 "
                                          "(the session is back at " + std::to_string(p0) + " tokens)");
      }
    }
  } catch (...) {
    cache_.truncate(p0);
    n_past_ = p0;
    last_logits_.swap(prev_logits_);
    throw;
  }
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  has_logits_ = true;
}

void Session::forward_chunk(std::span<const std::int32_t> tokens, float* logits_out, bool all_logits) {
  const ModelParams& p = model_->params();
  const MlaConfig& m = p.mla;
  Scratch& s = *s_;
  const int n = static_cast<int>(tokens.size());
  const int d = m.d_model, nh = m.n_heads, qh = m.q_head_dim(), dn = m.d_nope, dr = m.d_rope;
  const int dc = m.kv_lora_rank, dv = m.d_v, ql = m.q_lora_rank, V = p.n_vocab;
  const std::int64_t p0 = n_past_;
  const float scale = static_cast<float>(m.kq_scale());

  // Form for this chunk: decode is always absorbed (the kernel's job).
  MlaForm form = MlaForm::absorbed;
  if (n > 1) {
    if (opts_.prefill_form) form = *opts_.prefill_form;
    else
      form = mla_pick_form(m, n, p0,
                           mla_absorbed_pair_cost(opts_.cache == LatentStorage::int8, active_isa() == Isa::avx512),
                           gemm_f32_is_onednn() ? 1.0 : kOwnGemmCost);
  }
  last_form_ = form;

  // RoPE angles of this chunk's positions: (n, d_R/2) cos and sin.
  float* rope_cs = s.rope_cs.get(static_cast<std::size_t>(n) * dr);  // (n, cos | sin)
  {
    std::vector<double> theta(dr / 2);
    for (int t = 0; t < n; ++t) {
      rope_angles(s.rope, static_cast<double>(p0 + t), theta.data());
      for (int i = 0; i < dr / 2; ++i) {
        rope_cs[t * dr + i] = static_cast<float>(std::cos(theta[i]) * s.rope.attn_factor);
        rope_cs[t * dr + dr / 2 + i] = static_cast<float>(std::sin(theta[i]) * s.rope.attn_factor);
      }
    }
  }
  auto rope = [&](float* v, int t) {
    const float* c = rope_cs + t * dr;
    const float* sn = c + dr / 2;
    const bool pairs = s.rope.style == RopeStyle::consecutive_pairs;
    for (int i = 0; i < dr / 2; ++i) {
      const int a = pairs ? 2 * i : i, b = pairs ? 2 * i + 1 : i + dr / 2;
      const float x0 = v[a], x1 = v[b];
      v[a] = x0 * c[i] - x1 * sn[i];
      v[b] = x0 * sn[i] + x1 * c[i];
    }
  };

  float* h = s.h.get(static_cast<std::size_t>(n) * d);  // (n, d) residual stream
  auto add_residual = [&](const float* y) {  // h += y * residual_scale, y (n, d)
    for_row_elements(n, d, s.threads, [&](std::size_t i) { h[i] += y[i] * p.residual_scale; });
  };
  const WeightRef& emb = model_->token_embd();
  for (int t = 0; t < n; ++t) {  // serial: dequantize_row_ref may throw (not here: the type was checked at load)
    dequantize_row_ref(emb.type, emb.data + static_cast<std::size_t>(tokens[t]) * emb.row_bytes,
                       h + static_cast<std::size_t>(t) * d, d);
    if (p.embed_scale != 1.f)
      for (int i = 0; i < d; ++i) h[static_cast<std::size_t>(t) * d + i] *= p.embed_scale;
  }

  float* x = s.x.get(static_cast<std::size_t>(n) * d);             // (n, d)
  float* q = s.q.get(static_cast<std::size_t>(n) * nh * qh);       // (n, n_h, d_nope + d_R)
  float* kv = s.kv.get(static_cast<std::size_t>(n) * (dc + dr));   // (n, d_c + d_R)
  float* c_kv = s.c_kv.get(static_cast<std::size_t>(n) * dc);      // (n, d_c)
  float* k_pe = s.k_pe.get(static_cast<std::size_t>(n) * dr);      // (n, d_R)
  float* o = s.o.get(static_cast<std::size_t>(n) * nh * dv);       // (n, n_h * d_v)
  float* y = s.ff_y.get(static_cast<std::size_t>(n) * d);          // (n, d)

  for (int il = 0; il < p.n_layers; ++il) {
    const LayerWeights& L = model_->layer(il);
    // --- attention
    rms_norm_rows(h, L.attn_norm, n, d, m.rms_eps, x, d, d, s.threads);
    if (!L.wq_a.empty()) {
      float* cq = s.cq.get(static_cast<std::size_t>(n) * ql);  // (n, q_lora)
      s.linear_shared({{&L.wq_a, cq, static_cast<std::size_t>(ql)}, {&L.wkv_a, kv, static_cast<std::size_t>(dc + dr)}},
                      x, d, n);
      rms_norm_rows(cq, L.q_a_norm, n, ql, m.rms_eps, cq, ql, ql, s.threads);
      s.linear(L.wq_b, cq, ql, n, q, static_cast<std::size_t>(nh) * qh);
    } else {
      s.linear_shared({{&L.wq, q, static_cast<std::size_t>(nh) * qh}, {&L.wkv_a, kv, static_cast<std::size_t>(dc + dr)}},
                      x, d, n);
    }
    for_rows(n, s.threads, [&](int t) {
      float* kvt = kv + static_cast<std::size_t>(t) * (dc + dr);
      rms_norm_rows(kvt, L.kv_a_norm, 1, dc, m.rms_eps, c_kv + static_cast<std::size_t>(t) * dc, dc, dc, 1);
      rope(kvt + dc, t);
      std::memcpy(k_pe + static_cast<std::size_t>(t) * dr, kvt + dc, sizeof(float) * dr);
      for (int hd = 0; hd < nh; ++hd) rope(q + (static_cast<std::size_t>(t) * nh + hd) * qh + dn, t);
    });
    // A NaN or inf row must not enter the cache: later positions would read
    // it (the int8 kernel's clamped exponentials could even hide it from
    // the logits), and a saved session holding it is refused at load.
    refuse_non_finite_rows(c_kv, n, dc, il, p0);
    refuse_non_finite_rows(k_pe, n, dr, il, p0);
    // Likewise the queries and (below) the attention's output: the int8
    // kernels quantize queries and clamp exponentials, so a NaN, inf or
    // overflowing score there could come out finite but wrong.
    refuse_non_finite_rows(q, n, static_cast<std::size_t>(nh) * qh, il, p0, "query");
    cache_.write(il, p0, n, c_kv, k_pe);
    const LatentLayerView view = cache_.view(il);

    if (form == MlaForm::absorbed) {
      float* q_lat = s.q_lat.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
      float* q_pe = s.q_pe.get(static_cast<std::size_t>(n) * nh * dr);    // (n, n_h, d_R)
      float* o_lat = s.o_lat.get(static_cast<std::size_t>(n) * nh * dc);  // (n, n_h, d_c)
      // q_lat_h = W_UK_h^T q_nope_h
      s.linear_heads(L.wuk_t, nh, q, qh, static_cast<std::size_t>(nh) * qh, n, q_lat, dc,
                     static_cast<std::size_t>(nh) * dc);
      refuse_non_finite_rows(q_lat, n, static_cast<std::size_t>(nh) * dc, il, p0, "latent query");
      for (int t = 0; t < n; ++t)
        for (int hd = 0; hd < nh; ++hd)
          std::memcpy(q_pe + (static_cast<std::size_t>(t) * nh + hd) * dr,
                      q + (static_cast<std::size_t>(t) * nh + hd) * qh + dn, sizeof(float) * dr);
      if (n == 1) {
        kernels::MlaDecodeArgs a;
        a.n_heads = nh;
        a.q_lat = q_lat;
        a.q_pe = q_pe;
        a.scale = scale;
        a.cache = view;
        a.n_ctx = p0 + 1;
        a.out = o_lat;
        a.threads = s.threads;
        a.scratch = s.attn_scratch.data();
        s.attn->decode(a);
      } else {
        kernels::MlaPrefillArgs a;
        a.n_heads = nh;
        a.n_q = n;
        a.p0 = p0;
        a.q_lat = q_lat;
        a.q_pe = q_pe;
        a.scale = scale;
        a.cache = view;
        a.out = o_lat;
        a.threads = s.threads;
        a.scratch = s.attn_scratch.data();
        s.attn->prefill(a);
      }
      refuse_non_finite_rows(o_lat, n, static_cast<std::size_t>(nh) * dc, il, p0, "attention output");
      // o_h = W_UV_h o_lat_h
      s.linear_heads(L.wuv, nh, o_lat, dc, static_cast<std::size_t>(nh) * dc, n, o, dv,
                     static_cast<std::size_t>(nh) * dv);
    } else {
      // Naive form, a block of cached rows at a time: decompress K and V
      // for the block (once for all the chunk's queries), then per head an
      // online softmax over the blocks. (n, n_h) running max and sum.
      const std::int64_t n_rows = p0 + n;
      const int B = kNaiveKeyBlock;
      float* blk_c = s.blk_c.get(static_cast<std::size_t>(B) * dc);                // (B, d_c)
      float* blk_kpe = s.blk_kpe.get(static_cast<std::size_t>(B) * dr);            // (B, d_R)
      float* blk_k = s.blk_k.get(static_cast<std::size_t>(B) * nh * dn);           // (B, n_h, d_nope)
      float* blk_v = s.blk_v.get(static_cast<std::size_t>(B) * nh * dv);           // (B, n_h, d_v)
      float* acc = s.acc.get(static_cast<std::size_t>(n) * nh * dv);               // (n, n_h, d_v)
      float* stat = s.stat.get(static_cast<std::size_t>(n) * nh * 2);              // (n, n_h, {max, sum})
      float* scores = s.scores.get(static_cast<std::size_t>(s.threads) * n * B);  // per thread (n, B)
      std::fill(acc, acc + static_cast<std::size_t>(n) * nh * dv, 0.f);
      for (std::size_t i = 0; i < static_cast<std::size_t>(n) * nh; ++i) {
        stat[2 * i] = -INFINITY;
        stat[2 * i + 1] = 0.f;
      }
      for (std::int64_t j0 = 0; j0 < n_rows; j0 += B) {
        const int nb = static_cast<int>(std::min<std::int64_t>(B, n_rows - j0));
        for (int j = 0; j < nb; ++j)
          cache_.read_row(il, j0 + j, blk_c + static_cast<std::size_t>(j) * dc, blk_kpe + static_cast<std::size_t>(j) * dr);
        // K_nope (nb, n_h*d_nope) = C W_UK^T ; V (nb, n_h*d_v) = C W_UV^T
        sgemm('T', nb, static_cast<std::int64_t>(nh) * dn, dc, 1.f, blk_c, dc, L.naive_wuk, dc, 0.f, blk_k,
              static_cast<std::int64_t>(nh) * dn);
        sgemm('T', nb, static_cast<std::int64_t>(nh) * dv, dc, 1.f, blk_c, dc, L.naive_wuv, dc, 0.f, blk_v,
              static_cast<std::int64_t>(nh) * dv);
        // Queries that see none of this block (j0 > p0 + i) are skipped.
        const int i0 = static_cast<int>(std::max<std::int64_t>(0, j0 - p0));
        const int nq = n - i0;
        if (nq <= 0) continue;
        // An exception cannot leave an OpenMP region (it would terminate the
        // process): a failed GEMM is recorded, and thrown after the region.
        std::atomic<int> gemm_status{static_cast<int>(Status::ok)};
        auto gemm = [&](char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                        std::int64_t lda, const float* Bm, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
          const Status st = gemm_f32(tb, M, N, K, alpha, A, lda, Bm, ldb, beta, C, ldc);
          if (st != Status::ok) gemm_status.store(static_cast<int>(st));
          return st == Status::ok;
        };
        RegionError err;  // what oneDNN throws (std::bad_alloc) rather than returns
#pragma omp parallel for num_threads(s.threads) schedule(dynamic, 1)
        for (int hd = 0; hd < nh; ++hd) err.run([&] {
          if (gemm_status.load(std::memory_order_relaxed) != static_cast<int>(Status::ok) || err.failed()) return;
          float* S = scores + static_cast<std::size_t>(omp_get_thread_num()) * n * B;  // (nq, nb)
          const float* qh0 = q + (static_cast<std::size_t>(i0) * nh + hd) * qh;
          if (!gemm('T', nq, nb, dn, scale, qh0, static_cast<std::int64_t>(nh) * qh,
                    blk_k + static_cast<std::size_t>(hd) * dn, static_cast<std::int64_t>(nh) * dn, 0.f, S, nb) ||
              !gemm('T', nq, nb, dr, scale, qh0 + dn, static_cast<std::int64_t>(nh) * qh, blk_kpe, dr, 1.f, S, nb))
            return;
          for (int i = 0; i < nq; ++i) {
            float* Si = S + static_cast<std::size_t>(i) * nb;
            const std::int64_t visible = std::min<std::int64_t>(nb, p0 + i0 + i + 1 - j0);  // causal
            float* st = stat + (static_cast<std::size_t>(i0 + i) * nh + hd) * 2;
            float mx = st[0];
            for (std::int64_t j = 0; j < visible; ++j) mx = std::max(mx, Si[j]);
            const float corr = std::exp(st[0] - mx);  // 0 on the first block (-inf)
            const float sum = s.smx->exp_shift_sum(Si, static_cast<std::size_t>(visible), mx);
            for (std::int64_t j = visible; j < nb; ++j) Si[j] = 0.f;
            float* ai = acc + (static_cast<std::size_t>(i0 + i) * nh + hd) * dv;
            for (int k = 0; k < dv; ++k) ai[k] *= corr;
            st[0] = mx;
            st[1] = st[1] * corr + sum;
          }
          // acc (nq, d_v) += P (nq, nb) V_h (nb, d_v)
          gemm('N', nq, dv, nb, 1.f, S, nb, blk_v + static_cast<std::size_t>(hd) * dv,
               static_cast<std::int64_t>(nh) * dv, 1.f, acc + (static_cast<std::size_t>(i0) * nh + hd) * dv,
               static_cast<std::int64_t>(nh) * dv);
        });
        err.rethrow();
        if (const int st = gemm_status.load(); st != static_cast<int>(Status::ok))
          throw gemm_f32_error(static_cast<Status>(st));
      }
      for (std::size_t i = 0; i < static_cast<std::size_t>(n) * nh; ++i) {
        const float inv = 1.f / stat[2 * i + 1];
        for (int k = 0; k < dv; ++k) o[i * dv + k] = acc[i * dv + k] * inv;
      }
      refuse_non_finite_rows(o, n, static_cast<std::size_t>(nh) * dv, il, p0, "attention output");
    }
    s.linear(L.wo, o, static_cast<std::size_t>(nh) * dv, n, y, d);
    add_residual(y);

    // --- feed-forward
    rms_norm_rows(h, L.ffn_norm, n, d, m.rms_eps, x, d, d, s.threads);
    const bool swiglu = p.ffn_kind == FfnKind::swiglu;
    auto ffn = [&](const WeightRef& gate, const WeightRef& up, const WeightRef& down, const float* xin, int nt,
                   float* out) {
      const int ff = static_cast<int>(up.rows);
      float* a = s.ff_a.get(static_cast<std::size_t>(nt) * ff);  // (nt, ff)
      float* b = s.ff_b.get(static_cast<std::size_t>(nt) * ff);  // (nt, ff)
      if (swiglu)
        s.linear_shared({{&up, b, static_cast<std::size_t>(ff)}, {&gate, a, static_cast<std::size_t>(ff)}}, xin, d, nt);
      else
        s.linear(up, xin, d, nt, b, ff);
      for_rows(nt, s.threads, [&](int t) {
        const std::size_t o = static_cast<std::size_t>(t) * ff;
        s.ffn_activation(swiglu, a + o, b + o, static_cast<std::size_t>(ff));
      });
      s.linear(down, a, ff, nt, out, d);
    };
    if (!p.is_moe_layer(il)) {
      const Scratch::FfnTerm term{&L.dense.gate, &L.dense.up, &L.dense.down, 1.f};
      if (n == 1 && s.ffn_one_token_fits(&term, 1)) s.ffn_one_token(&term, 1, swiglu, x, d, y);
      else ffn(L.dense.gate, L.dense.up, L.dense.down, x, n, y);
    } else {
      const int ne = p.n_experts, k = p.n_experts_used;
      float* logits = s.router.get(static_cast<std::size_t>(n) * ne);  // (n, n_exp)
      s.linear(L.gate_inp, x, d, n, logits, ne);
      // Route: per token the top-k experts and their weights.
      std::vector<std::vector<std::pair<int, float>>> by_expert(ne);  // expert -> (token, weight)
      std::vector<float> prob(ne), sel(ne);
      std::vector<int> idx(ne);
      for (int t = 0; t < n; ++t) {
        const float* lg = logits + static_cast<std::size_t>(t) * ne;
        if (p.gating == GatingFunc::softmax) {
          const float mx = *std::max_element(lg, lg + ne);
          float sum = 0;
          for (int e = 0; e < ne; ++e) sum += (prob[e] = std::exp(lg[e] - mx));
          for (auto& v : prob) v /= sum;
        } else {
          for (int e = 0; e < ne; ++e) prob[e] = 1.f / (1.f + std::exp(-lg[e]));
        }
        // NaN scores (numbers that overflowed) sort as -inf: the sorts need a
        // strict weak order; the NaN still reaches the logits through prob.
        for (int e = 0; e < ne; ++e) {
          sel[e] = prob[e] + (L.exp_bias ? L.exp_bias[e] : 0.f);
          if (std::isnan(sel[e])) sel[e] = -INFINITY;
        }
        if (p.n_expert_groups > 1) {
          const int ng = p.n_expert_groups, per = ne / ng;
          std::vector<float> gs(ng);
          for (int g = 0; g < ng; ++g) {
            float a = -INFINITY, b = -INFINITY;  // top two in the group
            for (int e = g * per; e < (g + 1) * per; ++e) {
              if (sel[e] > a) { b = a; a = sel[e]; } else if (sel[e] > b) b = sel[e];
            }
            gs[g] = a + (per > 1 ? b : 0.f);
          }
          std::vector<int> order(ng);
          std::iota(order.begin(), order.end(), 0);
          std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return gs[a] > gs[b]; });
          for (int r = p.n_expert_groups_used; r < ng; ++r)
            for (int e = order[r] * per; e < (order[r] + 1) * per; ++e) sel[e] = -INFINITY;
        }
        std::iota(idx.begin(), idx.end(), 0);
        std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int a, int b) {
          return sel[a] > sel[b] || (sel[a] == sel[b] && a < b);
        });
        float wsum = 0;
        for (int j = 0; j < k; ++j) wsum += prob[idx[j]];
        for (int j = 0; j < k; ++j) {
          float w = prob[idx[j]];
          if (p.expert_weights_norm) w /= std::max(wsum, 6.103515625e-5f);
          if (p.expert_weights_scale != 0.f && p.expert_weights_scale != 1.f) w *= p.expert_weights_scale;
          by_expert[idx[j]].push_back({t, w});
        }
      }
      // One token: the shared FFN and the routed experts (ascending, as
      // below) as one sum, in one parallel region.
      std::vector<WeightRef> routed;  // (k, {gate, up, down}); terms point into it
      std::vector<Scratch::FfnTerm> terms;
      if (n == 1) {
        routed.reserve(static_cast<std::size_t>(3 * k));  // no reallocation below
        terms.reserve(static_cast<std::size_t>(k + 1));
        if (!L.shared.up.empty()) terms.push_back({&L.shared.gate, &L.shared.up, &L.shared.down, 1.f});
        for (int e = 0; e < ne; ++e) {
          if (by_expert[e].empty()) continue;
          routed.insert(routed.end(), {L.exp_gate[e], L.exp_up[e], L.exp_down[e]});
          const WeightRef* r = &routed[routed.size() - 3];
          terms.push_back({r, r + 1, r + 2, by_expert[e][0].second});
        }
      }
      if (n == 1 && s.ffn_one_token_fits(terms.data(), static_cast<int>(terms.size()))) {
        s.ffn_one_token(terms.data(), static_cast<int>(terms.size()), swiglu, x, d, y);
      } else {
        if (!L.shared.up.empty()) ffn(L.shared.gate, L.shared.up, L.shared.down, x, n, y);
        else std::fill(y, y + static_cast<std::size_t>(n) * d, 0.f);
        std::size_t max_nt = 0;
        for (const auto& list : by_expert) max_nt = std::max(max_nt, list.size());
        if (s.moe_experts_fits(L, static_cast<int>(max_nt))) {
          s.moe_experts(L, by_expert, swiglu, x, d, y);
        } else {
          // Each expert runs once over the tokens routed to it.
          float* xe = s.xe.get(static_cast<std::size_t>(n) * d);  // (tokens of expert e, d)
          float* ye = s.ye.get(static_cast<std::size_t>(n) * d);  // (tokens of expert e, d)
          for (int e = 0; e < ne; ++e) {
            const auto& list = by_expert[e];
            if (list.empty()) continue;
            const int nt = static_cast<int>(list.size());
            for (int j = 0; j < nt; ++j)
              std::memcpy(xe + static_cast<std::size_t>(j) * d, x + static_cast<std::size_t>(list[j].first) * d,
                          sizeof(float) * d);
            ffn(L.exp_gate[e], L.exp_up[e], L.exp_down[e], xe, nt, ye);
            for (int j = 0; j < nt; ++j) {
              float* yt = y + static_cast<std::size_t>(list[j].first) * d;
              const float* src = ye + static_cast<std::size_t>(j) * d;
              for (int i = 0; i < d; ++i) yt[i] += list[j].second * src[i];
            }
          }
        }
      }
    }
    add_residual(y);
  }

  // --- output: logits of every token, or of the last only.
  const int first = all_logits ? 0 : n - 1;
  const int nl = n - first;
  rms_norm_rows(h + static_cast<std::size_t>(first) * d, model_->output_norm(), nl, d, m.rms_eps, x, d, d, s.threads);
  if (p.logit_scale != 1.f)
    for (std::size_t i = 0; i < static_cast<std::size_t>(nl) * d; ++i) x[i] *= p.logit_scale;
  float* lg = all_logits ? logits_out : last_logits_.data();
  s.linear(model_->output(), x, d, nl, lg, V);
  if (all_logits) std::memcpy(last_logits_.data(), lg + static_cast<std::size_t>(nl - 1) * V, sizeof(float) * V);
  n_past_ += n;
}

}  // namespace latte
